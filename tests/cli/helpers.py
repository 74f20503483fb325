"""Running the ``condukt`` command as a user runs it: a real process, an environment without provider keys."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from condukt.testing.server import ProtocolServer

__all__ = ["ROOT", "TIMEOUT", "condukt_cli", "environment", "listening", "model_args"]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60


def environment(**extra: str) -> dict[str, str]:
    """This environment without provider keys or a default model, with ``src`` importable."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not (name.endswith("_API_KEY") or name.startswith(("ANTHROPIC_", "OPENAI_", "CONDUKT_")))
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


async def condukt_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, stdin: bytes = b""
) -> trio.CompletedProcess[bytes]:
    with trio.fail_after(TIMEOUT):
        return await trio.run_process(
            [sys.executable, "-m", "condukt", *args],
            env=env or environment(),
            cwd=cwd,
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


@contextlib.asynccontextmanager
async def listening(
    args: list[str], first_line: bytes, cwd: Path | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[str]:
    """``condukt ARGS``: the URL its first line gives (``first_line``: a pattern with one group);
    leaving sends Ctrl-C and expects exit 0."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "condukt", *args], cwd=cwd, env=env or environment(), stdout=-1, stderr=-1
    )
    try:
        assert process.stdout is not None
        received = b""
        with trio.fail_after(TIMEOUT):
            while b"\n" not in received:
                chunk = await process.stdout.receive_some()
                assert chunk, f"condukt {args[0]} exited before listening"
                received += chunk
        match = re.match(first_line, received)
        assert match, received
        yield match.group(1).decode()
        process.send_signal(signal.SIGINT)
        with trio.fail_after(TIMEOUT):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def model_args(server: ProtocolServer) -> list[str]:
    """``--model`` and ``--base-url`` for ``server``'s Chat Completions."""
    return ["--model", "openai:gpt-4o", "--base-url", f"{server.url}/v1"]
