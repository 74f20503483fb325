"""What condukt's MCP client costs against the SDK's own, in one run: a tool call, the import, leaving a node.

1. A tool call over stdio. One MCP server (the SDK's ``MCPServer`` with an
   ``add(a, b)`` tool, in a temporary file) is started twice: once for the
   SDK's ``ClientSession`` over ``stdio_client``, once for condukt
   (``condukt.mcp.stdio``, opened as an agent opens it: a supervised
   connection process, the server under condukt's reaping launcher). Per
   call, best of 9 rounds (rounds alternate the sides):

   * direct: the same function as an in-process ``@condukt.tool``, ``tool.call``;
   * SDK client: ``await session.call_tool("add", {...})``;
   * condukt: ``await tool.call({...}, context)`` on the MCP tool the agent
     would call (the request on the shared session, the result mapped to
     condukt content).

   Two figures per side: wall time per call (mostly the server's work and
   the pipe round trip, so it moves with the machine's load) and this
   process's CPU time per call (the client's own work: what condukt adds
   shows here). Ratios are to the SDK client's figures from the same run
   (the target: condukt <= 1.2x) and to the direct call.

2. ``import condukt.mcp`` in a fresh interpreter, CPU time, best of 5: as
   it is (the SDK imported when a server first connects) against what it
   imported before (its connection, tool and serving modules, and so the
   SDK's client and server), on top of ``import condukt``.

3. Leaving a node whose agent uses 3 stdio servers, wall time of the
   node's exit: servers that exit when their stdin closes, and servers that
   do not (a thread still working), with ``close_timeout`` at its default
   (the launcher ends a server that long after its stdin closed) against
   ``close_timeout=None`` (the SDK's own fixed 2 s wait before its SIGTERM,
   condukt's behaviour before). Best of 2 rounds.

    pip install -e ".[mcp]"
    python benchmarks/mcp_servers.py
"""

from __future__ import annotations

import datetime
import gc
import importlib.metadata
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
from _common import report
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import condukt
import condukt.mcp
from condukt.testing import ScriptedModel, call, reply
from condukt.tools import ToolContext, ToolSourceContext

ROUNDS = 9
CALLS = 300

SERVER = """
import os, threading, time
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bench")


@mcp.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


if os.environ.get("STUBBORN") == "1":  # work that outlives the session: the process does not exit with stdin
    threading.Thread(target=time.sleep, args=(3600,)).start()
mcp.run()
"""


@condukt.tool(name="add")
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def tool_calls() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(SERVER)
        command = [sys.executable, str(script)]
        context = ToolContext(None, Path(tmp))
        async with condukt.open_node() as node:
            tool_set = await condukt.mcp.stdio(*command).open(ToolSourceContext(node, None, Path(tmp)))
            (remote,) = [tool for tool in tool_set.tools() if tool.name == "add"]
            parameters = StdioServerParameters(command=command[0], args=command[1:])
            async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()

                async def direct() -> None:
                    for i in range(CALLS):
                        await add.call({"a": i, "b": 1}, context)

                async def sdk() -> None:
                    for i in range(CALLS):
                        result = await session.call_tool("add", {"a": i, "b": 1})
                    assert result.content[0].text == str(CALLS)  # type: ignore[union-attr]

                async def ours() -> None:
                    for i in range(CALLS):
                        result = await remote.call({"a": i, "b": 1}, context)
                    assert result[0].text == str(CALLS)

                async def measure(name: str, fn: Callable[[], Awaitable[None]]) -> None:
                    gc.collect()
                    wall, cpu = time.perf_counter(), time.process_time()
                    await fn()
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    best[name] = min(best[name], wall / CALLS)
                    best[name + " cpu"] = min(best[name + " cpu"], cpu / CALLS)

                best = {f"{name}{kind}": float("inf") for name in ("direct", "sdk", "condukt") for kind in ("", " cpu")}
                for warm in (sdk, ours):  # imports, pydantic caches, the server's first calls
                    await warm()
                for round_ in range(ROUNDS):
                    order = [("sdk", sdk), ("condukt", ours)]
                    if round_ % 2:
                        order.reverse()
                    for name, fn in order:
                        await measure(name, fn)
                    await measure("direct", direct)
            await tool_set.aclose()

    print(f"\nMCP tool call over stdio, {CALLS} calls x best of {ROUNDS} rounds:")
    rows = []
    for label, name in (
        ("direct in-process @condukt.tool call", "direct"),
        ("SDK ClientSession.call_tool", "sdk"),
        ("condukt.mcp tool.call", "condukt"),
    ):
        rows.append((f"{label}: wall", best[name] * 1e6, "µs/call"))
        rows.append((f"{label}: client CPU", best[name + " cpu"] * 1e6, "µs/call"))
    report(rows)
    print(
        f"  condukt / SDK client: wall {best['condukt'] / best['sdk']:.2f}x, "
        f"client CPU {best['condukt cpu'] / best['sdk cpu']:.2f}x   (target <= 1.2x)"
    )
    print(f"  SDK client / direct (wall): {best['sdk'] / best['direct']:.0f}x")


