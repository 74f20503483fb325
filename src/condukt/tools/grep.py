"""The ``grep`` tool: search file contents by regular expression."""

from __future__ import annotations

from typing import Any

from ._subprocess import run_scan
from ._tool import Tool, ToolContext

__all__ = ["Grep", "DEFAULT_LIMIT"]

DEFAULT_LIMIT = 200


class Grep(Tool):
    """Search files for a Python regular expression; lines come back as ``path:line: text``.

    Skips binary files and VCS / dependency directories (``.git``,
    ``node_modules``...). ``glob`` filters file paths, ``path`` picks the root
    (a directory or one file). When the agent confines tools to its cwd,
    symlinks leading out of it are skipped. Files are streamed (the first
    64 MiB of each are searched); FIFOs and devices are skipped.

    The search runs in a separate worker process in the agent's sandbox
    (about 15-20 ms to start): Python's regex engine holds the GIL for a
    whole match, so a catastrophic-backtracking pattern in a thread would
    freeze the node; in its own process it is killed at the deadline.
    """

    name = "grep"
    idempotent = True  # read-only: a second call has the effect of one
    description = (
        "Search file contents by regular expression. Returns matching lines as `path:line: text`. "
        f"Filter files with `glob` and the search root with `path`. At most {DEFAULT_LIMIT} matches by default."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Python syntax)"},
            "path": {"type": "string", "description": "Directory or file to search (default: working dir)"},
            "glob": {"type": "string", "description": 'Filter files, e.g. "*.py"'},
            "case_sensitive": {"type": "boolean", "description": "Match case (default true)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum matches to return"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Run the search.

        Raises :class:`ToolError` for an invalid regex or a path that is
        missing or outside a confined working directory. On cancellation (the
        tool's timeout, an abort) the worker process is killed before
        ``trio.Cancelled`` propagates.
        """
        display = args.get("path") or "."
        root = context.resolve_path(display)
        job = {
            "mode": "grep",
            "root": str(root),
            "display": display,
            "pattern": args["pattern"],
            "glob": args.get("glob"),
            "case_sensitive": args.get("case_sensitive", True),
            "limit": int(args.get("limit") or DEFAULT_LIMIT),
        }
        return await run_scan(context, job)
