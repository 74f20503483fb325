"""File access shared by the file tools: errors the model can act on."""

from __future__ import annotations

from pathlib import Path

from ._tool import ToolError

__all__ = ["read_file_bytes"]


def read_file_bytes(path: Path, display: str) -> bytes:
    """The bytes of ``path``; a :class:`ToolError` naming ``display`` when it cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ToolError(f"File not found: {display}") from None
    except IsADirectoryError:
        raise ToolError(f"{display} is a directory, not a file") from None
    except PermissionError:
        raise ToolError(f"Permission denied: {display}") from None
    except OSError as exc:
        raise ToolError(f"Cannot read {display}: {exc.strerror or exc}") from None
