"""The snapshot format: round trip, versioning, migrations, corrupt documents."""

from __future__ import annotations

import json

import attrs
import pytest

import condukt
from condukt.messages import TextBlock, ToolResultMessage, UserMessage
from condukt.sessions import (
    SNAPSHOT_VERSION,
    CorruptSnapshot,
    PendingApproval,
    RunCheckpoint,
    Snapshot,
    SnapshotError,
    UnsupportedSnapshotVersion,
    decode,
    encode,
)
from condukt.sessions._snapshot import MIGRATIONS

from .helpers import full_snapshot

#: A session as the pre-release condukt wrote it (format version 0).
V0_DOCUMENT = {
    "id": "old-session",
    "messages": [
        {"type": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "type": "assistant",
            "content": [{"type": "text", "text": "hello"}],
            "usage": {"input_tokens": 1, "output_tokens": 2, "cache_read_tokens": 0, "cache_write_tokens": 0},
            "stop_reason": "end_turn",
            "model": None,
        },
    ],
    "model": "openai:gpt-4o",
    "system_prompt": "Be brief.",
}


def test_round_trip_keeps_every_message_and_field() -> None:
    snapshot = full_snapshot()
    assert decode(encode(snapshot)) == snapshot


def test_document_is_one_versioned_ascii_json_object() -> None:
    text = encode(full_snapshot())
    assert text.isascii()
    doc = json.loads(text)
    assert next(iter(doc)) == "version"
    assert doc["version"] == SNAPSHOT_VERSION == 3
    assert doc["run"] is None
    assert set(doc) == {
        "run",
        "version",
        "id",
        "messages",
        "model",
        "thinking_level",
        "system_prompt",
        "created_at",
        "updated_at",
    }
    assert [m["type"] for m in doc["messages"]][:3] == ["user", "assistant", "tool_result"]


def test_messages_may_be_given_as_a_list() -> None:
    message = UserMessage((TextBlock("a"),))
    assert Snapshot("s", [message]).messages == (message,)


def test_version_0_migrates_with_defaults() -> None:
    snapshot = decode(json.dumps(V0_DOCUMENT))
    assert snapshot.id == "old-session"
    assert snapshot.messages[0] == UserMessage((TextBlock("hi"),))
    assert snapshot.messages[1].text == "hello"
    assert snapshot.model == "openai:gpt-4o"
    assert snapshot.system_prompt == "Be brief."
    assert (snapshot.thinking_level, snapshot.created_at, snapshot.updated_at) == ("off", 0.0, 0.0)
    assert snapshot.version == SNAPSHOT_VERSION
    assert json.loads(encode(snapshot))["version"] == SNAPSHOT_VERSION


#: A session as condukt wrote it before runs were checkpointed (format version 1).
V1_DOCUMENT = {**V0_DOCUMENT, "version": 1, "thinking_level": "low", "created_at": 1.0, "updated_at": 2.0}


def test_version_1_migrates_without_a_run_in_progress() -> None:
    snapshot = decode(json.dumps(V1_DOCUMENT))
    assert (snapshot.id, snapshot.thinking_level, snapshot.run) == ("old-session", "low", None)
    assert snapshot.messages[1].text == "hello"


def test_a_run_in_progress_round_trips() -> None:
    result = ToolResultMessage("c1", "deploy", (TextBlock("deployed"),))
    pending = PendingApproval("c2", "pay", {"amount": 3}, "s/1", 10.0, 70.0)
    snapshot = attrs.evolve(full_snapshot(), run=RunCheckpoint("s/1", 0, 2, [result], [pending]))
    assert decode(encode(snapshot)) == snapshot
    assert json.loads(encode(snapshot))["run"]["approvals"][0]["call_id"] == "c2"


def test_every_older_version_has_a_migration() -> None:
    assert set(MIGRATIONS) == set(range(SNAPSHOT_VERSION))


def test_newer_version_is_refused_with_a_clear_message() -> None:
    doc = {**json.loads(encode(full_snapshot())), "version": SNAPSHOT_VERSION + 1}
    with pytest.raises(UnsupportedSnapshotVersion) as info:
        decode(json.dumps(doc), "/x/s.json")
    error = info.value
    assert (error.version, error.supported, error.location) == (
        SNAPSHOT_VERSION + 1,
        SNAPSHOT_VERSION,
        "/x/s.json",
    )
    message = str(error)
    assert f"version {SNAPSHOT_VERSION + 1}" in message
    assert f"up to {SNAPSHOT_VERSION}" in message
    assert "upgrade condukt" in message
    assert "/x/s.json" in message
    assert isinstance(error, SnapshotError) and isinstance(error, condukt.ConduktError)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        b"\xff\xfe",
        "[]",
        '"a string"',
        "{}",
        '{"version": "1", "id": "s", "messages": []}',
        '{"version": -1, "id": "s", "messages": []}',
        '{"version": true, "id": "s", "messages": []}',
        '{"version": 1, "messages": []}',
        '{"version": 1, "id": "s"}',
        '{"version": 1, "id": 5, "messages": []}',
        '{"version": 1, "id": "s", "messages": {}}',
        '{"version": 1, "id": "s", "messages": [], "created_at": "yesterday"}',
        '{"version": 1, "id": "s", "messages": [], "model": 3}',
        '{"version": 1, "id": "s", "messages": [{"type": "martian"}]}',
        '{"version": 1, "id": "s", "messages": [{"type": "user"}]}',
        '{"version": 1, "id": "s", "messages": [{"type": "user", "content": [{"type": "tool_call"}]}]}',
        '{"version": 1, "id": "s", "messages": [42]}',
        "[" * 100_000,
    ],
)
def test_malformed_documents_are_corrupt_and_name_the_location(text: str | bytes) -> None:
    with pytest.raises(CorruptSnapshot) as info:
        decode(text, "/data/session.json")
    assert info.value.location == "/data/session.json"
    assert "/data/session.json" in str(info.value)
    assert isinstance(info.value, condukt.ConduktError)


def test_encode_writes_only_the_current_version() -> None:
    with pytest.raises(ValueError, match="version"):
        encode(Snapshot("s", (), version=0))
