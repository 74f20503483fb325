"""The ``read`` tool: file contents, or an image or a PDF the model can see."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..messages import DocumentBlock, ImageBlock
from ._files import Abandoned, open_regular, run_abandonable
from ._output import MAX_BYTES, MAX_LINES, truncate
from ._tool import Tool, ToolContext, ToolError

__all__ = ["Read", "IMAGE_TYPES", "MAX_DOCUMENT_BYTES", "MAX_IMAGE_BYTES"]

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
#: Larger PDFs are refused. Anthropic's request size limit (32 MB) is the smallest of the
#: providers', and base64 makes a document 4/3 larger: 20 MiB goes as 28 MB, leaving room
#: for the rest of the conversation.
MAX_DOCUMENT_BYTES = 20 * 1024 * 1024
_CHUNK = 1 << 20  # bytes read at a time
_LINE_CAP = MAX_BYTES + 4  # bytes kept of one line: enough to show it was cut


class Read(Tool):
    """Read a text file (a window of lines), an image (png, jpg, gif, webp) or a PDF.

    Text output is cut at 2000 lines or 50 KiB, whichever comes first, with
    a header saying which lines are shown; ``offset`` (1-based) and ``limit``
    page through large files. Images come back as image blocks the model
    sees, PDFs as document blocks (titled with the file's name) it reads.
    """

    name = "read"
    idempotent = True  # read-only: a second call has the effect of one
    description = (
        "Read the contents of a file. Supports text files, images (png, jpg, gif, webp) and PDFs; "
        f"images and PDFs are sent as attachments. Text output is truncated to {MAX_LINES} lines or "
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
        directory, no permission, outside a confined working directory or
        the sandbox), is not a regular file (a FIFO or a device: refused at
        once), is binary, is an image or a PDF too large, or ``offset`` is past its
        end. The file is streamed: memory stays bounded (about the 50 KiB
        shown) whatever its size. The read runs in a worker thread that is
        abandoned on cancellation (a timeout, an abort), which takes effect at once; the
        thread stops at its next chunk.
        """
        display = args["path"]
        path = context.resolve_path(display)
        offset, limit = args.get("offset"), args.get("limit")
        return await run_abandonable(lambda abandoned: _read(path, display, offset, limit, abandoned))


def _read(path: Path, display: str, offset: int | None, limit: int | None, abandoned: Abandoned) -> Any:
    fd, size = open_regular(path, display)
    try:
        media_type = IMAGE_TYPES.get(path.suffix.lower())
        if media_type is not None:
            if size > MAX_IMAGE_BYTES:
                raise ToolError(f"{display} is {size} bytes; images over {MAX_IMAGE_BYTES} bytes are not supported")
            data = _read_all(fd, MAX_IMAGE_BYTES + 1, abandoned)
            return ImageBlock.from_bytes(data, media_type)
        if path.suffix.lower() == ".pdf":
            if size > MAX_DOCUMENT_BYTES:
                raise ToolError(f"{display} is {size} bytes; PDFs over {MAX_DOCUMENT_BYTES} bytes are not supported")
            data = _read_all(fd, MAX_DOCUMENT_BYTES + 1, abandoned)
            return DocumentBlock.from_bytes(data, "application/pdf", path.name)
        lines, start, total = _window(fd, display, (offset or 1) - 1, limit, abandoned)
    finally:
        os.close(fd)
    if start >= total and total:
        raise ToolError(f"offset {offset} is past the end of the file ({total} lines)")
    return _format(lines, start, total)


def _read_all(fd: int, cap: int, abandoned: Abandoned) -> bytes:
    chunks = []
    got = 0
    while got < cap:
        abandoned.check()
        chunk = os.read(fd, min(_CHUNK, cap - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _window(
    fd: int, display: str, start: int, limit: int | None, abandoned: Abandoned
) -> tuple[list[str], int, int]:
    """Lines ``start``.. (at most ``limit``, and no more than the output can show) and the file's line count.

    Streams the file in chunks: only the kept lines are held, each cut at
    just over :data:`MAX_BYTES`; past the window, newlines are only counted.
    """
    wanted = min(limit or MAX_LINES + 1, MAX_LINES + 1)
    kept: list[bytes] = []
    kept_bytes = 0
    collecting = True
    line = 0  # index of the line being read
    partial = bytearray()
    first = True
    ends_with_newline = True
    empty = True
    while True:
        abandoned.check()
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        if first:
            first = False
            if b"\0" in chunk[:8192]:
                raise ToolError(f"{display} looks like a binary file; it cannot be read as text")
        empty = False
        ends_with_newline = chunk.endswith(b"\n")
        newlines = chunk.count(b"\n")
        if not collecting or line + newlines < start:
            line += newlines
            continue
        pieces = chunk.split(b"\n")
        last = len(pieces) - 1
        for index, piece in enumerate(pieces):
            if collecting and line >= start:
                room = _LINE_CAP - len(partial)
                if room > 0:
                    partial += piece[:room]
            if index == last:
                break
            if collecting and line >= start:
                kept.append(bytes(partial))
                kept_bytes += len(partial) + 1
                collecting = len(kept) < wanted and kept_bytes <= MAX_BYTES
            partial.clear()
            line += 1
    total = line if ends_with_newline and not empty else line + 1
    if collecting and partial and line >= start:
        kept.append(bytes(partial))
    if empty:
        kept = [b""] if start == 0 else []
    return [k.decode("utf-8", "replace") for k in kept], start, total


def _format(selected: list[str], start: int, total: int) -> str:
    """The selected lines, truncated, with a header saying which lines they are when partial."""
    body, truncated = truncate("\n".join(selected))
    shown = body.count("\n") + 1  # truncate keeps at least (the head of) one line
    first, last = start + 1, start + shown
    if truncated or shown < len(selected):
        cut = ""
        if shown == 1 and selected and body != selected[0]:  # one line longer than the byte limit
            cut = f"; line {first} is longer than {MAX_BYTES // 1024}KB and was cut"
        more = f"; use offset={last + 1} to read more" if last < total else ""
        header = f"(showing lines {first}-{last} of {total}, output truncated{cut}{more})"
    elif first > 1 or last < total:
        header = f"(lines {first}-{last} of {total})"
    else:
        return body
    return f"{header}\n\n{body}"
