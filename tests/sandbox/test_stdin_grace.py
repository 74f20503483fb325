"""The launcher's ``--stdin-grace``: a command that ignores the end of its stdin is ended once its writer closes it.

For servers spoken to over a pipe (MCP's stdio): the client closes the
pipe, the launcher waits the grace, sends ``SIGTERM``, waits as long
again, then kills the tree. Real processes, so real time: each wait here
is on an event (a line the command prints, its exit), bounded only by a
generous failure timeout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from condukt.sandbox import Local

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaping launcher is Linux-only")

#: Reads stdin to its end, says so, then lives on (a thread still working), noting a SIGTERM.
STUBBORN = """
import signal, sys, threading, time
def on_term(signum, frame):
    print("terminated", flush=True)
    raise SystemExit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
sys.stdin.read()
print("stdin ended", flush=True)
threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
time.sleep(3600)
"""


def _command(tmp_path: Path, grace: float | None) -> list[str]:
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    return Local().command([sys.executable, str(script)], cwd=tmp_path, env={}, stdin_grace=grace)


async def _lines(process: trio.Process, until: str) -> list[str]:
    assert process.stdout is not None
    received = b""
    while until.encode() not in received:
        chunk = await process.stdout.receive_some()
        if not chunk:
            break
        received += chunk
    return received.decode().split()


async def test_closing_stdin_ends_a_command_that_ignores_it(tmp_path: Path) -> None:
    process = await trio.lowlevel.open_process(_command(tmp_path, 0.1), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdin is not None
        with trio.fail_after(30):
            assert await _lines(process, "ready") == ["ready"]
            await process.stdin.aclose()
            assert await _lines(process, "terminated") == ["stdin", "ended", "terminated"]
            await process.wait()
        assert process.returncode == 0  # the command's own status, after its SIGTERM handler
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_without_a_pipe_for_stdin_the_grace_never_starts(tmp_path: Path) -> None:
    # stdin at /dev/null: never "closed by its writer"; the command runs until stopped as usual.
    process = await trio.lowlevel.open_process(
        _command(tmp_path, 0.05), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    try:
        with trio.fail_after(30):
            assert await _lines(process, "ended") == ["ready", "stdin", "ended"]
        with trio.move_on_after(1.0):  # twenty graces: a grace started would have ended it
            await process.wait()
        assert process.returncode is None
        process.terminate()  # the launcher kills the tree and exits as a shell would
        with trio.fail_after(30):
            assert await process.wait() == 128 + 15
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_the_grace_is_an_option_of_the_launcher_only(tmp_path: Path) -> None:
    assert Local(reap=False).command(["server"], cwd=tmp_path, env={}, stdin_grace=1.0) == ["server"]
    assert Local().command(["server"], cwd=tmp_path, env={}, stdin_grace=1.0)[-3:] == ["--stdin-grace", "1.0", "server"]
