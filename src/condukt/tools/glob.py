"""The ``glob`` tool: find files by pattern."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from ._tool import Tool, ToolContext, ToolError

__all__ = ["Glob", "DEFAULT_LIMIT"]

DEFAULT_LIMIT = 1000


def _glob(root: Path, display: str, pattern: str, limit: int, allowed: Callable[[Path], bool]) -> str:
    if not root.is_dir():
        raise ToolError(f"directory not found: {display}")
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise ToolError("pattern must be relative to the search directory and must not contain '..'")
    try:
        matches = sorted(str(p.relative_to(root)) for p in root.glob(pattern) if p.is_file() and allowed(p))
    except (ValueError, OSError) as exc:
        raise ToolError(f"invalid glob pattern {pattern!r}: {exc}") from None
    if not matches:
        return f"No files matched {pattern}"
    shown = matches[:limit]
    more = f"\n({len(matches) - limit} more not shown; narrow the pattern)" if len(matches) > limit else ""
    return f"{len(matches)} match(es) for {pattern}:\n" + "\n".join(shown) + more


class Glob(Tool):
    """List files matching a glob pattern (``**``, ``*``, ``?``, ``[abc]``), sorted.

    When the agent confines tools to its cwd, paths that lead out of it
    through symlinks are left out.
    """

    name = "glob"
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
        ``..`` or is invalid. The search runs in a worker
        thread that cancellation does not interrupt: a timeout or an abort
        waits for the whole walk and takes effect after it returns.
        """
        display = args.get("cwd") or "."
        root = context.resolve_path(display)
        limit = int(args.get("limit") or DEFAULT_LIMIT)
        return await trio.to_thread.run_sync(_glob, root, display, args["pattern"], limit, context.allows)
