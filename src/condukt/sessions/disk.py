"""``DiskStore``: a base file and a journal file per session, a lock file per key."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import trio

from ._engine import SESSION, Diverged, Fence, Stored
from ._errors import CorruptJournal, SessionOwned, StoreUnavailable
from ._located_store import LocatedStore

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["DiskStore", "file_name"]

_PLAIN = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_SEQ_PREFIX = re.compile(rb'\{"journal_seq":(\d+),')
_RUN_PREFIX = "run:"
_NODES = ".nodes"


def file_name(key: str) -> str:
    """The file name (``<name>.json``) of the base snapshot stored under ``key``.

    A key of lowercase letters, digits, ``.``, ``_`` and ``-`` (not starting
    with a dot, at most 100 characters) is used as is. Any other key keeps its
    safe characters (unsafe ones become ``_``, at most 64 of them) followed by
    ``~`` and 16 hex digits of its SHA-256: no separators, no ``..``, no hidden
    files, and distinct keys get distinct names even on case-insensitive file
    systems (``~`` never occurs in a name used as is). The key's other files
    share the stem: ``<name>.journal``, ``<name>.lock``, ``<name>.runs/``.
    """
    if _PLAIN.fullmatch(key):
        return f"{key}.json"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    readable = _UNSAFE.sub("_", key).lstrip(".")[:64]
    return f"{readable}~{digest}.json"


@attrs.frozen
class _Seen:
    """A journal file as this store last saw it: which file, where its entries end, its last number."""

    inode: int
    end: int
    last: int


class DiskStore(LocatedStore):
    """Sessions as files under ``root``: a base snapshot, a journal, a lock file per key.

    ``root`` defaults to ``<cwd>/.condukt/sessions/`` for the ``cwd`` the
    agent binds the store to (:meth:`bind` returns the store rooted there, one
    per directory; a store with a root returns itself); using a store without
    a root before that raises :class:`StoreNotBound`. The directory is
    created (mode 0700) on the first write, files with mode 0600.

    Per key ``<name>`` (see :func:`file_name`): ``<name>.json``, the base
    snapshot, replaced atomically (written to a temporary file, fsynced,
    renamed, directory fsynced); ``<name>.journal``, the entries since,
    one line each (``<seq> <crc32> <json>``), appended and fsynced;
    ``<name>.lock``, the key's lease (token, owner node) and the file every
    write locks (``flock``) while it checks the lease and writes;
    ``<name>.runs/``, the key's run event logs, each a base and a journal too.
    ``.nodes/<node>`` files are the nodes' heartbeats (their modification
    time). A snapshot file written by an older condukt (no journal) loads as
    it is.

    Crash safety: a save returns once its entry is fsynced; a process killed
    mid-save leaves the previous state, plus at most an unfinished last
    journal line, which is ignored and overwritten by the next save. A fold
    renames the new base before it replaces the journal, and entries the
    base already holds are skipped, so a crash between the two loses nothing.

    Ownership is for processes on one machine (``flock`` and the clock are
    local; do not share the directory over NFS). A write waits up to
    ``lock_timeout`` seconds for another process's write to the same key,
    then raises :class:`StoreUnavailable`.

    All file I/O, JSON encoding and decoding run in worker threads, so the
    trio loop keeps serving other tasks.
    """

    default_location = Path(".condukt", "sessions")

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        lease_ttl: float = 30.0,
        run_events: int = 10_000,
        runs: int = 16,
        clock: Callable[[], float] = time.time,
        lock_timeout: float = 10.0,
    ) -> None:
        super().__init__(root, lease_ttl=lease_ttl, run_events=run_events, runs=runs, clock=clock)
        self._options["lock_timeout"] = lock_timeout
        self._lock_timeout = lock_timeout
        self._seen: dict[tuple[str, str], _Seen] = {}

    @property
    def root(self) -> Path | None:
        """The directory of the session files; None until bound."""
        return self._location

    def path(self, key: str) -> Path:
        """The file that holds the base snapshot of ``key`` (see :func:`file_name`)."""
        return self._bound_location() / file_name(key)

    def journal_path(self, key: str) -> Path:
        """The file that holds the journal of ``key``."""
        return self.path(key).with_suffix(".journal")

    # -- paths ------------------------------------------------------------------------------------

    def _files(self, root: Path, key: str, stream: str) -> tuple[Path, Path]:
        stem = file_name(key)[: -len(".json")]
        if stream == SESSION:
            return root / f"{stem}.json", root / f"{stem}.journal"
        run = file_name(stream[len(_RUN_PREFIX) :])[: -len(".json")]
        directory = root / f"{stem}.runs"
        return directory / f"{run}.json", directory / f"{run}.journal"

    def _location_of(self, path: Path, key: str) -> str:
        return f"{path} (key {key!r:.200})"

    # -- storage primitives (the async side) ------------------------------------------------------

    async def _read(self, key: str, stream: str, after: int) -> Stored | None:
        root = self._bound_location()
        return await trio.to_thread.run_sync(self._read_sync, root, key, stream, after)

    async def _append(self, key: str, stream: str, fence: Fence, seq: int, text: str) -> None:
        root = self._bound_location()
        stale_ok = key not in self._held
        await trio.to_thread.run_sync(self._append_sync, root, key, stream, fence.token, stale_ok, seq, text)

    async def _put_base(self, key: str, stream: str, fence: Fence, text: str, seq: int | None) -> int:
        root = self._bound_location()
        stale_ok = key not in self._held
        return await trio.to_thread.run_sync(self._put_base_sync, root, key, stream, fence.token, stale_ok, text, seq)

    async def _remove(self, key: str, fence: Fence, stream: str | None = None) -> None:
        root = self._bound_location()
        stale_ok = key not in self._held
        await trio.to_thread.run_sync(self._remove_sync, root, key, fence.token, stale_ok, stream)

    async def _streams(self, key: str, prefix: str) -> list[str]:
        root = self._bound_location()
        return await trio.to_thread.run_sync(self._streams_sync, root, key, prefix)

    async def _acquire(self, key: str, owner: str) -> int:
        root = self._bound_location()
        return await trio.to_thread.run_sync(self._acquire_sync, root, key, owner)

    async def _release(self, key: str, token: int) -> None:
        root = self._bound_location()
        await trio.to_thread.run_sync(self._release_sync, root, key, token)

    async def _heartbeat(self) -> None:
        root = self._bound_location()
        await trio.to_thread.run_sync(self._beat, root)

    # -- reading ----------------------------------------------------------------------------------

    def _read_sync(self, root: Path, key: str, stream: str, after: int) -> Stored | None:
        base_path, journal_path = self._files(root, key, stream)
        # The journal first, then the base: a fold renames the base first, so
        # a journal read here is never newer than the base read after it.
        try:
            journal = journal_path.open("rb")
        except FileNotFoundError:
            journal = None
        try:
            try:
                base = base_path.read_bytes()
            except FileNotFoundError:
                return None
            base_seq = _base_seq(base)
            entries: list[tuple[int, str | bytes]] = []
            last = base_seq
            if journal is not None:
                data = journal.read()
                parsed, end = _parse(data, self._location_of(journal_path, key), key)
                floor = max(after, base_seq)
                entries = [(seq, text) for seq, text in parsed if seq > floor]
                if parsed:
                    last = max(last, parsed[-1][0])
                self._seen[(key, stream)] = _Seen(os.fstat(journal.fileno()).st_ino, end, last)
            return Stored(base, base_seq, entries, self._location_of(base_path, key), last)
        finally:
            if journal is not None:
                journal.close()

    # -- writing ----------------------------------------------------------------------------------

    @contextmanager
    def _locked(self, root: Path, key: str) -> Iterator[int]:
        """The key's lock file, locked (``flock``) for the block: one writer at a time, in any process."""
        if fcntl is None:  # pragma: no cover - Windows
            raise OSError("DiskStore needs flock (a POSIX system)")
        _ensure_dir(root)
        stem = file_name(key)[: -len(".json")]
        fd = os.open(root / f"{stem}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + self._lock_timeout
            delay = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    # A worker thread, not the trio loop, waits here; a flock
                    # cannot be waited for with a timeout any other way.
                    if time.monotonic() > deadline:
                        raise StoreUnavailable(
                            f"{root / stem}.lock stayed locked by another process for {self._lock_timeout} s"
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
            yield fd
        finally:
            os.close(fd)  # releases the flock

    def _record(self, fd: int) -> dict[str, Any]:
        data = os.pread(fd, 65536, 0)
        if not data.strip():
            return {"token": 0, "node": None, "owner": None, "ttl": self._lease_ttl}
        try:
            record = json.loads(data)
            if not isinstance(record, dict) or type(record.get("token")) is not int:
                raise ValueError("no token")
        except ValueError as exc:
            raise OSError(f"lease file is damaged ({exc}); remove it to reset the key's ownership") from exc
        return record

    def _write_record(self, fd: int, record: dict[str, Any]) -> None:
        data = json.dumps(record, ensure_ascii=True).encode()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))

    def _expires(self, root: Path, node: str, ttl: float) -> float:
        try:
            return os.stat(root / _NODES / node).st_mtime + ttl
        except FileNotFoundError:
            return -float("inf")

    def _check(self, root: Path, fd: int, key: str, token: int | None, stale_ok: bool) -> None:
        record = self._record(fd)
        node, owner = record.get("node"), record.get("owner")
        if token is not None:
            if record["token"] != token or node != self._node:
                raise SessionOwned(
                    key,
                    owner=owner,
                    node=node,
                    detail=f"session {key!r:.200} was taken over by another owner: this lease is void",
                )
            return
        if node is None:
            return
        if not (node == self._node and stale_ok):
            expires = self._expires(root, str(node), float(record.get("ttl", self._lease_ttl)))
            if expires > self._clock():
                raise SessionOwned(key, owner=owner, node=node, retry_after=expires - self._clock())
        self._write_record(fd, {"token": record["token"] + 1, "node": None, "owner": None})

    def _scan(self, key: str, stream: str, base_path: Path, journal_fd: int | None) -> _Seen | None:
        """Where the stream stands (None: no base): read its base's number and its whole journal."""
        try:
            with base_path.open("rb") as base:
                base_seq = _base_seq(base.read(64))
        except FileNotFoundError:
            return None
        if journal_fd is None:
            return _Seen(-1, 0, base_seq)
        data = os.pread(journal_fd, os.fstat(journal_fd).st_size, 0)
        parsed, end = _parse(data, self._location_of(base_path.with_suffix(".journal"), key), key)
        last = max(base_seq, parsed[-1][0]) if parsed else base_seq
        return _Seen(os.fstat(journal_fd).st_ino, end, last)

    def _append_sync(
        self, root: Path, key: str, stream: str, token: int | None, stale_ok: bool, seq: int, text: str
    ) -> None:
        base_path, journal_path = self._files(root, key, stream)
        with self._locked(root, key) as lock:
            self._check(root, lock, key, token, stale_ok)
            try:
                fd = os.open(journal_path, os.O_RDWR)
                created = False
            except FileNotFoundError:
                if not base_path.exists():
                    raise Diverged(key) from None
                fd = os.open(journal_path, os.O_RDWR | os.O_CREAT, 0o600)
                created = True
            try:
                info = os.fstat(fd)
                seen = self._seen.get((key, stream))
                if seen is None or seen.inode != info.st_ino or seen.end != info.st_size:
                    seen = self._scan(key, stream, base_path, fd)
                if seen is None or seen.last != seq - 1:
                    raise Diverged(key)
                line = _frame(seq, text)
                if info.st_size != seen.end:
                    os.ftruncate(fd, seen.end)  # an unfinished line of a save that never returned
                os.pwrite(fd, line, seen.end)
                os.fsync(fd)
                self._seen[(key, stream)] = _Seen(info.st_ino, seen.end + len(line), seq)
            finally:
                os.close(fd)
            if created:
                _fsync_dir(journal_path.parent)

    def _put_base_sync(
        self, root: Path, key: str, stream: str, token: int | None, stale_ok: bool, text: str, seq: int | None
    ) -> int:
        base_path, journal_path = self._files(root, key, stream)
        with self._locked(root, key) as lock:
            self._check(root, lock, key, token, stale_ok)
            try:
                journal_fd: int | None = os.open(journal_path, os.O_RDONLY)
            except FileNotFoundError:
                journal_fd = None
            try:
                seen = self._scan(key, stream, base_path, journal_fd)
                if seq is None:
                    seq = 1 if seen is None else seen.last + 1
                elif (seen is None and seq > 0) or (seen is not None and _stored_base_seq(base_path) > seq):
                    raise Diverged(key)
                kept = b""
                if journal_fd is not None and seen is not None:
                    data = os.pread(journal_fd, seen.end, 0)
                    parsed, _ = _parse(data, self._location_of(journal_path, key), key)
                    kept = b"".join(_frame(n, entry) for n, entry in parsed if n > seq)
            finally:
                if journal_fd is not None:
                    os.close(journal_fd)
            _ensure_dir(base_path.parent)
            _replace(base_path, _with_seq(text, seq))
            _replace(journal_path, kept)
            _fsync_dir(base_path.parent)
            inode = os.stat(journal_path).st_ino
            last = seq
            if kept:
                last = int(kept.rsplit(b"\n", 2)[-2].split(b" ", 1)[0])
            self._seen[(key, stream)] = _Seen(inode, len(kept), last)
            return seq

    def _remove_sync(self, root: Path, key: str, token: int | None, stale_ok: bool, stream: str | None) -> None:
        if not root.is_dir():
            return
        with self._locked(root, key) as lock:
            self._check(root, lock, key, token, stale_ok)
            streams = [stream] if stream is not None else [SESSION]
            for name in streams:
                for path in self._files(root, key, name):
                    with suppress(FileNotFoundError):
                        path.unlink()
                self._seen.pop((key, name), None)
            if stream is None:
                runs = root / f"{file_name(key)[: -len('.json')]}.runs"
                shutil.rmtree(runs, ignore_errors=True)
                for cached in [k for k in self._seen if k[0] == key]:
                    del self._seen[cached]
            _fsync_dir(root)

    def _streams_sync(self, root: Path, key: str, prefix: str) -> list[str]:
        if prefix != _RUN_PREFIX:
            return []
        runs = root / f"{file_name(key)[: -len('.json')]}.runs"
        found: list[tuple[float, str]] = []
        try:
            paths = list(runs.glob("*.json"))
        except FileNotFoundError:
            return []
        for path in paths:
            try:
                record = json.loads(path.read_bytes())
                found.append((float(record.get("created_at", 0.0)), _RUN_PREFIX + str(record["run_id"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return [name for _, name in sorted(found)]

    def _acquire_sync(self, root: Path, key: str, owner: str) -> int:
        with self._locked(root, key) as lock:
            record = self._record(lock)
            node = record.get("node")
            if node is not None and node != self._node:
                expires = self._expires(root, str(node), float(record.get("ttl", self._lease_ttl)))
                if expires > self._clock():
                    raise SessionOwned(
                        key, owner=record.get("owner"), node=node, retry_after=expires - self._clock()
                    )
            self._beat(root)
            token = int(record["token"]) + 1
            self._write_record(lock, {"token": token, "node": self._node, "owner": owner, "ttl": self._lease_ttl})
            return token

    def _release_sync(self, root: Path, key: str, token: int) -> None:
        with self._locked(root, key) as lock:
            record = self._record(lock)
            if record["token"] == token and record.get("node") == self._node:
                self._write_record(lock, {"token": token, "node": None, "owner": None})

    def _beat(self, root: Path) -> None:
        nodes = root / _NODES
        path = nodes / self._node
        now = self._clock()
        try:
            os.utime(path, (now, now))
        except FileNotFoundError:
            _ensure_dir(nodes)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
            os.utime(path, (now, now))


def _frame(seq: int, text: str | bytes) -> bytes:
    body = text.encode("ascii") if isinstance(text, str) else text
    head = str(seq).encode()
    return b"%s %08x %s\n" % (head, zlib.crc32(body, zlib.crc32(head)), body)


def _parse(data: bytes, location: str, key: str) -> tuple[list[tuple[int, str | bytes]], int]:
    """The journal's entries, and where the last whole one ends (an unfinished last line is not one)."""
    entries: list[tuple[int, str | bytes]] = []
    position = 0
    while True:
        newline = data.find(b"\n", position)
        if newline < 0:
            break  # nothing, or the unfinished line of an interrupted save
        line = data[position:newline]
        seq: int | None = None
        try:
            head, crc, body = line.split(b" ", 2)
            seq = int(head)
            if zlib.crc32(body, zlib.crc32(head)) != int(crc, 16):
                raise ValueError("checksum mismatch")
        except ValueError as exc:
            raise CorruptJournal(location, f"line at byte {position}: {exc}", key, seq) from exc
        if entries and seq != entries[-1][0] + 1:
            raise CorruptJournal(location, f"entry {seq} follows entry {entries[-1][0]}", key, seq)
        entries.append((seq, body))
        position = newline + 1
    return entries, position


def _base_seq(data: bytes) -> int:
    match = _SEQ_PREFIX.match(data)
    return int(match.group(1)) if match else 0


def _stored_base_seq(path: Path) -> int:
    with path.open("rb") as file:
        return _base_seq(file.read(64))


def _with_seq(text: str, seq: int) -> bytes:
    # The base document carries the number of the last entry it holds, first,
    # so a journal line it already holds is recognised after a crash mid-fold.
    body = text.encode("ascii")
    if not body.startswith(b"{"):
        raise ValueError("a base document is a JSON object")
    separator = b"" if body[1:2] == b"}" else b","
    return b'{"journal_seq":%d%s%s' % (seq, separator, body[1:])


def _replace(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
