"""Built-in tools never block or balloon: FIFOs, devices, huge files, pathological regexes.

Real time (the work is real), with a ticker proving the node's event loop
never froze while a tool ran.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from waiting import WallBound

import condukt
from condukt.events import ToolCallEnd, ToolCallStart
from condukt.testing import ScriptedModel, call, reply

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and /dev")


def peak_rss_since_reset() -> int:
    """This process's peak resident set size since :func:`reset_peak_rss` (bytes; the kernel keeps it)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def reset_peak_rss() -> int:
    """Reset the kernel's peak RSS of this process to its current RSS (Linux 4.0+); returns it."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return peak_rss_since_reset()


#: Ticks of a 10 ms ticker a tool call must let through while it runs: a frozen event loop
#: gives at most one, a starved but running one (a loaded 2-core machine) still many.
RESPONSIVE_TICKS = 5


async def one_call(tmp_path: Path, tool: Any, name: str, args: dict[str, Any], **options: Any) -> tuple[str, int]:
    """Run one tool call through an agent; (result text, ticks of a 10 ms ticker while the tool ran)."""
    model = ScriptedModel([call(name, args), reply("done")])
    ticks = 0
    running = False

    async def on_event(event: Any) -> None:
        nonlocal running
        if isinstance(event, (ToolCallStart, ToolCallEnd)):
            running = isinstance(event, ToolCallStart)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.01)
            ticks += running

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[tool], cwd=tmp_path, **options)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            assert await agent.run("go", on_event=on_event) == "done"
            nursery.cancel_scope.cancel()
        text = (await agent.history())[2].text
    return text, ticks


@LINUX
@pytest.mark.slow
async def test_reading_a_fifo_is_refused_at_once(tmp_path: Path, wall_bound: WallBound) -> None:
    os.mkfifo(tmp_path / "pipe")
    with wall_bound(1.0, "refusing a FIFO"):  # (opening it to read would block until the 5 s deadline)
        text, _ = await one_call(tmp_path, condukt.tools.Read, "read", {"path": "pipe"}, tool_timeout=5)
    assert text == "Error: pipe is a FIFO (named pipe), not a regular file; it cannot be read or written"


@LINUX
@pytest.mark.slow
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
async def test_reading_a_device_is_refused(tmp_path: Path, device: str, wall_bound: WallBound) -> None:
    before = reset_peak_rss()
    with wall_bound(1.0, f"refusing {device}"):
        text, _ = await one_call(tmp_path, condukt.tools.Read, "read", {"path": device}, tool_timeout=5)
    assert text == f"Error: {device} is a device or socket, not a regular file; it cannot be read or written"
    assert peak_rss_since_reset() - before < 50 * 2**20


@LINUX
@pytest.mark.slow
@pytest.mark.parametrize("tool, name, args", [
    (condukt.tools.Write, "write", {"path": "pipe", "content": "x"}),
    (condukt.tools.Edit, "edit", {"path": "pipe", "old_text": "a", "new_text": "b"}),
])  # fmt: skip
async def test_writing_or_editing_a_fifo_is_refused(
    tmp_path: Path, tool: Any, name: str, args: Any, wall_bound: WallBound
) -> None:
    os.mkfifo(tmp_path / "pipe")
    with wall_bound(1.0, f"refusing to {name} a FIFO"):
        text, _ = await one_call(tmp_path, tool, name, args, tool_timeout=5)
    assert "pipe is a FIFO (named pipe), not a regular file" in text
    assert (tmp_path / "pipe").is_fifo()


@LINUX
@pytest.mark.slow
async def test_a_1_gb_file_streams_within_the_deadline_and_memory(tmp_path: Path, wall_bound: WallBound) -> None:
    # 1 GiB: a text head, then a sparse tail of one enormous line.
    big = tmp_path / "big.log"
    with open(big, "wb") as handle:
        handle.write(b"first line\n" * 1000)
        handle.truncate(2**30)
    before = reset_peak_rss()
    # The run's own work (two model turns) on top of the tool's deadline.
    with wall_bound(1.05 + 0.3, "a 1 GiB read with a 1 s deadline"):
        text, ticks = await one_call(tmp_path, condukt.tools.Read, "read", {"path": "big.log"}, tool_timeout=1)
    assert peak_rss_since_reset() - before < 50 * 2**20  # the kernel's peak, not samples of it
    assert ticks >= RESPONSIVE_TICKS  # the event loop kept running
    assert text.startswith("(showing lines 1-1001 of 1001, output truncated") or "timed out after 1 second" in text


async def test_a_long_line_is_shown_cut_with_a_header(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("x" * 200_000 + "\nsecond\n")
    text, _ = await one_call(tmp_path, condukt.tools.Read, "read", {"path": "min.js"})
    assert text.startswith("(showing lines 1-1 of 2, output truncated; line 1 is longer than 50KB and was cut;")
    assert len(text) < 52_000


async def test_offset_and_limit_page_through_a_streamed_file(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 300_001)))
    text, _ = await one_call(tmp_path, condukt.tools.Read, "read", {"path": "n.txt", "offset": 250_000, "limit": 2})
    assert text == "(lines 250000-250001 of 300000)\n\nline 250000\nline 250001"


@pytest.mark.slow
async def test_a_pathological_regex_is_killed_at_the_deadline(tmp_path: Path, wall_bound: WallBound) -> None:
    (tmp_path / "a.txt").write_text("a" * 40 + "!\n")
    with wall_bound(1.05 + 0.3, "a runaway regex with a 1 s deadline"):
        text, ticks = await one_call(tmp_path, condukt.tools.Grep, "grep", {"pattern": "(a+)+$"}, tool_timeout=1)
    assert text == "Error: tool 'grep' timed out after 1 seconds"
    # The node did not freeze while the regex ran. (Not a tick rate: the regex's worker
    # burns a core, so on a loaded 2-core machine the ticker gets a fraction of its 100.)
    assert ticks >= RESPONSIVE_TICKS


@pytest.mark.slow
async def test_grep_skips_fifos_and_still_finds_matches(tmp_path: Path, wall_bound: WallBound) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("needle\n")
    with wall_bound(2.0, "grep past a FIFO"):  # (reading the FIFO would block until the 5 s deadline)
        text, _ = await one_call(tmp_path, condukt.tools.Grep, "grep", {"pattern": "needle"}, tool_timeout=5)
    assert text == "a.txt:1: needle"


async def test_glob_is_bounded_in_results(tmp_path: Path) -> None:
    for i in range(50):
        (tmp_path / f"f{i:02d}.txt").write_text("")
    text, _ = await one_call(tmp_path, condukt.tools.Glob, "glob", {"pattern": "*.txt", "limit": 3})
    assert text == "50 match(es) for *.txt:\nf00.txt\nf01.txt\nf02.txt\n(47 more not shown; narrow the pattern)"


def test_an_abandoned_write_never_lands(tmp_path: Path) -> None:
    # What a Write or Edit cut off by its timeout or an abort does in its
    # worker thread: the new content never replaces the file, no temp file stays.
    from condukt.tools._files import Abandoned, replace_file

    target = tmp_path / "f.txt"
    target.write_text("old")
    abandoned = Abandoned()
    abandoned.set()
    with pytest.raises(condukt.ToolError):
        replace_file(target, "f.txt", b"new", abandoned)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]
    replace_file(target, "f.txt", b"new", Abandoned())
    assert target.read_text() == "new"
