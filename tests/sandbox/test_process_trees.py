"""Everything a Bash or Command call started is gone after it ends, times out or is aborted.

Real time: these run real processes. ``setsid`` and double-forked children
leave the command's process group, so a group kill alone misses them (that
was the bug); the subreaper launcher, or Bubblewrap's PID namespace, does not.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from waiting import WallBound, open_fifo

import condukt
from condukt.testing import ScriptedModel, call, reply

from .conftest import processes_with

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are Linux-only")

#: Three ways a command leaves processes behind it, each holding the marker. Each escaped
#: process writes its pid into ``{ready}`` once it is out (a FIFO the test or the command
#: reads, or /dev/null), then becomes ``sleep {m}``: nothing waits on the clock for it.
ESCAPES = {
    "setsid": "setsid sh -c 'echo $$ > {ready}; exec sleep {m}' >/dev/null 2>&1 < /dev/null &",
    # a daemon: fork, setsid, fork again
    "double fork": "( setsid sh -c 'sh -c \"echo \\$\\$ > {ready}; exec sleep {m}\" >/dev/null 2>&1 < /dev/null &' & )\n",
    "nohup": "nohup sh -c 'echo $$ > {ready}; exec sleep {m}' >/dev/null 2>&1 < /dev/null &",
}


def escape_then_wait(escape: str, marker: str) -> str:
    """A command that starts ``escape`` and waits until it is out (its pid read from a FIFO), then ends."""
    return f"mkfifo ready\n{ESCAPES[escape].format(m=marker, ready='ready')}\nread pid < ready; echo started"


def sandboxes() -> list[object]:
    """The default sandbox (no option given: Local) and Bubblewrap where it runs."""
    params: list[object] = [pytest.param(None, id="default")]
    available = shutil.which("bwrap") is not None and condukt.sandbox.Bubblewrap.available()
    params.append(
        pytest.param(
            condukt.sandbox.Bubblewrap(),
            id="bubblewrap",
            marks=pytest.mark.skipif(not available, reason="bwrap is not installed or cannot make namespaces (Debian: apt-get install bubblewrap)"),
        )
    )
    return params


def with_sandbox(sandbox: Any) -> dict[str, Any]:
    return {} if sandbox is None else {"sandbox": sandbox}


async def run_bash(tmp_path: Path, command: str, sandbox: Any, **options: object) -> str:
    model = ScriptedModel([call("bash", {"command": command}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[condukt.tools.Bash(**options)], cwd=tmp_path, **with_sandbox(sandbox)
        )
        assert await agent.run("go") == "done"
        return (await agent.history())[2].text


@LINUX
@pytest.mark.parametrize("sandbox", sandboxes())
@pytest.mark.parametrize("escape", sorted(ESCAPES))
async def test_nothing_survives_the_command(
    tmp_path: Path, sandbox: Any, escape: str, marker: str, none_left: Callable[[str], bool]
) -> None:
    # The command ends once the escape is out of its group (not after a pause that a loaded machine outlasts).
    text = await run_bash(tmp_path, escape_then_wait(escape, marker), sandbox)
    assert text == "started"
    assert none_left(marker), processes_with(marker)


@LINUX
@pytest.mark.slow
@pytest.mark.parametrize("sandbox", sandboxes())
async def test_nothing_survives_a_timeout(
    tmp_path: Path, sandbox: Any, marker: str, none_left: Callable[[str], bool], wall_bound: WallBound
) -> None:
    escapes = "\n".join(template.format(m=marker, ready="/dev/null") for template in ESCAPES.values())
    with wall_bound(3.0, "a command timed out after 0.5 s and its processes killed"):
        text = await run_bash(tmp_path, f"{escapes}\nsleep {marker}", sandbox, timeout=0.5)
    assert text.startswith("Error: Command timed out after 0.5 seconds")
    assert none_left(marker), processes_with(marker)


@LINUX
@pytest.mark.parametrize("sandbox", sandboxes())
async def test_nothing_survives_an_abort(
    tmp_path: Path, sandbox: Any, marker: str, none_left: Callable[[str], bool]
) -> None:
    escapes = "\n".join(template.format(m=marker, ready="ready") for template in ESCAPES.values())
    command = f"{escapes}\nsh -c 'echo $$ > ready; exec sleep {marker}'"
    model = ScriptedModel([call("bash", {"command": command}), reply("never")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[condukt.tools.Bash], cwd=tmp_path, **with_sandbox(sandbox)
        )
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                with pytest.raises(condukt.Aborted):
                    await agent.run("go")

            async with open_fifo(tmp_path / "ready") as ready:
                nursery.start_soon(run)
                for _ in range(4):  # three escapes and the command's own sleep are out and running
                    await ready.receive_line()
            assert await agent.abort() is True
        assert agent.alive
    assert none_left(marker), processes_with(marker)


@LINUX
async def test_a_command_grant_leaves_nothing_behind(
    tmp_path: Path, marker: str, none_left: Callable[[str], bool]
) -> None:
    tool = condukt.tools.Command(command="setsid", timeout=0.5)
    model = ScriptedModel([call("setsid", {"args": ["sleep", marker]}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[tool], cwd=tmp_path)
        await agent.run("go")
        text = (await agent.history())[2].text
    assert "timed out after 0.5 seconds" in text
    assert none_left(marker), processes_with(marker)


@LINUX
async def test_without_the_launcher_only_the_process_group_is_killed(
    tmp_path: Path, marker: str, none_left: Callable[[str], bool]
) -> None:
    # reap=False is the documented fast mode: what left the group survives.
    try:
        text = await run_bash(
            # (the command ends once setsid is out of the group, before the group kill)
            tmp_path, escape_then_wait("setsid", marker), condukt.sandbox.Local(reap=False)
        )
        assert text == "started"
        assert processes_with(marker)
    finally:
        import os
        import signal

        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
    assert none_left(marker)


async def test_the_exit_status_and_signals_come_through_the_launcher(tmp_path: Path) -> None:
    assert await run_bash(tmp_path, "echo out; exit 3", None) == "out\n\n(exit code: 3)"
    assert await run_bash(tmp_path, "kill -TERM $$", None) == "(killed by signal 15)"
    # SIGPIPE is back to its default for the command (Python ignores it).
    assert await run_bash(tmp_path, "yes | head -2", None) == "y\ny"


@LINUX
@pytest.mark.parametrize("sandbox", sandboxes())
async def test_a_command_cancelled_while_it_starts_leaves_nothing(
    tmp_path: Path, sandbox: Any, marker: str, none_left: Callable[[str], bool]
) -> None:
    # A cancel that lands while the launcher or bwrap is still setting up
    # (before the command runs) must stop whatever was started.
    chosen = sandbox or condukt.sandbox.Local()
    command = ["bash", "-c", ESCAPES["setsid"].format(m=marker, ready="/dev/null") + f"\nsleep {marker}"]
    for delay in (0.0, 0.001, 0.003, 0.01, 0.03):
        with trio.move_on_after(delay):
            await chosen.run(command, cwd=tmp_path, env=chosen.environment(), timeout=60)
        assert none_left(marker), (delay, processes_with(marker))
