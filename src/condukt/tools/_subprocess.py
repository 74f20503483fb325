"""Running a tool's command through the agent's sandbox, and what the model sees of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..sandbox import ProcessResult, SandboxError
from ._output import MAX_BYTES, truncate
from ._tool import ToolContext, ToolError

__all__ = ["MAX_TIMEOUT", "effective_timeout", "format_result", "run_command"]

#: The longest timeout a model may ask ``Bash``/``Command`` for, unless the
#: tool's ``max_timeout`` option says otherwise.
MAX_TIMEOUT = 3600.0

_KEEP = 4 * MAX_BYTES  # raw bytes kept before truncation to the model's limits
#: Values shorter than this are not redacted: they would mangle ordinary text.
_MIN_REDACT = 4


async def run_command(
    context: ToolContext,
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    granted: Mapping[str, str] | None = None,
) -> ProcessResult:
    """Run ``argv`` in the agent's sandbox with the allowlisted environment plus ``granted``.

    Raises :class:`ToolError` when it cannot start. The sandbox stops the
    command and everything it started at the timeout or on cancellation.
    """
    sandbox = context.sandbox
    env = sandbox.environment({**context.secrets, **(granted or {})})
    try:
        return await sandbox.run(argv, cwd=cwd, env=env, timeout=timeout, max_output=_KEEP)
    except SandboxError as exc:
        raise ToolError(str(exc)) from None


def effective_timeout(requested: object, opts: Mapping[str, object], default: float) -> float:
    """The model's requested timeout (else the tool's default), capped by ``max_timeout``."""
    cap = float(opts.get("max_timeout") or MAX_TIMEOUT)  # type: ignore[arg-type]
    chosen = float(requested or opts.get("timeout") or default)  # type: ignore[arg-type]
    return min(chosen, cap)


def format_result(result: ProcessResult, timeout: float, redact: Mapping[str, str] | None = None) -> str:
    """The text the model sees: output (truncated), then notes on truncation and exit code.

    A timeout raises :class:`ToolError` carrying the output gathered so far.
    Values in ``redact`` (name -> value, 4 or more characters) are replaced
    by ``[REDACTED:NAME]``.
    """
    text = result.output
    for name, value in (redact or {}).items():
        if len(value) >= _MIN_REDACT:
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
