"""The ``grep`` tool: search file contents by regular expression."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from ._tool import Tool, ToolContext, ToolError

__all__ = ["Grep", "DEFAULT_LIMIT"]

DEFAULT_LIMIT = 200
_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".condukt"}
_MAX_LINE = 500


def _grep(
    root: Path,
    display: str,
    pattern: str,
    glob: str | None,
    case_sensitive: bool,
    limit: int,
    allowed: Callable[[Path], bool],
) -> str:
    try:
        regex = re.compile(pattern, 0 if case_sensitive else re.IGNORECASE)
    except re.error as exc:
        raise ToolError(f"Invalid regex: {exc}") from None
    if root.is_file():
        files = [root]
        base = root.parent
    elif root.is_dir():
        files = []
        base = root
        for directory, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            for name in sorted(names):
                files.append(Path(directory, name))
    else:
        raise ToolError(f"path not found: {display}")
    lines: list[str] = []
    for path in files:
        rel = str(path.relative_to(base))
        if glob and not (fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(path.name, glob)):
            continue
        if not allowed(path):
            continue  # a symlink leading out of a confined working directory
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue  # binary
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                if len(line) > _MAX_LINE:
                    line = line[:_MAX_LINE] + "..."
                lines.append(f"{rel}:{number}: {line}")
                if len(lines) >= limit:
                    lines.append(f"(stopped at {limit} matches; narrow the search)")
                    return "\n".join(lines)
    return "\n".join(lines) if lines else f"No matches for {pattern}"


class Grep(Tool):
    """Search files for a Python regular expression; lines come back as ``path:line: text``.

    Skips binary files and VCS / dependency directories (``.git``,
    ``node_modules``...). ``glob`` filters file paths, ``path`` picks the root
    (a directory or one file). When the agent confines tools to its cwd,
    symlinks leading out of it are skipped.
    """

    name = "grep"
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
        missing or outside a confined working directory. The
        search runs in a worker thread that cancellation does not interrupt: a
        timeout or an abort waits for the whole walk (for ever on a FIFO no one
        writes to) and takes effect after it returns.
        """
        display = args.get("path") or "."
        root = context.resolve_path(display)
        return await trio.to_thread.run_sync(
            _grep,
            root,
            display,
            args["pattern"],
            args.get("glob"),
            args.get("case_sensitive", True),
            int(args.get("limit") or DEFAULT_LIMIT),
            context.allows,
        )
