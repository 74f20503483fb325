"""Session stores: an agent's conversation kept across crashes and restarts.

An agent given ``session_store=`` saves a :class:`Snapshot` (history, model,
thinking level, system prompt) after every completed turn and reloads it when
its supervisor restarts it. Three stores ship:

- :class:`MemoryStore`: in the process; survives agent restarts, not the process.
- :class:`DiskStore`: one JSON file per session under ``<cwd>/.condukt/sessions/``,
  replaced atomically (write, fsync, rename, fsync the directory).
- :class:`SQLiteStore`: one table in ``<cwd>/.condukt/sessions.sqlite3`` (WAL mode).

Any object following the :class:`SessionStore` protocol works too. The
snapshot format is versioned; see :mod:`condukt.sessions._snapshot` and
``docs/sessions.md``.
"""

from ._errors import CorruptSnapshot, SnapshotError, StoreNotBound, UnsupportedSnapshotVersion
from ._snapshot import SNAPSHOT_VERSION, PendingApproval, RunCheckpoint, Snapshot, decode, encode
from ._store import SessionStore
from .disk import DiskStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = [
    "SNAPSHOT_VERSION",
    "CorruptSnapshot",
    "DiskStore",
    "MemoryStore",
    "PendingApproval",
    "RunCheckpoint",
    "SQLiteStore",
    "SessionStore",
    "Snapshot",
    "SnapshotError",
    "StoreNotBound",
    "UnsupportedSnapshotVersion",
    "decode",
    "encode",
]
