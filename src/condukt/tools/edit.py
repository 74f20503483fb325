"""The ``edit`` tool: replace one exact, unique piece of text in a file."""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from pathlib import Path
from typing import Any

import trio

from ._files import read_file_bytes
from ._tool import Tool, ToolContext, ToolError

__all__ = ["Edit"]


def _not_found_hint(content: str, old_text: str, display: str) -> str:
    first = old_text.split("\n", 1)[0].strip()
    if len(first) >= 5 and first in content:
        return (
            f"old_text not found in {display}. The first line exists in the file but the full text "
            "does not match; this is often whitespace (tabs vs spaces, trailing spaces, line endings). "
            "Use the read tool to see the exact content."
        )
    return (
        f"old_text not found in {display}. Make sure it matches exactly, including whitespace; "
        "use the read tool to check the current contents."
    )


def _edit(path: Path, display: str, old_text: str, new_text: str) -> str:
    raw = read_file_bytes(path, display)
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{display} is not UTF-8 text; it cannot be edited") from None
    count = content.count(old_text)
    if count == 0:
        raise ToolError(_not_found_hint(content, old_text, display))
    if count > 1:
        raise ToolError(
            f"Found {count} occurrences of old_text in {display}. "
            "Make the match unique by including more surrounding context."
        )
    updated = content.replace(old_text, new_text, 1)
    # Replace the file a symlink points to, not the link itself.
    real = Path(os.path.realpath(path))
    mode = os.stat(real).st_mode
    # A unique temporary file next to the target, then an atomic rename.
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".condukt-edit", dir=real.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(updated)
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    diff = difflib.unified_diff(
        content.splitlines(keepends=True),
        updated.splitlines(keepends=True),
        fromfile=f"a/{display}",
        tofile=f"b/{display}",
    )
    return f"Successfully edited {display}\n\n```diff\n{''.join(diff).rstrip()}\n```"


class Edit(Tool):
    """Replace ``old_text`` with ``new_text`` in a file.

    The match is exact (case and whitespace) and must be unique: zero
    matches report a hint, several matches ask for more context, and an edit
    that changes nothing is refused. The file is replaced atomically and its
    permissions kept; a symlink is followed (its target is edited, the link
    stays). Returns a unified diff of the change.
    """

    name = "edit"
    description = (
        "Edit a file by replacing exact text. old_text must match exactly (including whitespace) "
        "and appear exactly once. Use this for precise, surgical edits."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to edit"},
            "old_text": {"type": "string", "minLength": 1, "description": "Exact text to replace"},
            "new_text": {"type": "string", "description": "Text to put in its place"},
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": False,
    }

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Apply the edit.

        Raises :class:`ToolError` when the file cannot be read (or is outside
        a confined working directory) or is not UTF-8, or ``old_text`` is not
        found exactly once (or equals ``new_text``); an ``OSError`` replacing
        the file (a read-only directory) propagates as is. The edit runs in a worker thread that cancellation does not
        interrupt: a timeout or an abort arriving once it started waits for it
        (the edit is made anyway) and takes effect after it returns.
        """
        display = args["path"]
        if args["old_text"] == args["new_text"]:
            raise ToolError(f"No changes made to {display}: old_text and new_text are identical.")
        path = context.resolve_path(display)
        return await trio.to_thread.run_sync(_edit, path, display, args["old_text"], args["new_text"])
