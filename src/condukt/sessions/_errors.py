"""The errors a session store raises on purpose.

All derive from :class:`condukt.ConduktError`; :class:`SnapshotError` is the
base of those about one stored snapshot, so ``except SnapshotError`` catches
every "this session cannot be read or written" case.
"""

from __future__ import annotations

from ..otp import ConduktError

__all__ = ["CorruptSnapshot", "SnapshotError", "StoreNotBound", "UnsupportedSnapshotVersion"]


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
