"""Running a tool's command through the agent's sandbox, and what the model sees of it."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..sandbox import ProcessResult, SandboxError
from ._output import MAX_BYTES, truncate
from ._tool import ToolContext, ToolError

__all__ = ["MAX_TIMEOUT", "effective_timeout", "format_result", "run_command", "run_scan"]

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


_SCAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_scan.py")
_SCAN_OUTPUT = 1 << 20


async def run_scan(context: ToolContext, job: Mapping[str, Any]) -> str:
    """Run the ``Grep``/``Glob`` worker (``_scan.py``) on ``job`` in the agent's sandbox; its text.

    A separate process, so the tool's timeout and an abort kill it wherever
    it is (a regex match included). Raises :class:`ToolError` with the
    worker's refusal (a bad pattern, a missing path) or when it fails.
    """
    job = {**job, "confine": os.path.realpath(context.cwd) if context.confine else None}
    sandbox = context.sandbox
    argv = [sys.executable, "-I", "-S", _SCAN, json.dumps(job)]
    try:
        result = await sandbox.run(
            argv, cwd=context.cwd, env=sandbox.environment(), timeout=math.inf, max_output=_SCAN_OUTPUT, tree=False
        )
    except SandboxError as exc:
        raise ToolError(str(exc)) from None
    try:
        out = json.loads(result.output)
    except ValueError:
        raise ToolError(f"the search failed (exit code {result.exit_code}): {result.output[-500:]}") from None
    if "error" in out:
        raise ToolError(out["error"])
    return str(out["text"])


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
