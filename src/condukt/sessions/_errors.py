"""The errors a session store raises on purpose.

All derive from :class:`condukt.ConduktError`; :class:`SnapshotError` is the
base of those about one stored snapshot, so ``except SnapshotError`` catches
every "this session cannot be read or written" case.
"""

from __future__ import annotations

from ..otp import ConduktError

__all__ = [
    "CorruptJournal",
    "CorruptSnapshot",
    "LeaseReleased",
    "SessionOwned",
    "SnapshotError",
    "StoreNotBound",
    "StoreUnavailable",
    "UnsupportedSchema",
    "UnsupportedSnapshotVersion",
]


class SnapshotError(ConduktError):
    """A stored snapshot cannot be read (or must not be overwritten).

    ``location`` names where it is: a file path, or an SQLite database path
    and key, or ``memory:<key>``.
    """

    def __init__(self, message: str, location: str | None = None) -> None:
        self.location = location
        super().__init__(message)


class CorruptSnapshot(SnapshotError):
    """The stored data is not a snapshot: bad JSON, wrong shape, unknown message type.

    The store leaves it where it is: ``save`` for the same key refuses with
    this error too until the data is repaired or removed (``delete``), so a
    damaged session is never silently replaced by a fresh one.
    """

    def __init__(self, location: str, detail: str) -> None:
        self.detail = detail
        super().__init__(f"corrupt session snapshot at {location}: {detail}", location)


class UnsupportedSnapshotVersion(SnapshotError):
    """The snapshot was written by a newer condukt, in a format this one cannot read.

    ``version`` is the snapshot's format version, ``supported`` the newest this
    condukt reads. As with a corrupt snapshot, ``save`` refuses to overwrite it.
    """

    def __init__(self, version: int, supported: int, location: str | None = None) -> None:
        self.version = version
        self.supported = supported
        where = f" at {location}" if location else ""
        super().__init__(
            f"session snapshot{where} has format version {version}, but this condukt reads "
            f"versions up to {supported}: upgrade condukt to load it",
            location,
        )


class StoreNotBound(ConduktError, RuntimeError):
    """A store without an explicit location was used before ``bind(cwd)``.

    Pass ``root=`` / ``path=`` when using a store on its own; an agent binds
    the store it is given to its ``cwd`` itself.
    """


class CorruptJournal(CorruptSnapshot):
    """An entry of a session's journal cannot be read (bad checksum, bad JSON, a gap in its numbers).

    ``key`` is the session key and ``seq`` the entry's number. Only that key
    is affected; the store never overwrites its data: ``load`` and ``save``
    of the key raise this error until it is repaired or ``delete``\\ d. An
    unfinished last entry (a save interrupted by a crash, which therefore
    never returned) is not corrupt: it is ignored and overwritten by the
    next save.
    """

    def __init__(self, location: str, detail: str, key: str, seq: int | None = None) -> None:
        self.key = key
        self.seq = seq
        entry = "" if seq is None else f" entry {seq}"
        super().__init__(location, f"journal{entry} of key {key!r}: {detail}")


class SessionOwned(ConduktError):
    """Another owner holds the session key (or took it over from this one).

    Raised by ``acquire`` when the key is held by a live owner, and by every
    write through a lease that was taken over (fencing: a former owner never
    writes again). ``key`` is the session key; ``owner`` and ``node`` name the
    holder as far as the store knows (None when unknown); ``retry_after`` is
    how many seconds the holder's lease has left if its node falls silent
    now (None when it is not the holder's silence that would free the key).
    """

    def __init__(
        self,
        key: str,
        *,
        owner: str | None = None,
        node: str | None = None,
        retry_after: float | None = None,
        detail: str = "",
    ) -> None:
        self.key = key
        self.owner = owner
        self.node = node
        self.retry_after = retry_after
        holder = f" by {owner!r}" if owner else ""
        on_node = f" on node {node}" if node else ""
        message = detail or f"session {key!r:.200} is owned{holder}{on_node}"
        if retry_after is not None and not detail:
            message += f" (if its node stays silent, its lease expires in {max(retry_after, 0.0):.1f} s)"
        super().__init__(message)


class LeaseReleased(ConduktError, RuntimeError):
    """A lease was used after ``release()``: acquire the key again to write to it."""


class StoreUnavailable(ConduktError):
    """The store cannot be reached: its database is down, refuses connections or lost them.

    Transient failures are retried first (with backoff, for operations that
    are safe to repeat); this error means the retries ran out, or the
    operation could not be repeated safely. The original error is the
    ``__cause__``. Nothing was written, or, for a write whose outcome is
    unknown (the connection broke after sending it), the store checks the
    next time it writes that key.
    """


class UnsupportedSchema(ConduktError):
    """The database was laid out by a newer condukt (its schema version is newer than this one knows).

    ``version`` is the database's, ``supported`` the newest this condukt
    knows. Nothing is changed: upgrade condukt, or use another database or schema.
    """

    def __init__(self, version: int, supported: int, where: str) -> None:
        self.version = version
        self.supported = supported
        super().__init__(
            f"{where} has schema version {version}, but this condukt knows versions up to {supported}: "
            "upgrade condukt to use it"
        )
