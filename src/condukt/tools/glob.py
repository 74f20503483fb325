"""The ``glob`` tool: find files by pattern."""

from __future__ import annotations

from typing import Any

from ._subprocess import run_scan
from ._tool import Tool, ToolContext

__all__ = ["Glob", "DEFAULT_LIMIT"]

DEFAULT_LIMIT = 1000


class Glob(Tool):
    """List files matching a glob pattern (``**``, ``*``, ``?``, ``[abc]``), sorted.

    When the agent confines tools to its cwd, paths that lead out of it
    through symlinks are left out. The walk runs in a worker process in the
    agent's sandbox, killed at the tool's timeout or an abort; memory holds
    only the ``limit`` paths shown.
    """

    name = "glob"
    idempotent = True  # read-only: a second call has the effect of one
    description = (
        "Find files by glob pattern (e.g. `**/*.py`). Returns matching paths relative to the "
        f"search directory, at most {DEFAULT_LIMIT} by default."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": 'Glob pattern, e.g. "**/*.py"'},
            "cwd": {"type": "string", "description": "Directory to search from (default: working dir)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum paths to return"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Run the search.

        Raises :class:`ToolError` for a missing directory (or one outside a
        confined working directory) or a pattern that is absolute, contains
        ``..`` or is invalid. On cancellation (the tool's timeout, an abort)
        the worker process is killed before ``trio.Cancelled`` propagates.
        """
        display = args.get("cwd") or "."
        root = context.resolve_path(display)
        job = {
            "mode": "glob",
            "root": str(root),
            "display": display,
            "pattern": args["pattern"],
            "limit": int(args.get("limit") or DEFAULT_LIMIT),
        }
        return await run_scan(context, job)
