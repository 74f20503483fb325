"""Session stores: an agent's conversation kept across crashes, restarts and nodes.

An agent given ``session_store=`` saves its session (history, model,
thinking level, system prompt, the run in progress) after every completed
turn and reloads it when its supervisor restarts it. Four stores ship:

- :class:`MemoryStore`: in the process; survives agent restarts, not the process.
- :class:`DiskStore`: files per session under ``<cwd>/.condukt/sessions/``.
- :class:`SQLiteStore`: tables in ``<cwd>/.condukt/sessions.sqlite3`` (WAL mode).
- :class:`PostgresStore`: tables in a PostgreSQL database, shared by every
  node that reaches it (extra ``condukt[postgres]``).

Every shipped store journals: a save appends what changed since the last
one, a load replays the base snapshot and the journal, and the journal is
folded into a new base now and then. Every shipped store also gives one
owner per key (:meth:`~LeasingStore.acquire` returns a :class:`Lease`;
writes through it are fenced) and keeps run event logs. Any object following
the :class:`SessionStore` protocol works as a store too. See
``docs/sessions.md``.
"""

import importlib.util
from typing import TYPE_CHECKING, Any

from ._engine import RUN_STATUSES, Lease, RunLog
from ._errors import (
    CorruptJournal,
    CorruptSnapshot,
    LeaseReleased,
    SessionOwned,
    SnapshotError,
    StoreNotBound,
    StoreUnavailable,
    UnsupportedSchema,
    UnsupportedSnapshotVersion,
)
from ._snapshot import SNAPSHOT_VERSION, PendingApproval, PendingInput, RunCheckpoint, Snapshot, decode, encode
from ._store import LeasingStore, SessionStore
from .disk import DiskStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "RUN_STATUSES",
    "SNAPSHOT_VERSION",
    "CorruptJournal",
    "CorruptSnapshot",
    "DiskStore",
    "Lease",
    "LeaseReleased",
    "LeasingStore",
    "MemoryStore",
    "PendingApproval",
    "PendingInput",
    "PostgresStore",
    "RunCheckpoint",
    "RunLog",
    "SQLiteStore",
    "SessionOwned",
    "SessionStore",
    "Snapshot",
    "SnapshotError",
    "StoreNotBound",
    "StoreUnavailable",
    "UnsupportedSchema",
    "UnsupportedSnapshotVersion",
    "decode",
    "encode",
]

# PostgresStore needs psycopg (the [postgres] extra). Without it the name stays out of
# __all__, so `from condukt.sessions import *` works; asking for it by name still raises
# the ImportError that names the extra.
if importlib.util.find_spec("psycopg") is None:  # pragma: no cover - depends on the installed extras
    __all__.remove("PostgresStore")


def __getattr__(name: str) -> Any:
    # PostgresStore needs psycopg (the [postgres] extra): imported when first asked for.
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
