"""A real MCP server written with the SDK's MCPServer (FastMCP in mcp 1.x), started by the tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="condukt.mcp needs the [mcp] extra (pip install '.[test]' brings it)")

SERVER = '''
import os, subprocess, sys
import anyio
from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("demo")
MARKS = os.environ.get("MARKS", "")
if os.environ.get("STARTS"):  # a line per start of this server: a test waits for a restart on it
    with open(os.environ["STARTS"], "a") as starts:
        starts.write(f"{os.getpid()}\\n")


def mark(text):
    if MARKS:
        with open(MARKS, "a") as f:
            f.write(text + "\\n")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@mcp.tool()
async def slow() -> str:
    """Take 30 seconds."""
    mark("slow started")
    try:
        await anyio.sleep(30)
    except BaseException:
        mark("slow cancelled")
        raise
    return "done"


@mcp.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@mcp.tool()
def token() -> str:
    """The TOKEN variable."""
    return "token is " + os.environ.get("TOKEN", "unset")


@mcp.tool()
def spawn() -> int:
    """Start a long sleep in a session of its own; its pid."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    return child.pid


@mcp.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `shout` and say so."""

    def shout(text: str) -> str:
        """Upper-case text."""
        return text.upper()

    mcp.add_tool(shout)
    await ctx.session.send_tool_list_changed()
    return "grown"


mcp.run()
'''


@pytest.fixture
def server_script(tmp_path: Path) -> list[str]:
    """The command that starts the test server (``python <tmp>/server.py``)."""
    path = tmp_path / "server.py"
    path.write_text(SERVER)
    return [sys.executable, str(path)]


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """The file the server appends notes to (``slow started``, ``slow cancelled``); a test may make it a FIFO."""
    return tmp_path / "marks.txt"
