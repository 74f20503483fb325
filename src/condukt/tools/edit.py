"""The ``edit`` tool: replace one exact, unique piece of text in a file."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from ._files import Abandoned, read_file_bytes, replace_file, run_abandonable
from ._tool import Tool, ToolContext, ToolError

__all__ = ["Edit", "MAX_EDIT_BYTES"]

#: Larger files are refused: an edit reads and rewrites the whole file.
MAX_EDIT_BYTES = 16 * 1024 * 1024


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


def _edit(path: Path, display: str, old_text: str, new_text: str, abandoned: Abandoned) -> str:
    raw, size = read_file_bytes(path, display, limit=MAX_EDIT_BYTES + 1)
    if size > MAX_EDIT_BYTES:
        raise ToolError(f"{display} is {size} bytes; files over {MAX_EDIT_BYTES} bytes cannot be edited")
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
    abandoned.check()
    replace_file(path, display, updated.encode("utf-8"), abandoned)
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

        Raises :class:`ToolError` when the file cannot be read or replaced
        (missing, not a regular file, over :data:`MAX_EDIT_BYTES`, outside a
        confined working directory or the sandbox's writable paths, a
        read-only directory), is not UTF-8, or ``old_text`` is not found
        exactly once (or equals ``new_text``). The edit runs in a worker
        thread that cancellation (a timeout, an abort) abandons at once; an abandoned edit
        never lands (the new content is renamed into place only if the call
        is still wanted).
        """
        display = args["path"]
        if args["old_text"] == args["new_text"]:
            raise ToolError(f"No changes made to {display}: old_text and new_text are identical.")
        path = context.resolve_path(display, write=True)
        old, new = args["old_text"], args["new_text"]
        return await run_abandonable(lambda abandoned: _edit(path, display, old, new, abandoned))
