"""``DiskStore``: one JSON file per session, replaced atomically."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from contextlib import AbstractAsyncContextManager, suppress
from pathlib import Path

from ._key_locks import KeyLocks
from ._located_store import LocatedStore
from ._snapshot import Snapshot, decode, encode

__all__ = ["DiskStore", "file_name"]

_PLAIN = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def file_name(key: str) -> str:
    """The file name (``<name>.json``) of the snapshot stored under ``key``.

    A key of lowercase letters, digits, ``.``, ``_`` and ``-`` (not starting
    with a dot, at most 100 characters) is used as is. Any other key keeps its
    safe characters (unsafe ones become ``_``, at most 64 of them) followed by
    ``~`` and 16 hex digits of its SHA-256: no separators, no ``..``, no hidden
    files, and distinct keys get distinct names even on case-insensitive file
    systems (``~`` never occurs in a name used as is).
    """
    if _PLAIN.fullmatch(key):
        return f"{key}.json"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    readable = _UNSAFE.sub("_", key).lstrip(".")[:64]
    return f"{readable}~{digest}.json"


class DiskStore(LocatedStore):
    """Snapshots as JSON files, one per key, under ``root``.

    ``root`` defaults to ``<cwd>/.condukt/sessions/`` for the ``cwd`` the
    agent binds the store to (:meth:`bind` returns the store rooted there, one
    per directory; a store with a root returns itself); using a store without a root before
    that raises :class:`StoreNotBound`. The directory is created (mode 0700)
    on the first save, files with mode 0600.

    Crash safety: a save writes a temporary file in ``root``, fsyncs it,
    renames it over the snapshot and fsyncs the directory. Whenever the
    process dies (even by SIGKILL, or the machine loses power after the
    save returned), the file holds either the previous snapshot or the new
    one, never a mix. A process killed mid-save may leave a ``.<name>.*.tmp``
    file behind; it is never read and is safe to delete.

    All file I/O, and JSON encoding and decoding, run in a worker thread, so
    the trio loop keeps serving other tasks. Operations on one key are
    serialised (fair lock per key); different keys proceed in parallel.

    A file that cannot be read (corrupt, or written by a newer condukt) is
    never overwritten: ``save`` first checks the existing file of a key this
    store has not read or written yet, and raises what ``load`` would
    (:class:`CorruptSnapshot` or :class:`UnsupportedSnapshotVersion`); after
    a failed ``load`` it checks again on every save. Repair or remove the file
    (or call ``delete``) to store that key again.
    """

    default_location = Path(".condukt", "sessions")

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        super().__init__(root)
        self._locks = KeyLocks()

    @property
    def root(self) -> Path | None:
        """The directory of the snapshot files; None until bound."""
        return self._location

    def path(self, key: str) -> Path:
        """The file that holds the snapshot of ``key`` (see :func:`file_name`)."""
        return self._bound_location() / file_name(key)

    def _hold(self, key: str) -> AbstractAsyncContextManager[object]:
        return self._locks.hold(key)

    def _load_sync(self, root: Path, key: str) -> Snapshot | None:
        path = root / file_name(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return decode(data, str(path))

    def _save_sync(self, root: Path, key: str, snapshot: Snapshot, check: bool) -> None:
        data = encode(snapshot).encode("ascii")
        if check:
            self._load_sync(root, key)
        _ensure_dir(root)
        path = root / file_name(key)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with open(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, path)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(root)

    def _delete_sync(self, root: Path, key: str) -> None:
        try:
            (root / file_name(key)).unlink()
        except FileNotFoundError:
            return
        _fsync_dir(root)


def _ensure_dir(directory: Path) -> None:
    if directory.is_dir():
        return
    _ensure_dir(directory.parent)
    try:
        directory.mkdir(mode=0o700)
    except FileExistsError:
        return  # made by a concurrent save (or a file is there: the save fails with a clear error)
    _fsync_dir(directory.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes a rename, creation or removal in ``directory`` survive a power loss.
    if not hasattr(os, "O_DIRECTORY"):  # Windows cannot open a directory
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
