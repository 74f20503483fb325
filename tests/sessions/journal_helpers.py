"""Conversations that grow turn by turn, and ways to look at or damage what a store keeps."""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

from condukt.messages import AssistantMessage, Message, TextBlock, ToolCall, ToolResultMessage, UserMessage
from condukt.sessions import DiskStore, MemoryStore, Snapshot, SQLiteStore
from condukt.sessions._engine import SESSION, Stored


class Conversation:
    """A history that grows like an agent's: the same message objects, a few more each turn."""

    def __init__(self, id: str = "session", size: int = 200) -> None:
        self.id = id
        self.size = size
        self.messages: list[Message] = []

    def turn(self) -> Snapshot:
        """Add one turn (a prompt, a tool call, its result, an answer) and return the snapshot to save."""
        n = len(self.messages) // 4
        filler = "x" * self.size
        self.messages += [
            UserMessage.from_text(f"prompt {n} {filler}"),
            AssistantMessage((ToolCall(f"c{n}", "echo", {"n": n}),), stop_reason="tool_use"),
            ToolResultMessage(f"c{n}", "echo", (TextBlock(f"echo {n} {filler}"),)),
            AssistantMessage((TextBlock(f"answer {n} {filler}"),)),
        ]
        return self.snapshot()

    def snapshot(self) -> Snapshot:
        return Snapshot(self.id, self.messages, model="scripted:model", updated_at=float(len(self.messages)))


async def stored(store: Any, key: str, stream: str = SESSION) -> Stored | None:
    """What the store keeps for ``key``: its base and journal entries (the store's own reading)."""
    result: Stored | None = await store._read(key, stream, 0)
    return result


def postgres_execute(store: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run ``sql`` on the store's database through a connection of its own (``{s}``: the store's schema)."""
    import psycopg

    with psycopg.connect(store._conninfo, autocommit=True) as connection:
        cursor = connection.execute(sql.format(s=f'"{store.schema}"'), params)
        return cursor.fetchall() if cursor.description else []


def key_id(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def damage_entry(store: Any, key: str, seq: int) -> Any:
    """Make journal entry ``seq`` of ``key`` unreadable, as a bad disk or a bad hand would; return a fingerprint."""
    if isinstance(store, MemoryStore):
        stream = store._data.streams[(key, SESSION)]
        stream.entries = [(n, '{"seq": %d, "op": "save", "append": [{"type": "nonsense"}]}' % n if n == seq else t) for n, t in stream.entries]
        return list(stream.entries)
    if isinstance(store, DiskStore):
        path = store.journal_path(key)
        lines = path.read_bytes().split(b"\n")
        for i, line in enumerate(lines):
            if line.startswith(b"%d " % seq):
                lines[i] = line[:-3] + b"###"
        path.write_bytes(b"\n".join(lines))
        return path.read_bytes()
    if isinstance(store, SQLiteStore):
        connection = sqlite3.connect(store.path, isolation_level=None)
        try:
            connection.execute("UPDATE journal SET data = '{not json' WHERE key = ? AND seq = ?", (key, seq))
            return connection.execute("SELECT seq, data FROM journal ORDER BY seq").fetchall()
        finally:
            connection.close()
    postgres_execute(store, "UPDATE {s}.journal SET data = '{{not json' WHERE key_id = %s AND seq = %s", key_id(key), seq)
    return postgres_execute(store, "SELECT seq, data FROM {s}.journal ORDER BY seq")


def fingerprint(store: Any, key: str) -> Any:
    """The raw stored journal, to check it was left untouched."""
    if isinstance(store, MemoryStore):
        return list(store._data.streams[(key, SESSION)].entries)
    if isinstance(store, DiskStore):
        return store.journal_path(key).read_bytes()
    if isinstance(store, SQLiteStore):
        connection = sqlite3.connect(store.path, isolation_level=None)
        try:
            return connection.execute("SELECT seq, data FROM journal ORDER BY seq").fetchall()
        finally:
            connection.close()
    return postgres_execute(store, "SELECT seq, data FROM {s}.journal ORDER BY seq")
