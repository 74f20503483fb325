"""Leaving a stdio MCP server: its stdin closed, a bounded wait (``close_timeout``), then SIGTERM, then the tree killed.

And ``import condukt.mcp`` leaves the SDK unimported until a server connects.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

import condukt
import condukt.mcp
from condukt.testing import ScriptedModel, call, reply

#: An MCP server whose process outlives its session (a thread still working), so it does not
#: exit when its stdin closes; it notes a SIGTERM, and a clean exit, in MARKS.
STUBBORN = """
import os, signal, sys, threading, time
from mcp.server.mcpserver import MCPServer

MARKS = os.environ["MARKS"]
STUBBORN = os.environ.get("STUBBORN") == "1"


def mark(text):
    with open(MARKS, "a") as f:
        f.write(text + "\\n")


def on_term(signum, frame):
    mark("terminated")
    os._exit(0)


signal.signal(signal.SIGTERM, on_term)
mcp = MCPServer("stubborn")


@mcp.tool()
def pid() -> int:
    \"\"\"This server's process id.\"\"\"
    return os.getpid()


if STUBBORN:
    threading.Thread(target=time.sleep, args=(3600,)).start()
mcp.run()
mark("stdin closed: exiting")
"""


@pytest.fixture
def stubborn(tmp_path: Path) -> Callable[..., condukt.mcp.McpServer]:
    """``stubborn(ignores_stdin, **options)``: a stdio definition of that server (its marks in tmp_path/marks)."""
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)

    def make(ignores_stdin: bool, **options: object) -> condukt.mcp.McpServer:
        env = {"MARKS": str(tmp_path / "marks"), "STUBBORN": "1" if ignores_stdin else "0"}
        return condukt.mcp.stdio(sys.executable, str(script), env=env, **options)  # type: ignore[arg-type]

    return make


def _marks(tmp_path: Path) -> list[str]:
    path = tmp_path / "marks"
    return path.read_text().splitlines() if path.exists() else []


async def _stop_agent(
    server: condukt.mcp.McpServer, stopping: Callable[[], contextlib.AbstractContextManager[None]]
) -> int:
    """Start an agent with ``server``, call its ``pid`` tool, stop the agent (its last user) inside ``stopping()``.

    The server's pid.
    """
    model = ScriptedModel([call("pid", {}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[server])
        await agent.run("pid?")
        with stopping():
            await agent.stop()
    (result,) = [m for m in model.requests[-1].messages if type(m).__name__ == "ToolResultMessage"]
    return int(result.text)


@pytest.mark.slow
async def test_a_server_ignoring_its_closed_stdin_is_terminated_after_close_timeout(
    stubborn: Callable[..., condukt.mcp.McpServer],
    tmp_path: Path,
    process_gone: Callable[[int], bool],
    wall_bound: Callable[[float, str], contextlib.AbstractContextManager[None]],
) -> None:
    # The SDK alone waits 2 s before its SIGTERM; the launcher's grace is close_timeout.
    what = "stopping the last agent of an MCP server that ignores its closed stdin (close_timeout=0.1)"
    pid = await _stop_agent(stubborn(True, close_timeout=0.1), lambda: wall_bound(0.45, what))
    assert process_gone(pid)
    assert _marks(tmp_path) == ["stdin closed: exiting", "terminated"]  # its session ended, its process did not


async def test_a_server_that_exits_on_its_own_is_not_cut_short(
    stubborn: Callable[..., condukt.mcp.McpServer], tmp_path: Path, process_gone: Callable[[int], bool]
) -> None:
    # Far below the grace: the server's own exit ends the wait.
    pid = await _stop_agent(stubborn(False, close_timeout=30.0), lambda: trio.fail_after(25))  # type: ignore[arg-type,return-value]
    assert process_gone(pid)
    assert _marks(tmp_path) == ["stdin closed: exiting"]  # no SIGTERM


def test_close_timeout_is_checked() -> None:
    with pytest.raises(ValueError, match="close_timeout must be a number of seconds >= 0 or None"):
        condukt.mcp.stdio("server", close_timeout=-1)
    with pytest.raises(TypeError, match="unknown option"):
        condukt.mcp.stdio("server", close_wait=1)
    assert condukt.mcp.stdio("server").close_timeout == 1.0
    assert condukt.mcp.stdio("server", close_timeout=None).close_timeout is None


def test_import_condukt_mcp_leaves_the_sdk_unimported_until_used() -> None:
    code = (
        "import sys, condukt.mcp\n"
        "condukt.mcp.stdio('server')\n"
        "print(sorted(m for m in ('mcp', 'mcp_types') if m in sys.modules))\n"
        "condukt.mcp.render\n"
        "print(sorted(m for m in ('mcp', 'mcp_types') if m in sys.modules))\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[2] / "src"), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "['mcp', 'mcp_types']"]
