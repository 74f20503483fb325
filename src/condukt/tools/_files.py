"""File access shared by the file tools: bounded, never blocking, abandoned on cancellation.

Files are opened with ``O_NONBLOCK`` and checked with ``fstat`` before a
byte is read: FIFOs, devices and sockets are refused (a FIFO would block a
worker thread for ever, ``/dev/zero`` would fill memory). Reads stop at a
byte cap. The blocking calls run in a worker thread that the caller leaves
behind when cancelled (``abandon_on_cancel``), so a timeout or an abort
takes effect at once; a write abandoned that way never lands (it goes to a
temporary file that is renamed into place only if the call is still
wanted).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import trio

from ._tool import ToolError

__all__ = ["Abandoned", "check_target", "open_regular", "read_file_bytes", "replace_file", "run_abandonable"]

T = TypeVar("T")


class Abandoned(threading.Event):
    """Set when the caller of :func:`run_abandonable` was cancelled; the worker stops before its next step."""

    def check(self) -> None:
        """Raise ``ToolError`` if the call was abandoned (the result would go nowhere)."""
        if self.is_set():
            raise ToolError("abandoned")


async def run_abandonable(fn: Callable[[Abandoned], T]) -> T:
    """Run ``fn(abandoned)`` in a worker thread; on cancellation set ``abandoned`` and return at once."""
    abandoned = Abandoned()
    try:
        return await trio.to_thread.run_sync(fn, abandoned, abandon_on_cancel=True)
    except trio.Cancelled:
        abandoned.set()
        raise


def _refuse(kind: int, display: str) -> None:
    if stat.S_ISDIR(kind):
        raise ToolError(f"{display} is a directory, not a file")
    if not stat.S_ISREG(kind):
        what = "a FIFO (named pipe)" if stat.S_ISFIFO(kind) else "a device or socket"
        raise ToolError(f"{display} is {what}, not a regular file; it cannot be read or written")


def _os_error(exc: OSError, display: str, verb: str) -> ToolError:
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"File not found: {display}")
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{display} is a directory, not a file")
    if isinstance(exc, PermissionError):
        return ToolError(f"Permission denied: {display}")
    return ToolError(f"Cannot {verb} {display}: {exc.strerror or exc}")


def open_regular(path: Path, display: str) -> tuple[int, int]:
    """A descriptor open for reading on the regular file ``path``, and its size; close it yourself.

    Raises :class:`ToolError` naming ``display`` when it cannot be opened or
    is not a regular file (a FIFO, a device, a socket: refused without
    blocking).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _os_error(exc, display, "read") from None
    try:
        info = os.fstat(fd)
        _refuse(info.st_mode, display)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_file_bytes(path: Path, display: str, limit: int | None = None) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of the regular file ``path`` (all if ``None``), and its size.

    Raises :class:`ToolError` as :func:`open_regular` does.
    """
    fd, size = open_regular(path, display)
    try:
        want = size if limit is None else min(limit, size)
        chunks = []
        got = 0
        while got < want:
            chunk = os.read(fd, min(want - got, 1 << 20))
            if not chunk:
                break  # the file shrank meanwhile
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks), size
    except OSError as exc:
        raise _os_error(exc, display, "read") from None
    finally:
        os.close(fd)


def check_target(path: Path, display: str) -> int | None:
    """The mode of the file a write to ``path`` replaces (``None`` if none); refuses non-regular targets."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _os_error(exc, display, "write") from None
    _refuse(info.st_mode, display)
    return stat.S_IMODE(info.st_mode)


def replace_file(path: Path, display: str, data: bytes, abandoned: Abandoned, mode: int | None = None) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path`` (atomic).

    A symlink is followed (its target is replaced, the link stays). Nothing
    lands if the call was ``abandoned`` before the rename; a non-regular
    target (FIFO, device) is refused.
    """
    real = Path(os.path.realpath(path))
    existing = check_target(real, display)
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".condukt-tmp", dir=real.parent)
    except OSError as exc:
        raise _os_error(exc, display, "write") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        chosen = mode if mode is not None else existing
        os.chmod(tmp, chosen if chosen is not None else 0o666 & ~_UMASK)
        abandoned.check()
        os.replace(tmp, real)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _os_error(exc, display, "write") from None
        raise


def _read_umask() -> int:
    current = os.umask(0o22)
    os.umask(current)
    return current


#: The umask at import (reading it means setting it, which is not thread-safe later).
_UMASK = _read_umask()
