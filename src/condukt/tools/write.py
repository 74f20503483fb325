"""The ``write`` tool: create or overwrite a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from ._tool import Tool, ToolContext, ToolError

__all__ = ["Write"]


def _write(path: Path, display: str, content: str) -> str:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        path.write_bytes(data)
    except IsADirectoryError:
        raise ToolError(f"{display} is a directory") from None
    except OSError as exc:
        raise ToolError(f"Cannot write {display}: {exc.strerror or exc}") from None
    return f"Wrote {len(data)} bytes to {display}"


class Write(Tool):
    """Create or overwrite a file with ``content``, creating parent directories."""

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

        Raises :class:`ToolError` when the path is a directory, cannot be
        written or is outside a confined working directory. The write runs in a worker thread that cancellation does not
        interrupt: a timeout or an abort arriving once it started waits for
        it (the file is written anyway) and takes effect after it returns.
        """
        display = args["path"]
        path = context.resolve_path(display)
        return await trio.to_thread.run_sync(_write, path, display, args["content"])
