"""The ``bash`` tool: run a shell command, bounded in time and output."""

from __future__ import annotations

from typing import Any

from ._output import MAX_BYTES, MAX_LINES
from ._subprocess import effective_timeout, format_result, run_command
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
    (default one hour). The command runs in the agent's sandbox
    (:mod:`condukt.sandbox`): its environment is an allowlist (``PATH``,
    ``HOME``, locale...: declare what a command needs as an agent secret, or
    in the sandbox's ``env``/``inherit``) plus the agent's secrets, with
    ``TERM=dumb`` and no pagers; secret values are redacted from the output.
    Bash is a full shell: path confinement does not apply to what it runs;
    only a sandbox such as :class:`~condukt.sandbox.Bubblewrap` bounds it.
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
        directory). Cancelled, the sandbox stops the command and everything it
        started (``setsid`` and double-forked daemons included, see
        :class:`~condukt.sandbox.Local`) before ``trio.Cancelled`` propagates.
        """
        cwd = context.resolve_path(args["cwd"]) if args.get("cwd") else context.cwd
        timeout = effective_timeout(args.get("timeout"), self.opts, DEFAULT_TIMEOUT)
        result = await run_command(context, ["bash", "-c", args["command"]], cwd=cwd, timeout=timeout)
        return format_result(result, timeout, redact=context.secrets)
