"""What an MCP tool call over stdio costs through condukt's client, against the SDK's own client, in one run.

One MCP server (the SDK's ``MCPServer`` with an ``add(a, b)`` tool, in a
temporary file) is started twice: once for the SDK's ``ClientSession`` over
``stdio_client``, once for condukt (``condukt.mcp.stdio``, opened as an
agent opens it: a supervised connection process, the server under condukt's
reaping launcher). Per call, best of 9 rounds (rounds alternate the sides):

* direct: the same function as an in-process ``@condukt.tool``, ``tool.call``;
* SDK client: ``await session.call_tool("add", {...})``;
* condukt: ``await tool.call({...}, context)`` on the MCP tool the agent
  would call (the request on the shared session, the result mapped to
  condukt content).

Two figures per side: wall time per call (mostly the server's work and
the pipe round trip, so it moves with the machine's load) and this
process's CPU time per call (the client's own work: what condukt adds
shows here). Ratios are to the SDK client's figures from the same run (the
target: condukt ≤ 1.2×) and to the direct call.

    pip install -e ".[mcp]"
    python benchmarks/mcp.py
"""

from __future__ import annotations

import datetime
import gc
import importlib.metadata
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

# This file is named mcp.py: its directory, first on sys.path when run as a
# script, would shadow the SDK's `mcp` package. Import the SDK without it.
_HERE = sys.path.pop(0) if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent else None
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

import condukt  # noqa: E402
import condukt.mcp  # noqa: E402
from condukt.tools import ToolContext, ToolSourceContext  # noqa: E402

if _HERE is not None:
    sys.path.insert(0, _HERE)
from _common import report  # noqa: E402

ROUNDS = 9
CALLS = 300

SERVER = """
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bench")


@mcp.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


mcp.run()
"""


@condukt.tool(name="add")
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def main() -> None:
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

    print(
        f"MCP tool call over stdio, {CALLS} calls x best of {ROUNDS} rounds; "
        f"{datetime.date.today()}, Python {platform.python_version()}, trio {trio.__version__}, "
        f"mcp {importlib.metadata.version('mcp')}, anyio {importlib.metadata.version('anyio')}, "
        f"condukt {condukt.__version__}"
    )
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


if __name__ == "__main__":
    trio.run(main)
