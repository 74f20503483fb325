"""The ``Command`` tool: one trusted executable, no shell, trusted environment."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ._output import MAX_BYTES, MAX_LINES
from ._subprocess import BASE_ENV, MAX_TIMEOUT, SAFE_ENV_VARS, effective_timeout, format_result, run_process
from ._tool import Tool, ToolContext, ToolError

__all__ = ["Command"]

_DEFAULT_TIMEOUT = 120.0


class Command(Tool):
    """Expose one executable (``git``, ``gh``, ``mix``...) without a shell.

    Options: ``command`` (the executable, required), ``name`` and
    ``description`` (defaults derived from the command), ``env`` (variables
    set by trusted code, e.g. tokens: never shown to the model, never in
    history or events; their values are redacted from the output) and
    ``timeout`` (default seconds) and ``max_timeout`` (the most the model
    may ask for; one hour by default). The model passes ``args`` (a list of
    strings, no shell parsing), optionally ``cwd`` and ``timeout``.

    The subprocess gets a minimal environment: a few safe host variables
    (``PATH``, ``HOME``, locale...), ``TERM=dumb``, ``PAGER=cat``,
    ``GIT_PAGER=cat``, the agent's secrets and ``env``.
    """

    timeout = None  # enforced per call, with a process-group kill

    def __init__(
        self,
        *,
        command: str,
        name: str | None = None,
        description: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
        max_timeout: float = MAX_TIMEOUT,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise ValueError("Command needs a non-empty command= option")
        env = {str(k): str(v) for k, v in (env or {}).items()}
        super().__init__(
            command=command, name=name, description=description, env=env, timeout=timeout, max_timeout=max_timeout
        )

    @property
    def name(self) -> str:  # type: ignore[override]
        """The ``name`` option, else the executable's base name."""
        given = self.opts.get("name")
        if given:
            return str(given)
        return re.sub(r"[^A-Za-z0-9_-]", "_", os.path.basename(self.opts["command"]))[:64]

    @property
    def description(self) -> str:  # type: ignore[override]
        """The ``description`` option, else a generated one."""
        given = self.opts.get("description")
        if given:
            return str(given)
        return (
            f"Execute the trusted `{self.opts['command']}` command without shell parsing. "
            f"Pass arguments as an array of strings. Output is truncated to {MAX_LINES} lines or "
            f"{MAX_BYTES // 1024}KB. Environment variables come from trusted configuration, not from you."
        )

    parameters = {
        "type": "object",
        "properties": {
            "args": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Arguments to pass to the command",
            },
            "cwd": {"type": "string", "description": "Directory to run the command in"},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Timeout in seconds"},
        },
        "additionalProperties": False,
    }

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Run the command with ``args["args"]``.

        Raises :class:`ToolError` when the executable is missing or not
        runnable, ``cwd`` is missing or outside a confined working directory,
        or it times out (with the output so far). Cancelled, it kills the
        process group (SIGKILL) and reaps the process before
        ``trio.Cancelled`` propagates.
        """
        cwd = context.resolve_path(args["cwd"]) if args.get("cwd") else context.cwd
        timeout = effective_timeout(args.get("timeout"), self.opts, _DEFAULT_TIMEOUT)
        trusted: dict[str, str] = self.opts["env"]
        env = {k: os.environ[k] for k in SAFE_ENV_VARS if k in os.environ}
        env.update(BASE_ENV)
        env.update(context.secrets)
        env.update(trusted)
        command = self.opts["command"]
        if os.sep not in command and not any(
            os.access(os.path.join(d, command), os.X_OK) for d in env.get("PATH", "").split(os.pathsep) if d
        ):
            raise ToolError(f"executable not found: {command}")
        result = await run_process([command, *args.get("args", [])], cwd=cwd, env=env, timeout=timeout)
        redact = {k: v for k, v in {**context.secrets, **trusted}.items() if len(v) >= 4}
        return format_result(result, timeout, redact=redact)
