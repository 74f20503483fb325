"""Output limits shared by the built-in tools (as in the Elixir original)."""

from __future__ import annotations

MAX_LINES = 2000
MAX_BYTES = 50 * 1024


def truncate(text: str, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> tuple[str, bool]:
    """Keep the head of ``text`` within ``max_lines`` lines and ``max_bytes`` UTF-8 bytes.

    Returns the kept text and whether anything was cut. Lines are cut whole
    when the byte limit falls mid-way, except a first line longer than
    ``max_bytes`` (minified code, one-line JSON): its head is kept, cut at the
    limit on a character boundary, so the result is never empty for a
    non-empty text.
    """
    lines = text.split("\n")
    truncated = len(lines) > max_lines
    if truncated:
        lines = lines[:max_lines]
    kept: list[str] = []
    size = 0
    for line in lines:
        line_size = len(line.encode("utf-8", "replace")) + 1
        if size + line_size > max_bytes:
            truncated = True
            if not kept:
                kept.append(line.encode("utf-8", "replace")[:max_bytes].decode("utf-8", "ignore"))
            break
        kept.append(line)
        size += line_size
    return "\n".join(kept), truncated
