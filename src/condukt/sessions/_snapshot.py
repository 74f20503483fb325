"""The snapshot of a session and its versioned JSON format.

A snapshot is everything an agent needs to come back after a restart: its
session id, its history and the settings the history was made with. It is
stored as one JSON object, written by the project's one cattrs converter
(:mod:`condukt.serialization`), with a ``"version"`` field:

.. code-block:: json

    {"version": 3, "id": "0190...", "messages": [{"type": "user", ...}],
     "model": "anthropic:claude-sonnet-4-5", "thinking_level": "off",
     "system_prompt": "You review pull requests.",
     "created_at": 1760000000.0, "updated_at": 1760000042.5, "run": null}

``run`` is the run that was in progress when the snapshot was saved (a
:class:`RunCheckpoint`: where its prompt is, its pending approvals and the
results of its turn in flight, and the tool calls of that turn that started
but have no saved result), or null; version 1 had no ``run``, version 2 no
``run.started``. A journaled store adds ``"journal_seq"`` (the number of
the last journal entry folded into the document; see
:mod:`condukt.sessions._journal`), which decoding ignores.

Reading migrates older formats step by step (:data:`MIGRATIONS`, version N to
N+1 on the raw dict) and refuses newer ones. Changing the format means: bump
:data:`SNAPSHOT_VERSION`, add the migration from the previous version, keep
a test document of every old version decoding.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import cattrs

from ..messages import Message, ToolResultMessage
from ..serialization import structure, unstructure
from ._errors import CorruptSnapshot, UnsupportedSnapshotVersion

__all__ = [
    "MIGRATIONS",
    "SNAPSHOT_VERSION",
    "PendingApproval",
    "PendingInput",
    "RunCheckpoint",
    "Snapshot",
    "decode",
    "decode_document",
    "check_field",
    "encode",
    "message_json",
    "read_version",
]

#: The format version this condukt writes, and the newest it reads.
SNAPSHOT_VERSION = 3


@attrs.frozen
class PendingApproval:
    """A tool call waiting for a person's decision (``agent.approve`` / ``agent.deny``).

    ``arguments`` are scrubbed (secret values and redactor matches replaced);
    the call itself, with its real arguments, is in the history.
    ``requested_at`` and ``expires_at`` are unix seconds; ``expires_at`` is
    None without an ``approval_timeout``. ``run_id`` is the waiting run.
    """

    call_id: str
    tool: str
    arguments: Any
    run_id: str = ""
    requested_at: float = 0.0
    expires_at: float | None = None


@attrs.frozen
class PendingInput:
    """A deferred tool's call waiting for its result from outside (``agent.respond``).

    ``question`` is what to show whoever answers; ``arguments`` are the
    call's arguments, scrubbed (the call itself is in the history).
    ``requested_at`` is in unix seconds; ``run_id`` is the waiting run.
    """

    call_id: str
    tool: str
    question: str
    arguments: Any = None
    run_id: str = ""
    requested_at: float = 0.0


def _inputs(inputs: Iterable[PendingInput]) -> tuple[PendingInput, ...]:
    return tuple(inputs)


def _results(results: Iterable[ToolResultMessage]) -> tuple[ToolResultMessage, ...]:
    return tuple(results)


def _approvals(approvals: Iterable[PendingApproval]) -> tuple[PendingApproval, ...]:
    return tuple(approvals)


def _ids(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(ids)


@attrs.frozen
class RunCheckpoint:
    """The run in progress when a snapshot was saved; what a restarted agent resumes.

    ``prompt_index`` is the index of the run's prompt in the snapshot's
    history and ``turn`` the number of its turns in that history (the one in
    flight included). When the history
    ends with an assistant message that called tools (the turn in flight),
    ``results`` holds the results of those calls that had ended and
    ``approvals`` the calls still waiting for a decision, ``inputs`` the
    deferred calls still waiting for their result. ``started`` holds
    the ids of the calls of that turn that were journaled as started
    (:meth:`Lease.tool_started <condukt.sessions.Lease.tool_started>`) and
    have no result in ``results``: calls that may or may not have taken
    effect when the agent stopped.
    """

    run_id: str
    prompt_index: int
    turn: int
    results: tuple[ToolResultMessage, ...] = attrs.field(default=(), converter=_results)
    approvals: tuple[PendingApproval, ...] = attrs.field(default=(), converter=_approvals)
    started: tuple[str, ...] = attrs.field(default=(), converter=_ids)
    #: Deferred calls still waiting for ``agent.respond`` (an optional field: a document without it has none).
    inputs: tuple[PendingInput, ...] = attrs.field(default=(), converter=_inputs)


def _as_tuple(messages: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(messages)


@attrs.frozen
class Snapshot:
    """One saved session: history plus the settings it was made with.

    ``model`` is the ``"provider:model"`` string, or None when the agent's
    model was an object (which cannot be stored). ``created_at`` and
    ``updated_at`` are unix seconds (:func:`time.time`). ``version`` is the
    format version; a decoded snapshot has been migrated to the current
    format, so it is always :data:`SNAPSHOT_VERSION`. ``messages`` may be
    given as any iterable (the agent's history list); it is kept as a tuple.
    """

    id: str
    messages: tuple[Message, ...] = attrs.field(converter=_as_tuple)
    model: str | None = None
    thinking_level: str = "off"
    system_prompt: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    version: int = SNAPSHOT_VERSION
    #: The run in progress at save time, or None (see :class:`RunCheckpoint`).
    run: RunCheckpoint | None = None


Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _v0_to_v1(doc: dict[str, Any]) -> dict[str, Any]:
    # The pre-release format: no "version", no timestamps, no thinking level.
    migrated = dict(doc)
    migrated.setdefault("thinking_level", "off")
    migrated.setdefault("created_at", 0.0)
    migrated.setdefault("updated_at", 0.0)
    migrated["version"] = 1
    return migrated


def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    # Version 2 added the run in progress; a version-1 snapshot had none.
    migrated = dict(doc)
    migrated.setdefault("run", None)
    migrated["version"] = 2
    return migrated


def _v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    # Version 3 added the run's started tool calls; a version-2 run had none journaled.
    migrated = dict(doc)
    run = migrated.get("run")
    if isinstance(run, dict):
        migrated["run"] = {**run, "started": run.get("started", [])}
    migrated["version"] = 3
    return migrated


#: ``MIGRATIONS[n]`` turns a raw version-``n`` document into a version-``n+1`` one.
MIGRATIONS: Mapping[int, Migration] = {0: _v0_to_v1, 1: _v1_to_v2, 2: _v2_to_v3}


def encode(snapshot: Snapshot) -> str:
    """The JSON document for ``snapshot``, in the current format.

    Pure ASCII (non-ASCII characters are escaped), so text a tool decoded
    with lone surrogates still stores. Raises :class:`ValueError` for a
    snapshot whose ``version`` is not :data:`SNAPSHOT_VERSION`.
    """
    if snapshot.version != SNAPSHOT_VERSION:
        raise ValueError(f"can only encode format version {SNAPSHOT_VERSION}, not {snapshot.version}")
    head = {
        "version": SNAPSHOT_VERSION,
        "id": snapshot.id,
        "model": snapshot.model,
        "thinking_level": snapshot.thinking_level,
        "system_prompt": snapshot.system_prompt,
        "created_at": snapshot.created_at,
        "updated_at": snapshot.updated_at,
        "run": None if snapshot.run is None else unstructure(snapshot.run),
    }
    # Messages are immutable: each is encoded once and reused by every later
    # save, so a save costs what is new plus a join, not the whole history.
    messages = ",".join(message_json(message) for message in snapshot.messages)
    return f'{json.dumps(head, ensure_ascii=True, separators=(",", ":"))[:-1]},"messages":[{messages}]}}'


_encoded: dict[int, tuple[weakref.ref[Any], str]] = {}


def _forget(key: int) -> Callable[[weakref.ref[Any]], None]:
    def drop(ref: weakref.ref[Any]) -> None:
        entry = _encoded.get(key)
        if entry is not None and entry[0] is ref:
            del _encoded[key]

    return drop


def message_json(message: Message) -> str:
    """The JSON of one message, cached by identity for as long as the message lives."""
    key = id(message)
    entry = _encoded.get(key)
    if entry is not None and entry[0]() is message:
        return entry[1]
    text = json.dumps(unstructure(message, Message), ensure_ascii=True, separators=(",", ":"))
    try:
        _encoded[key] = (weakref.ref(message, _forget(key)), text)
    except TypeError:  # not weak-referenceable: just do not cache
        pass
    return text


def read_version(doc: Any, location: str) -> int:
    """The format version of the raw document ``doc`` (0 when it has none).

    Raises :class:`CorruptSnapshot` if ``doc`` is not a JSON object or its
    version is not a non-negative integer.
    """
    if not isinstance(doc, dict):
        raise CorruptSnapshot(location, f"expected a JSON object, got {type(doc).__name__}")
    version = doc.get("version", 0)
    if type(version) is not int or version < 0:
        raise CorruptSnapshot(location, f"invalid format version {version!r}")
    return version


def decode(text: str | bytes, location: str = "<snapshot>") -> Snapshot:
    """The snapshot that the JSON document ``text`` describes, migrated to the current format.

    ``location`` (a file path, a database key...) names the source in errors.
    Raises :class:`UnsupportedSnapshotVersion` for a document written by a
    newer condukt and :class:`CorruptSnapshot` for anything else that is not
    a valid snapshot (bad JSON, bad UTF-8, wrong shape, unknown message type).
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CorruptSnapshot(location, f"not valid JSON: {exc}") from exc
    return decode_document(doc, location)


def decode_document(doc: Any, location: str = "<snapshot>") -> Snapshot:
    """As :func:`decode`, for a document already parsed from JSON (not modified)."""
    version = read_version(doc, location)
    if version > SNAPSHOT_VERSION:
        raise UnsupportedSnapshotVersion(version, SNAPSHOT_VERSION, location)
    try:
        while version < SNAPSHOT_VERSION:
            doc = MIGRATIONS[version](doc)
            version += 1
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptSnapshot(location, f"cannot migrate from format version {version}: {exc}") from exc
    _check_fields(doc, location)
    try:
        return structure(doc, Snapshot)
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError, AttributeError) as exc:
        detail = (
            "; ".join(cattrs.transform_error(exc)) if isinstance(exc, cattrs.BaseValidationError) else exc
        )
        raise CorruptSnapshot(location, f"not a session snapshot: {detail}") from exc


# The converter converts leniently (5 -> "5"); the top-level fields are
# checked strictly so that a document of another kind is reported as corrupt.
_NUMBER = (int, float)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "messages": (list,),
    "model": (str, type(None)),
    "thinking_level": (str,),
    "system_prompt": (str, type(None)),
    "created_at": _NUMBER,
    "updated_at": _NUMBER,
    "run": (dict, type(None)),
}
_REQUIRED = ("id", "messages")


def _check_fields(doc: dict[str, Any], location: str) -> None:
    for name in _REQUIRED:
        if name not in doc:
            raise CorruptSnapshot(location, f"missing field {name!r}")
    for name in _FIELD_TYPES:
        if name in doc and not check_field(name, doc[name]):
            raise CorruptSnapshot(location, f"field {name!r} has the wrong type: {doc[name]!r:.80}")


def check_field(name: str, value: Any) -> bool:
    """Whether ``value`` has the JSON type of the top-level snapshot field ``name``."""
    types = _FIELD_TYPES.get(name)
    return types is not None and isinstance(value, types) and not isinstance(value, bool)
