"""Journaled saves, for every store: a save appends what changed, a load replays, folds keep it short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from condukt.messages import TextBlock, ToolCall, ToolResultMessage, UserMessage
from condukt.sessions import (
    SNAPSHOT_VERSION,
    CorruptJournal,
    DiskStore,
    LeasingStore,
    RunCheckpoint,
    Snapshot,
    decode,
)
from condukt.sessions._engine import FOLD_MIN_BYTES

from .conftest import another_node, close
from .journal_helpers import Conversation, damage_entry, fingerprint, stored
from .test_snapshot import V0_DOCUMENT


async def test_a_save_appends_only_the_new_turn(store: LeasingStore) -> None:
    conversation = Conversation()
    await store.save("k", conversation.turn())
    sizes = []
    for _ in range(30):
        await store.save("k", conversation.turn())
        data = await stored(store, "k")
        assert data is not None
        sizes.append(len(data.entries[-1][1]))
    # Each entry holds one turn: its size does not grow with the history.
    assert max(sizes) - min(sizes) < 20
    assert max(sizes) < 4 * conversation.size + 1500
    data = await stored(store, "k")
    assert data is not None and data.base_seq == 1


async def test_a_load_replays_the_base_and_the_journal(store: LeasingStore, tmp_path: Path) -> None:
    conversation = Conversation()
    for _ in range(10):
        await store.save("k", conversation.turn())
    other = another_node(store, tmp_path)
    try:
        assert await other.load("k") == conversation.snapshot()
        assert await store.load("k") == conversation.snapshot()
    finally:
        await close(other)


async def test_a_history_cut_back_and_changed_settings_are_journaled(store: LeasingStore, tmp_path: Path) -> None:
    conversation = Conversation()
    for _ in range(3):
        await store.save("k", conversation.turn())
    # An aborted turn is dropped, the model changes, a run checkpoint comes and goes.
    del conversation.messages[-3:]
    snapshot = Snapshot(
        "session",
        conversation.messages,
        model="other:model",
        thinking_level="high",
        system_prompt="new",
        run=RunCheckpoint("r1", 4, 1),
    )
    await store.save("k", snapshot)
    data = await stored(store, "k")
    assert data is not None and json.loads(data.entries[-1][1])["cut"] == len(conversation.messages)
    other = another_node(store, tmp_path)
    try:
        assert await other.load("k") == snapshot
        finished = Snapshot("session", conversation.messages, model="other:model")
        await store.save("k", finished)
        assert await other.load("k") == finished
    finally:
        await close(other)


async def test_the_journal_is_folded_once_it_outgrows_the_base(store: LeasingStore, tmp_path: Path) -> None:
    conversation = Conversation(size=4_000)
    await store.save("k", conversation.turn())
    saves = 1
    while True:
        await store.save("k", conversation.turn())
        saves += 1
        await store.settled()
        data = await stored(store, "k")
        assert data is not None
        if data.base_seq > 1:
            break
        assert saves < 100
    # Folded once the journal held as many bytes as the base, and at least FOLD_MIN_BYTES.
    assert saves * 4 * 4_000 >= FOLD_MIN_BYTES
    assert data.entries == [] or data.entries[0][0] == data.base_seq + 1
    other = another_node(store, tmp_path)
    try:
        assert await other.load("k") == conversation.snapshot()
        await store.save("k", conversation.turn())
        assert await other.load("k") == conversation.snapshot()
    finally:
        await close(other)


async def test_an_old_format_base_loads_and_is_rewritten_before_the_journal_grows(
    store: LeasingStore, tmp_path: Path
) -> None:
    await store.save("k", Snapshot("x", ()))
    await _overwrite_base(store, "k", json.dumps(V0_DOCUMENT))
    other = another_node(store, tmp_path)
    try:
        loaded = await other.load("k")
        assert loaded is not None and loaded.id == "old-session" and loaded.thinking_level == "off"
        longer = Snapshot(loaded.id, (*loaded.messages, UserMessage.from_text("next")), model=loaded.model)
        await other.save("k", longer)
        data = await stored(other, "k")
        assert data is not None and data.entries == []
        assert json.loads(data.base)["version"] == SNAPSHOT_VERSION
        assert await store.load("k") == longer
    finally:
        await close(other)


async def _overwrite_base(store: LeasingStore, key: str, document: str) -> None:
    from .journal_helpers import key_id, postgres_execute

    kind = type(store).__name__
    if kind == "MemoryStore":
        store._data.streams[(key, "")].base = document  # type: ignore[attr-defined]
    elif kind == "DiskStore":
        store.path(key).write_text(document)  # type: ignore[attr-defined]
    elif kind == "SQLiteStore":
        import sqlite3

        connection = sqlite3.connect(store.path, isolation_level=None)  # type: ignore[attr-defined]
        connection.execute("UPDATE sessions SET data = ?, seq = 0 WHERE key = ?", (document, key))
        connection.close()
    else:
        postgres_execute(store, "UPDATE {s}.bases SET data = %s, seq = 0 WHERE key_id = %s", document, key_id(key))


async def test_a_corrupt_journal_entry_names_the_key_and_is_never_overwritten(
    store: LeasingStore, tmp_path: Path
) -> None:
    conversation = Conversation()
    for _ in range(4):
        await store.save("k", conversation.turn())
    await store.save("other", Conversation("other").turn())
    before = damage_entry(store, "k", 3)
    with pytest.raises(CorruptJournal) as info:
        await store.load("k")
    assert info.value.key == "k" and info.value.seq == 3
    assert "'k'" in str(info.value) and "entry 3" in str(info.value)
    # Neither this store nor another one overwrites it.
    other = another_node(store, tmp_path)
    try:
        with pytest.raises(CorruptJournal):
            await store.save("k", conversation.turn())
        with pytest.raises(CorruptJournal):
            await other.save("k", conversation.turn())
        async with await other.acquire("k") as lease:
            with pytest.raises(CorruptJournal):
                await lease.save(conversation.turn())
        assert fingerprint(store, "k") == before
        # Other keys are unaffected; delete clears the damage.
        assert await other.load("other") == Conversation("other").turn()
        await store.delete("k")
        await store.save("k", conversation.snapshot())
        assert await other.load("k") == conversation.snapshot()
    finally:
        await close(other)


async def test_a_torn_last_line_is_an_unfinished_save_and_is_dropped(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    conversation = Conversation()
    for _ in range(3):
        await store.save("k", conversation.turn())
    saved = conversation.snapshot()
    with store.journal_path("k").open("ab") as journal:
        journal.write(b'4 0badc0de {"seq":4,"op":"save","app')  # a save killed mid-write
    fresh = DiskStore(tmp_path)
    assert await fresh.load("k") == saved
    await fresh.save("k", conversation.turn())
    assert await DiskStore(tmp_path).load("k") == conversation.snapshot()
    assert b"0badc0de" not in store.journal_path("k").read_bytes()


@pytest.mark.parametrize("key", ["k" * 10_240, "../escape", "../../etc/passwd", "a/../../b"])
async def test_a_key_of_10_kb_or_with_dot_dot_is_stored_safely(store: LeasingStore, tmp_path: Path, key: str) -> None:
    conversation = Conversation()
    for _ in range(3):
        await store.save(key, conversation.turn())
    assert await store.load(key) == conversation.snapshot()
    async with await store.acquire(key, owner="me") as lease:
        await lease.save(conversation.turn())
        assert await lease.load() == conversation.snapshot()
    assert await store.load("k" * 10_239) is None
    if isinstance(store, DiskStore):
        assert store.root is not None
        assert all(p.resolve().is_relative_to(store.root.resolve()) for p in tmp_path.rglob("*") if p.is_file())
        assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape.json").exists()


async def test_tool_calls_are_journaled_as_started_then_finished(store: LeasingStore, tmp_path: Path) -> None:
    conversation = Conversation()
    conversation.turn()
    call = ToolCall("pay-1", "pay", {"amount": 10})
    read = ToolCall("read-1", "read", {"path": "a"})
    checkpoint = RunCheckpoint("run-1", 0, 1)
    async with await store.acquire("k", owner="agent") as lease:
        await lease.save(Snapshot("session", conversation.messages, run=checkpoint))
        await lease.tool_started("run-1", call)
        await lease.tool_started("run-1", read)
        result = ToolResultMessage("read-1", "read", (TextBlock("contents"),))
        await lease.tool_finished("run-1", result)
        await lease.tool_started("other-run", ToolCall("x", "pay", {}))  # not the checkpoint's run: ignored
        other = another_node(store, tmp_path)
        try:
            loaded = await other.load("k")
        finally:
            await close(other)
        assert loaded is not None and loaded.run is not None
        assert loaded.run.started == ("pay-1",)
        assert loaded.run.results == (result,)
        assert await lease.load() == loaded


async def test_a_run_event_log_is_bounded_and_runs_are_retired(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from condukt.events import Done, TextDelta

    from .conftest import KINDS, make_store

    for kind in KINDS:
        if kind == "postgres":
            try:
                request.getfixturevalue("postgres_server")
            except pytest.skip.Exception:
                continue
        store = await make_store(kind, tmp_path / kind, request, run_events=5, runs=2)
        try:
            async with await store.acquire("k") as lease:
                assert await lease.log_events("r1", [TextDelta(f"t{i}") for i in range(4)]) == 4
                assert await lease.log_events("r1", [TextDelta("t4"), TextDelta("t5")], index=4) == 6
                with pytest.raises(ValueError, match="event 6 next"):
                    await lease.log_events("r1", [TextDelta("again")], index=5)
                log = await store.read_run("k", "r1", after=2)
                assert log is not None and log.status == "running" and log.next_index == 6
                assert [(i, e.text) for i, e in log.events] == [(3, "t3"), (4, "t4"), (5, "t5")]  # type: ignore[union-attr]
                await lease.log_events("r1", [TextDelta(f"t{i}") for i in range(6, 12)])
                await lease.log_events("r1", [Done("completed")], index=12)
                await lease.set_run("r1", "done", result="t11")
                log = await store.read_run("k", "r1")
                assert log is not None and log.status == "done" and log.result == "t11"
                assert log.next_index == 13 and log.first_index >= 13 - 5 - 1
                assert [i for i, _ in log.events] == list(range(log.first_index, 13))
                assert isinstance(log.events[-1][1], Done)
                # Only the newest `runs` logs are kept.
                await lease.set_run("r2", "queued")
                await lease.set_run("r3", "running")
                assert await store.read_run("k", "r1") is None
                assert (await store.read_run("k", "r2")) is not None
                assert await store.read_run("k", "nope") is None
        finally:
            await close(store)


async def test_a_save_after_a_failed_load_of_another_format_keeps_the_document_readable(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    conversation = Conversation()
    await store.save("k", conversation.turn())
    await store.save("k", conversation.turn())
    text = store.path("k").read_text()
    assert text.startswith('{"journal_seq":1,')
    assert decode(text) == Snapshot(conversation.id, conversation.messages[:4], model="scripted:model", updated_at=4.0)
