"""The journal: what a save appends instead of rewriting the whole snapshot.

A key's data is a *base* (a snapshot document, :mod:`condukt.sessions._snapshot`)
and the journal entries written since, numbered 1, 2, 3... (``seq``). A load
replays the entries over the base; a *fold* writes the replayed snapshot as
the new base and drops the entries it holds. Each entry is one JSON object:

.. code-block:: json

    {"seq": 7, "op": "save", "cut": 40, "append": [{"type": "user", ...}],
     "head": {"updated_at": 1760000042.5}, "run": {"run_id": "r1", ...}}
    {"seq": 8, "op": "tool", "state": "started", "run_id": "r1", "call_id": "c1", "name": "bash"}
    {"seq": 9, "op": "tool", "state": "finished", "run_id": "r1", "call_id": "c1", "name": "bash",
     "result": {"type": "tool_result", ...}}

A ``save`` entry holds what changed since the previous save: ``cut`` (the
history was cut back to that many messages, e.g. a turn in flight dropped;
absent when it only grew), ``append`` (the messages added), ``head`` (the
changed settings: ``id``, ``model``, ``thinking_level``, ``system_prompt``,
``created_at``, ``updated_at``) and ``run`` (the new run checkpoint, or
null; absent when unchanged). A ``tool`` entry records a tool call of the
run in progress as started, then with its result: replaying it adds the
call id to the checkpoint's ``started``, then moves it to ``results``. A
tool entry for another run than the checkpoint's (the run ended since) is
ignored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import cattrs

from ..messages import Message, ToolResultMessage
from ..serialization import structure, unstructure
from ._errors import CorruptJournal
from ._snapshot import RunCheckpoint, Snapshot, check_field, message_json

__all__ = ["HEAD_FIELDS", "Replay", "save_entry", "tool_applied", "tool_entry"]

#: The settings of a snapshot a save entry carries when they change.
HEAD_FIELDS = ("id", "model", "thinking_level", "system_prompt", "created_at", "updated_at")


def _prefix_length(before: Sequence[Message], after: Sequence[Message]) -> int:
    """How many messages ``after`` shares with ``before`` from the start."""
    n = len(before)
    # The agent hands the same message objects back every save: tuple comparison
    # runs in C and stops at identity for each, so this is a pointer scan.
    if len(after) >= n and tuple(after[:n]) == tuple(before):
        return n
    k = 0
    for old, new in zip(before, after, strict=False):
        if old is not new and old != new:
            break
        k += 1
    return k


def save_entry(seq: int, before: Snapshot, after: Snapshot) -> str | None:
    """The entry that turns ``before`` into ``after``, or None when they are the same."""
    parts = [f'{{"seq":{seq},"op":"save"']
    k = _prefix_length(before.messages, after.messages)
    if k < len(before.messages):
        parts.append(f'"cut":{k}')
    if k < len(after.messages):
        parts.append('"append":[' + ",".join(message_json(m) for m in after.messages[k:]) + "]")
    head = {name: getattr(after, name) for name in HEAD_FIELDS if getattr(after, name) != getattr(before, name)}
    if head:
        parts.append('"head":' + _dumps(head))
    if after.run != before.run:
        parts.append('"run":' + _dumps(None if after.run is None else unstructure(after.run)))
    if len(parts) == 1:
        return None
    return ",".join(parts) + "}"


def tool_entry(seq: int, run_id: str, call_id: str, name: str, result: ToolResultMessage | None) -> str:
    """The entry recording a tool call as started (``result`` None) or finished with ``result``."""
    doc: dict[str, Any] = {
        "seq": seq,
        "op": "tool",
        "state": "started" if result is None else "finished",
        "run_id": run_id,
        "call_id": call_id,
        "name": name,
    }
    if result is not None:
        doc["result"] = unstructure(result, Message)
    return _dumps(doc)


def tool_applied(
    snapshot: Snapshot, run_id: str, call_id: str, result: ToolResultMessage | None
) -> Snapshot:
    """``snapshot`` with a tool call of its run recorded as started, or as finished with ``result``."""
    run = snapshot.run
    if run is None or run.run_id != run_id:
        return snapshot
    started = tuple(c for c in run.started if c != call_id)
    if result is None:
        if any(r.tool_call_id == call_id for r in run.results):
            return snapshot  # already finished: a late "started" changes nothing
        return attrs.evolve(snapshot, run=attrs.evolve(run, started=(*started, call_id)))
    results = (*(r for r in run.results if r.tool_call_id != call_id), result)
    return attrs.evolve(snapshot, run=attrs.evolve(run, started=started, results=results))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


class Replay:
    """Applies journal entries, in order, to a base snapshot.

    ``key`` and ``location`` name the data in errors. Each entry must carry
    the next number (``expected``): a gap or a repeat is corruption.
    """

    def __init__(self, base: Snapshot, base_seq: int, key: str, location: str) -> None:
        self.key = key
        self.location = location
        self.seq = base_seq
        self._messages: list[Message] = list(base.messages)
        self._head: dict[str, Any] = {name: getattr(base, name) for name in HEAD_FIELDS}
        self._run = base.run

    def apply(self, seq: int, text: str | bytes) -> None:
        """Apply the entry ``text`` stored as number ``seq``; raises :class:`CorruptJournal`."""
        if seq != self.seq + 1:
            raise self._corrupt(seq, f"expected entry {self.seq + 1} next")
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise self._corrupt(seq, f"not valid JSON: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("seq") != seq:
            raise self._corrupt(seq, "not a journal entry with its own number")
        try:
            op = doc.get("op")
            if op == "save":
                self._save(doc)
            elif op == "tool":
                self._tool(doc)
            else:
                raise self._corrupt(seq, f"unknown entry kind {op!r} (written by a newer condukt?)")
        except CorruptJournal:
            raise
        except (cattrs.BaseValidationError, KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = "; ".join(cattrs.transform_error(exc)) if isinstance(exc, cattrs.BaseValidationError) else exc
            raise self._corrupt(seq, f"malformed entry: {detail}") from exc
        self.seq = seq

    def snapshot(self) -> Snapshot:
        """The snapshot after the entries applied so far."""
        return Snapshot(messages=tuple(self._messages), run=self._run, **self._head)

    def _save(self, doc: dict[str, Any]) -> None:
        if "cut" in doc:
            cut = doc["cut"]
            if type(cut) is not int or not 0 <= cut <= len(self._messages):
                raise ValueError(f"cut {cut!r} outside a history of {len(self._messages)} messages")
            del self._messages[cut:]
        appended = doc.get("append", [])
        if not isinstance(appended, list):
            raise TypeError("append is not a list")
        self._messages.extend(structure(m, Message) for m in appended)
        head = doc.get("head", {})
        if not isinstance(head, dict) or not all(n in HEAD_FIELDS and check_field(n, v) for n, v in head.items()):
            raise ValueError(f"bad settings in head: {head!r:.200}")
        self._head.update(head)
        if "run" in doc:
            self._run = None if doc["run"] is None else structure(doc["run"], RunCheckpoint)

    def _tool(self, doc: dict[str, Any]) -> None:
        state, run_id, call_id = doc["state"], doc["run_id"], doc["call_id"]
        if state not in ("started", "finished") or not isinstance(run_id, str) or not isinstance(call_id, str):
            raise ValueError("a tool entry needs state, run_id and call_id")
        result = None if state == "started" else structure(doc["result"], Message)
        if result is not None and not isinstance(result, ToolResultMessage):
            raise TypeError("a finished tool entry holds a tool result")
        base = Snapshot("", (), run=self._run)
        self._run = tool_applied(base, run_id, call_id, result).run

    def _corrupt(self, seq: int, detail: str) -> CorruptJournal:
        return CorruptJournal(self.location, detail, self.key, seq)
