"""The ``read`` tool: file contents, or an image the model can see."""

from __future__ import annotations

from typing import Any

import trio

from ..messages import ImageBlock
from ._files import read_file_bytes
from ._output import MAX_BYTES, MAX_LINES, truncate
from ._tool import Tool, ToolContext, ToolError

__all__ = ["Read", "IMAGE_TYPES", "MAX_IMAGE_BYTES"]

#: File extensions read as images, and their media types.
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
#: Larger images are refused (providers reject them anyway).
MAX_IMAGE_BYTES = 5 * 1024 * 1024


class Read(Tool):
    """Read a text file (a window of lines) or an image (png, jpg, gif, webp).

    Text output is cut at 2000 lines or 50 KiB, whichever comes first, with
    a header saying which lines are shown; ``offset`` (1-based) and ``limit``
    page through large files. Images come back as image blocks the model sees.
    """

    name = "read"
    description = (
        "Read the contents of a file. Supports text files and images (png, jpg, gif, webp); "
        f"images are sent as attachments. Text output is truncated to {MAX_LINES} lines or "
        f"{MAX_BYTES // 1024}KB; use offset/limit for large files."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file (relative or absolute)"},
            "offset": {"type": "integer", "minimum": 1, "description": "Line to start at (1-indexed)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read"},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Read the file at ``args["path"]``.

        Raises :class:`ToolError` when the file cannot be read (missing, a
        directory, no permission, outside a confined working directory), is
        binary, is an image too large, or ``offset`` is past its end. The read runs in a worker thread that
        cancellation does not interrupt: a timeout or an abort waits for it (on
        a FIFO, until a writer comes) and takes effect after it returns.
        """
        display = args["path"]
        path = context.resolve_path(display)
        data = await trio.to_thread.run_sync(read_file_bytes, path, display)
        media_type = IMAGE_TYPES.get(path.suffix.lower())
        if media_type is not None:
            if len(data) > MAX_IMAGE_BYTES:
                raise ToolError(
                    f"{display} is {len(data)} bytes; images over {MAX_IMAGE_BYTES} bytes are not supported"
                )
            return ImageBlock.from_bytes(data, media_type)
        if b"\0" in data[:8192]:
            raise ToolError(f"{display} looks like a binary file; it cannot be read as text")
        return format_text(data.decode("utf-8", "replace"), args.get("offset"), args.get("limit"))


def format_text(text: str, offset: int | None, limit: int | None) -> str:
    """Select ``offset``/``limit`` lines, truncate, and add a header when partial."""
    lines = text.split("\n")
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()  # a trailing newline does not make an extra line
    total = len(lines)
    start = (offset or 1) - 1
    if start >= total and total:
        raise ToolError(f"offset {offset} is past the end of the file ({total} lines)")
    selected = lines[start : start + limit] if limit else lines[start:]
    body, truncated = truncate("\n".join(selected))
    shown = body.count("\n") + 1  # truncate keeps at least (the head of) one line
    first, last = start + 1, start + shown
    if truncated:
        cut = ""
        if shown == 1 and body != selected[0]:  # one line longer than the byte limit
            cut = f"; line {first} is longer than {MAX_BYTES // 1024}KB and was cut"
        more = f"; use offset={last + 1} to read more" if last < total else ""
        header = f"(showing lines {first}-{last} of {total}, output truncated{cut}{more})"
    elif first > 1 or last < total:
        header = f"(lines {first}-{last} of {total})"
    else:
        return body
    return f"{header}\n\n{body}"
