"""Running a subprocess for a tool: its own process group, bounded output, real kills.

The command starts in a new session (so it leads its own process group).
When it exits, times out or the call is cancelled (an abort, a run
timeout), the whole group gets ``SIGKILL``: nothing the command started in
the background outlives the call.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence

import attrs
import trio

from ._output import MAX_BYTES
from ._tool import ToolError

__all__ = [
    "BASE_ENV",
    "CREDENTIAL_NAME",
    "MAX_TIMEOUT",
    "SAFE_ENV_VARS",
    "ProcessOutput",
    "effective_timeout",
    "format_result",
    "run_process",
]

#: Variables a ``Command`` inherits from the host environment.
SAFE_ENV_VARS = (
    "PATH", "HOME", "USER", "LOGNAME", "HOSTNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "TMPDIR", "TMP", "TEMP",
)  # fmt: skip
#: Host variables ``Bash`` does not pass on: they look like credentials, and
#: the model could print them. Declared agent secrets are passed explicitly.
CREDENTIAL_NAME = re.compile(
    r"API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_?KEY|ACCESS_?KEY", re.IGNORECASE
)

#: Set for every tool subprocess: no pagers, no terminal escapes.
BASE_ENV = {"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}

#: The longest timeout a model may ask ``Bash``/``Command`` for, unless the
#: tool's ``max_timeout`` option says otherwise.
MAX_TIMEOUT = 3600.0

_KEEP = 4 * MAX_BYTES  # raw bytes kept before truncation to the model's limits
_DRAIN_GRACE = 2.0  # seconds to collect output after the group was killed


@attrs.frozen
class ProcessOutput:
    """What a finished subprocess produced (stdout and stderr combined)."""

    output: str
    exit_code: int | None
    timed_out: bool
    total_bytes: int


def _kill_group(process: trio.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout: float,
) -> ProcessOutput:
    """Run ``argv`` and collect its combined output.

    Raises :class:`ToolError` if it cannot start (missing executable or
    directory). On cancellation the process group is killed and reaped before
    ``Cancelled`` propagates.
    """
    if not os.path.isdir(cwd):
        raise ToolError(f"directory not found: {cwd}")
    try:
        process = await trio.lowlevel.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=os.fspath(cwd),
            env=dict(env),
            start_new_session=True,
        )
    except FileNotFoundError:
        raise ToolError(f"executable not found: {argv[0]}") from None
    except PermissionError:
        raise ToolError(f"permission denied running {argv[0]}") from None
    buffer = bytearray()
    total = 0
    drained = trio.Event()
    stdout = process.stdout
    assert stdout is not None

    async def read() -> None:
        nonlocal total
        try:
            while True:
                chunk = await stdout.receive_some(65536)
                if not chunk:
                    break
                total += len(chunk)
                room = _KEEP - len(buffer)
                if room > 0:
                    buffer.extend(chunk[:room])
        except trio.ClosedResourceError:
            pass
        finally:
            drained.set()

    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            with trio.move_on_after(timeout) as scope:
                await process.wait()
            timed_out = scope.cancelled_caught
            _kill_group(process)  # stragglers the command left in the background
            with trio.move_on_after(_DRAIN_GRACE):
                await drained.wait()
            nursery.cancel_scope.cancel()
    finally:
        _kill_group(process)
        with trio.CancelScope(shield=True):
            await process.wait()
            await stdout.aclose()
    return ProcessOutput(
        buffer.decode("utf-8", "replace"),
        None if timed_out else process.returncode,
        timed_out,
        total,
    )


def effective_timeout(requested: object, opts: Mapping[str, object], default: float) -> float:
    """The model's requested timeout (else the tool's default), capped by ``max_timeout``."""
    cap = float(opts.get("max_timeout") or MAX_TIMEOUT)  # type: ignore[arg-type]
    chosen = float(requested or opts.get("timeout") or default)  # type: ignore[arg-type]
    return min(chosen, cap)


def format_result(result: ProcessOutput, timeout: float, redact: Mapping[str, str] | None = None) -> str:
    """The text the model sees: output (truncated), then notes on truncation and exit code.

    A timeout raises :class:`ToolError` carrying the output gathered so far.
    Values in ``redact`` (name -> value) are replaced by ``[REDACTED:NAME]``.
    """
    from ._output import truncate

    text = result.output
    for name, value in (redact or {}).items():
        if value:
            text = text.replace(value, f"[REDACTED:{name}]")
    text, truncated = truncate(text)
    truncated = truncated or result.total_bytes > _KEEP
    if result.timed_out:
        tail = f"\n\nOutput before the timeout:\n{text.rstrip()}" if text.strip() else ""
        raise ToolError(f"Command timed out after {timeout:g} seconds{tail}")
    parts = [text.rstrip("\n")] if text.strip() else []
    if truncated:
        parts.append("(output truncated)")
    code = result.exit_code
    if code is not None and code < 0:
        parts.append(f"(killed by signal {-code})")
    elif code:
        parts.append(f"(exit code: {code})")
    return "\n\n".join(parts) if parts else "(no output)"
