"""The bash tool on real subprocesses (real time: no autojump clock here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from waiting import WallBound, open_fifo

import condukt
from condukt.testing import call
from condukt.tools import Bash

from .helpers import invoke, through_agent


async def test_combined_stdout_and_stderr_in_order(tmp_path: Path) -> None:
    text = await invoke(Bash(), {"command": "echo out1; echo err1 >&2; echo out2"}, tmp_path)
    assert text == "out1\nerr1\nout2"


async def test_nonzero_exit_code_is_reported(tmp_path: Path) -> None:
    assert await invoke(Bash(), {"command": "echo bad; exit 7"}, tmp_path) == "bad\n\n(exit code: 7)"
    assert await invoke(Bash(), {"command": "exit 3"}, tmp_path) == "(exit code: 3)"
    assert await invoke(Bash(), {"command": "true"}, tmp_path) == "(no output)"


async def test_output_is_truncated_at_2000_lines(tmp_path: Path) -> None:
    text = await invoke(Bash(), {"command": "seq 1 5000"}, tmp_path)
    body, note = text.rsplit("\n\n", 1)
    assert note == "(output truncated)"
    assert body.splitlines() == [str(i) for i in range(1, 2001)]


async def test_output_is_truncated_at_50_kib(tmp_path: Path) -> None:
    # ~1 MB of output in 100-byte lines; the pipe is drained, not blocked.
    text = await invoke(Bash(), {"command": "yes $(printf 'y%.0s' {1..99}) | head -n 10000"}, tmp_path)
    body, note = text.rsplit("\n\n", 1)
    assert note == "(output truncated)"
    assert len(body.encode()) <= 50 * 1024
    assert set(body.splitlines()) == {"y" * 99}


async def test_one_huge_line_shows_its_head(tmp_path: Path) -> None:
    text = await invoke(Bash(), {"command": "head -c 100000 /dev/zero | tr '\\0' z"}, tmp_path)
    body, note = text.rsplit("\n\n", 1)
    assert note == "(output truncated)"
    assert body == "z" * (50 * 1024)


async def test_runs_in_the_agent_cwd_or_the_given_cwd(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert await invoke(Bash(), {"command": "pwd"}, tmp_path) == str(tmp_path)
    assert await invoke(Bash(), {"command": "pwd"}, Path("/")) == "/"
    assert await invoke(Bash(), {"command": "pwd", "cwd": "sub"}, tmp_path) == str(tmp_path / "sub")
    with pytest.raises(condukt.ToolError, match="directory not found"):
        await invoke(Bash(), {"command": "pwd", "cwd": "missing"}, tmp_path)


async def test_environment_has_no_pager_and_a_dumb_terminal(tmp_path: Path) -> None:
    text = await invoke(Bash(), {"command": 'echo "$TERM $PAGER $GIT_PAGER"'}, tmp_path)
    assert text == "dumb cat cat"


@pytest.mark.slow
async def test_timeout_kills_the_whole_process_group(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: WallBound
) -> None:
    command = "sleep 600 & echo $! > child.pid; echo started; sleep 600"
    with wall_bound(3.0, "a command with a 0.5 s timeout"), pytest.raises(condukt.ToolError) as info:
        await invoke(Bash(), {"command": command, "timeout": 0.5}, tmp_path)
    assert str(info.value) == "Command timed out after 0.5 seconds\n\nOutput before the timeout:\nstarted"
    assert process_gone(int((tmp_path / "child.pid").read_text()))


@pytest.mark.slow
async def test_background_children_do_not_outlive_the_command(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: WallBound
) -> None:
    with wall_bound(3.0, "a command that leaves a 600 s background child"):
        text = await invoke(Bash(), {"command": "sleep 600 & echo $! > child.pid; echo parent done"}, tmp_path)
    assert text == "parent done"
    assert process_gone(int((tmp_path / "child.pid").read_text()))


async def test_cancellation_kills_the_process_group(
    tmp_path: Path, process_gone: Callable[[int], bool]
) -> None:
    command = 'sleep 600 & echo "$! $$" > pids; wait'
    async with open_fifo(tmp_path / "pids") as pidfile, trio.open_nursery() as nursery:
        nursery.start_soon(invoke, Bash(), {"command": command, "timeout": 600}, tmp_path)
        pids = await pidfile.receive_line()  # the command and its child run
        nursery.cancel_scope.cancel()
    for pid in map(int, pids.split()):
        assert process_gone(pid)


async def test_timeout_reaches_the_model_as_an_error(tmp_path: Path) -> None:
    results, _ = await through_agent(
        [Bash], call("bash", {"command": "echo partial; sleep 600", "timeout": 0.3}), tmp_path
    )
    [result] = results
    assert result.is_error
    assert result.text.startswith("Error: Command timed out after 0.3 seconds")
    assert "partial" in result.text


@pytest.mark.slow
async def test_timeout_option_sets_the_default(tmp_path: Path, wall_bound: WallBound) -> None:
    with wall_bound(3.0, "a command with a 0.2 s default timeout"), pytest.raises(
        condukt.ToolError, match="timed out after 0.2 seconds"
    ):
        await invoke(Bash(timeout=0.2), {"command": "sleep 600"}, tmp_path)


async def test_the_environment_is_an_allowlist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Host variables reach a command only when the sandbox lets them through:
    # credentials with innocent names (DATABASE_URL) stay out by default.
    monkeypatch.setenv("CONDUKT_TEST_HOST_VAR", "from-host")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:hunter22@db/x")
    command = {"command": 'echo "${CONDUKT_TEST_HOST_VAR:-unset}|${DATABASE_URL:-unset}|${PATH:+path}"'}
    assert await invoke(Bash(), command, tmp_path) == "unset|unset|path"
    inheriting = condukt.sandbox.Local(inherit=["CONDUKT_TEST_HOST_VAR"], env={"EXTRA": "x"})
    text = await invoke(Bash(), {"command": 'echo "${CONDUKT_TEST_HOST_VAR}|$EXTRA"'}, tmp_path, sandbox=inheriting)
    assert text == "from-host|x"
