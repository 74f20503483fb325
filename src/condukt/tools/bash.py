"""The ``bash`` tool: run a shell command, bounded in time and output."""

from __future__ import annotations

import os
from typing import Any

from ._output import MAX_BYTES, MAX_LINES
from ._subprocess import BASE_ENV, CREDENTIAL_NAME, effective_timeout, format_result, run_process
from ._tool import Tool, ToolContext

__all__ = ["Bash", "DEFAULT_TIMEOUT"]

#: Seconds a command may run unless the model asks for another limit.
DEFAULT_TIMEOUT = 120.0


class Bash(Tool):
    """Run ``bash -c <command>`` in the agent's working directory (or ``cwd``).

    Returns stdout and stderr combined, truncated to 2000 lines / 50 KiB,
    followed by ``(exit code: N)`` when it is not 0. On timeout or abort the
    whole process group is killed. The model picks the timeout (default
    120 s, or the ``timeout`` option), capped by the ``max_timeout`` option
    (default one hour). The environment is the host's minus
    variables whose names look like credentials (``*API_KEY*``, ``*TOKEN*``,
    ``*SECRET*``, ``*PASSWORD*``...: declare what a command needs as an agent
    secret), plus the agent's secrets, with ``TERM=dumb`` and no pagers. Bash is a full shell:
    path confinement does not apply to what it runs.
    """

    name = "bash"
    description = (
        "Execute a bash command in the current working directory. Returns combined stdout/stderr. "
        f"Output is truncated to {MAX_LINES} lines or {MAX_BYTES // 1024}KB. "
        "Optionally provide a cwd and a timeout in seconds."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "Bash command to execute"},
            "cwd": {"type": "string", "description": "Directory to run the command in"},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": f"Timeout in seconds (default {DEFAULT_TIMEOUT:g})",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    timeout = None  # enforced per call, with a process-group kill

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Run the command.

        Raises :class:`ToolError` when it times out (with the output so far)
        or cannot start (``cwd`` missing or outside a confined working
        directory). Cancelled, it kills the process group (SIGKILL) and reaps
        the shell before ``trio.Cancelled`` propagates; processes that left the
        group (``setsid``, daemons) survive.
        """
        cwd = context.resolve_path(args["cwd"]) if args.get("cwd") else context.cwd
        timeout = effective_timeout(args.get("timeout"), self.opts, DEFAULT_TIMEOUT)
        env = {k: v for k, v in os.environ.items() if not CREDENTIAL_NAME.search(k)}
        env.update(BASE_ENV)
        env.update(context.secrets)
        result = await run_process(["bash", "-c", args["command"]], cwd=cwd, env=env, timeout=timeout)
        return format_result(result, timeout, redact=_redactions(context.secrets))


def _redactions(secrets: Any) -> dict[str, str]:
    # Values shorter than 4 characters would redact ordinary text.
    return {name: value for name, value in secrets.items() if len(value) >= 4}
