"""The ``write`` tool: create or overwrite a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._files import Abandoned, replace_file, run_abandonable
from ._tool import Tool, ToolContext

__all__ = ["Write"]


def _write(path: Path, display: str, content: str, abandoned: Abandoned) -> str:
    data = content.encode("utf-8")
    replace_file(path, display, data, abandoned)
    return f"Wrote {len(data)} bytes to {display}"


class Write(Tool):
    """Create or overwrite a file with ``content``, creating parent directories.

    The new content goes to a temporary file renamed over the target
    (atomic: a reader sees the old or the new file, never half of one); an
    existing file's permissions are kept and a symlink's target is written.
    """

    name = "write"
    description = "Create or overwrite a file with the given content. Parent directories are created."
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to write"},
            "content": {"type": "string", "description": "The full content of the file"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Write the file.

        Raises :class:`ToolError` when the path is a directory or not a
        regular file (a FIFO, a device), cannot be written, or is outside a
        confined working directory or the sandbox's writable paths. The write
        runs in a worker thread that cancellation (a timeout, an abort) abandons at once;
        an abandoned write never lands.
        """
        display = args["path"]
        path = context.resolve_path(display, write=True)
        content = args["content"]
        return await run_abandonable(lambda abandoned: _write(path, display, content, abandoned))