IMPORT_ROUNDS = 5
BEFORE_IMPORTS = "import condukt.mcp, condukt.mcp._connection, condukt.mcp._serve, condukt.mcp._tool"


def import_cost() -> None:
    """``import condukt.mcp`` on top of ``import condukt``, fresh interpreters, CPU seconds."""
    code = (
        "import time, condukt\n"
        "start = time.process_time()\n"
        "{imports}\n"
        "print(time.process_time() - start)\n"
    )
    best = {"now": float("inf"), "before": float("inf")}
    for _ in range(IMPORT_ROUNDS):
        for name, imports in (("now", "import condukt.mcp"), ("before", BEFORE_IMPORTS)):
            done = subprocess.run(
                [sys.executable, "-c", code.format(imports=imports)], capture_output=True, text=True, check=True
            )
            best[name] = min(best[name], float(done.stdout))
    print(f"\nimport condukt.mcp after import condukt, fresh interpreter, CPU, best of {IMPORT_ROUNDS}:")
    report(
        [
            ("as it is (the SDK imported on first connection)", best["now"] * 1e3, "ms"),
            ("before: with its client and server modules (the SDK)", best["before"] * 1e3, "ms"),
        ]
    )
    print(f"  now / before: {best['now'] / best['before']:.3f}x")


SERVERS = 3
EXIT_ROUNDS = 2


async def leave_node(script: Path, stubborn: bool, close_timeout: float | None) -> float:
    """Seconds the node's exit takes, its agent using ``SERVERS`` stdio servers."""
    env = {"STUBBORN": "1" if stubborn else "0"}
    servers = [
        condukt.mcp.stdio(sys.executable, str(script), str(i), env=env, prefix=f"s{i}", close_timeout=close_timeout)
        for i in range(SERVERS)
    ]
    model = ScriptedModel([call("s0_add", {"a": 1, "b": 2}), reply("3")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=servers)
        await agent.run("add")
        start = time.perf_counter()
    return time.perf_counter() - start


async def node_exit() -> None:
    default = condukt.mcp.stdio("x").close_timeout
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(SERVER)
        cases = [
            ("servers exiting with their stdin", False, default),
            ("servers ignoring their closed stdin", True, default),
            ("servers ignoring their closed stdin", True, None),
        ]
        best = [float("inf")] * len(cases)
        for _ in range(EXIT_ROUNDS):
            for index, (_, stubborn, close_timeout) in enumerate(cases):
                best[index] = min(best[index], await leave_node(script, stubborn, close_timeout))
    print(f"\nleaving a node whose agent uses {SERVERS} stdio MCP servers, wall, best of {EXIT_ROUNDS}:")
    report(
        [
            (f"{label}, close_timeout={close_timeout}", seconds * 1e3, "ms")
            for (label, _, close_timeout), seconds in zip(cases, best, strict=True)
        ]
    )
    print(f"  per server: {best[1] / SERVERS:.2f} s now, {best[2] / SERVERS:.2f} s with the SDK's wait "
          f"({best[1] / best[2]:.2f}x)")


async def main() -> None:
    print(
        f"{datetime.date.today()}, Python {platform.python_version()}, trio {trio.__version__}, "
        f"mcp {importlib.metadata.version('mcp')}, anyio {importlib.metadata.version('anyio')}, "
        f"condukt {condukt.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    await tool_calls()
    import_cost()
    await node_exit()


if __name__ == "__main__":
    trio.run(main)
