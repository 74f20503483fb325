"""What the Bubblewrap sandbox guarantees: no network, nothing writable outside cwd, a private view."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or not condukt.sandbox.Bubblewrap.available(),
    reason="bwrap is not installed or cannot make namespaces (Debian: apt-get install bubblewrap)",
)


async def results(tmp_path: Path, calls: list[Any], sandbox: condukt.sandbox.Sandbox, **options: Any) -> list[str]:
    model = ScriptedModel([calls, reply("done")])
    tools = [*condukt.tools.coding_tools(), condukt.tools.Grep, condukt.tools.Glob]
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=tools, cwd=tmp_path, sandbox=sandbox, **options)
        await agent.run("go")
        return [m.text for m in (await agent.history())[2:-1]]


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1; its port."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.fixture
def outside() -> Iterator[Path]:
    """A host directory outside the agent's cwd, with a file in it."""
    with tempfile.TemporaryDirectory() as name:
        path = Path(name)
        (path / "host.txt").write_text("host data\n")
        yield path


async def test_network_is_refused_unless_allowed(tmp_path: Path, listener: int) -> None:
    probe = f"(exec 3<>/dev/tcp/127.0.0.1/{listener}) 2>/dev/null && echo connected || echo refused"
    (closed,) = await results(tmp_path, [call("bash", {"command": probe})], condukt.sandbox.Bubblewrap())
    assert closed == "refused"
    (opened,) = await results(tmp_path, [call("bash", {"command": probe})], condukt.sandbox.Bubblewrap(network=True))
    assert opened == "connected"


async def test_writes_outside_cwd_are_refused(tmp_path: Path, outside: Path) -> None:
    texts = await results(
        tmp_path,
        [
            call("bash", {"command": f"(echo x > {outside}/new.txt) 2>/dev/null || echo refused"}),
            call("bash", {"command": "(echo x > /etc/condukt-test) 2>/dev/null || echo refused"}),
            call("bash", {"command": "echo inside > here.txt && cat here.txt"}),
            call("write", {"path": str(outside / "new.txt"), "content": "x"}),
            call("edit", {"path": str(outside / "host.txt"), "old_text": "host", "new_text": "pwned"}),
        ],
        condukt.sandbox.Bubblewrap(),
    )
    assert texts[:3] == ["refused", "refused", "inside"]
    assert "outside the sandbox" in texts[3] and "outside the sandbox" in texts[4]
    assert not (outside / "new.txt").exists()
    assert (outside / "host.txt").read_text() == "host data\n"
    assert (tmp_path / "here.txt").read_text() == "inside\n"


async def test_host_files_outside_the_view_do_not_exist(tmp_path: Path, outside: Path) -> None:
    texts = await results(
        tmp_path,
        [
            call("bash", {"command": f"cat {outside}/host.txt 2>&1 || true"}),
            call("read", {"path": str(outside / "host.txt")}),
            call("grep", {"pattern": "host", "path": str(outside)}),
        ],
        condukt.sandbox.Bubblewrap(),
    )
    assert "No such file or directory" in texts[0]
    assert "outside the sandbox" in texts[1] and "outside the sandbox" in texts[2]


async def test_declared_paths_are_visible(tmp_path: Path, outside: Path) -> None:
    texts = await results(
        tmp_path,
        [call("bash", {"command": f"cat {outside}/host.txt; echo more >> {outside}/host.txt && echo wrote"})],
        condukt.sandbox.Bubblewrap(writable=[outside]),
    )
    assert texts == ["host data\nwrote"]
    texts = await results(
        tmp_path,
        [call("bash", {"command": f"cat {outside}/host.txt; (echo more >> {outside}/host.txt) 2>/dev/null || echo ro"})],
        condukt.sandbox.Bubblewrap(readable=[outside]),
    )
    assert texts == ["host data\nmore\nro"]


async def test_the_built_in_tools_work_inside(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def main():\n    pass\n")
    texts = await results(
        tmp_path,
        [
            call("grep", {"pattern": "def main"}),
            call("glob", {"pattern": "**/*.py"}),
            call("read", {"path": "src/a.py"}),
            call("bash", {"command": "ls /proc | grep -c '^[0-9]'"}),
        ],
        condukt.sandbox.Bubblewrap(),
    )
    assert texts[0] == "src/a.py:1: def main():"
    assert texts[1] == "1 match(es) for **/*.py:\nsrc/a.py"
    assert texts[2] == "def main():\n    pass"
    assert int(texts[3]) <= 5


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match="network must be a bool"):
        condukt.sandbox.Bubblewrap(network="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="writable must be a list of paths"):
        condukt.sandbox.Bubblewrap(writable="/tmp")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not exist"):
        condukt.sandbox.Bubblewrap(readable=["/no/such/dir"])


async def test_a_missing_bwrap_is_a_clear_tool_error(tmp_path: Path) -> None:
    (text,) = await results(
        tmp_path, [call("bash", {"command": "true"})], condukt.sandbox.Bubblewrap(executable="no-such-bwrap")
    )
    assert text == (
        "Error: no-such-bwrap not found: the Bubblewrap sandbox needs it (Debian/Ubuntu: apt-get install bubblewrap)"
    )
