"""Agents, tools and checks shared by the agent tests.

``Recorder`` is an agent that appends every event it emits (through
``handle_event``) to the list given as its ``log`` start option, so a test
can see the events of runs it did not start itself (follow-ups, crashes).
The tools are small ``condukt.Tool`` subclasses whose calls are recorded in
``self.calls`` so a test can tell whether (and how) ``call`` ran.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio
from waiting import TIMEOUT, Watched

import condukt
from condukt.events import ApprovalRequested
from condukt.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from condukt.sessions import PendingApproval, SessionStore, Snapshot


class Recorder(condukt.Agent):
    """An agent that logs its events to ``options["log"]`` and its incarnations to ``options["incarnations"]``.

    Both optional. ``incarnations`` gets this process's handle as each
    incarnation starts (a supervisor's restarts included), so a test waits
    for a restart with ``await incarnations.wait_for_length(2)`` instead of
    polling ``node.whereis``.
    """

    extra_options = frozenset({"log", "incarnations"})

    async def init(self, options: Mapping[str, Any]) -> None:
        self.log: list[Any] | None = options.get("log")
        incarnations: list[condukt.AgentHandle] | None = options.get("incarnations")
        if incarnations is not None:
            incarnations.append(self.handle)

    async def handle_event(self, event: Any) -> None:
        if self.log is not None:
            self.log.append(event)


class Sleep(condukt.Tool):
    """``sleep``: sleeps ``seconds`` and answers ``"slept <label>"``."""

    name = "sleep"
    description = "Sleep for a while."
    parameters = {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
        "required": ["seconds"],
    }

    def __init__(self, **opts: Any) -> None:
        super().__init__(**opts)
        #: The calls' arguments, as they start: ``await sleep.calls.wait_for_length(n)``.
        self.calls: Watched[dict[str, Any]] = Watched()
        self.finished: list[str] = []
        self.cancelled = 0

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        self.calls.append(args)
        label = args.get("label", "")
        try:
            await trio.sleep(math.inf if args["seconds"] < 0 else args["seconds"])
        except trio.Cancelled:
            self.cancelled += 1
            raise
        self.finished.append(label)
        return f"slept {label}".strip()


class Add(condukt.Tool):
    """``add``: adds two integers (a schema with required integer fields)."""

    name = "add"
    description = "Add two integers."
    parameters = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }

    def __init__(self, **opts: Any) -> None:
        super().__init__(**opts)
        self.calls: list[dict[str, Any]] = []

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        self.calls.append(args)
        return str(args["a"] + args["b"])


class Crash(condukt.Tool):
    """``crash``: raises a plain ``ValueError`` (a bug in the tool)."""

    name = "crash"
    description = "Always fails."
    parameters = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        raise ValueError("kaboom")


async def wait_pending(agent: condukt.AgentHandle, count: int = 1) -> tuple[PendingApproval, ...]:
    """The agent's pending approvals once there are ``count``: checked again after each ``ApprovalRequested``."""
    with trio.fail_after(TIMEOUT):
        async with agent.node.subscribe(agent.session_id) as events:
            # Subscribed first: an approval requested after this check is in ``events``.
            while len(pending := await agent.pending_approvals()) < count:
                async for published in events:
                    if isinstance(published.event, ApprovalRequested):
                        break
    return pending


class SavesSeen:
    """A session store that hands every snapshot it saved to ``saves`` (a :class:`Watched` list), after saving it.

    Wraps a real store; a test waits for "this is persisted" with
    ``await saves.wait_until(...)`` instead of reading the store on a timer.
    """

    def __init__(self, store: SessionStore, saves: Watched[Snapshot]) -> None:
        self.store = store
        self.saves = saves

    def bind(self, cwd: Path) -> SavesSeen:
        return SavesSeen(self.store.bind(cwd), self.saves)

    async def load(self, key: str) -> Snapshot | None:
        return await self.store.load(key)

    async def save(self, key: str, snapshot: Snapshot) -> None:
        await self.store.save(key, snapshot)
        self.saves.append(snapshot)

    async def delete(self, key: str) -> None:
        await self.store.delete(key)


def result_in(snapshot: Snapshot, call_id: str) -> bool:
    """Whether ``snapshot`` holds the result of ``call_id`` in its run's checkpoint."""
    return snapshot.run is not None and any(r.tool_call_id == call_id for r in snapshot.run.results)


def tool_results(request: condukt.ModelRequest) -> list[ToolResultMessage]:
    """The tool results at the end of ``request``'s messages (those of the last turn)."""
    results: list[ToolResultMessage] = []
    for message in reversed(request.messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.append(message)
    return results[::-1]


def of_type(events: Sequence[Any], kind: type) -> list[Any]:
    """The events of class ``kind``, in order."""
    return [event for event in events if type(event) is kind]


def assert_consistent(history: Sequence[Message]) -> None:
    """Every assistant tool call is followed, at once and in order, by its result; no orphan results.

    And no two user messages in a row (providers that want turns to
    alternate refuse them; the others merge them, confusing the model).
    """
    for before, after in zip(history, history[1:], strict=False):
        assert not (isinstance(before, UserMessage) and isinstance(after, UserMessage)), history
    index = 0
    while index < len(history):
        message = history[index]
        index += 1
        if isinstance(message, ToolResultMessage):
            raise AssertionError(f"tool result without its call at {index - 1}: {message!r}")
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            results = history[index : index + len(ids)]
            got = [r.tool_call_id for r in results if isinstance(r, ToolResultMessage)]
            assert got == ids, f"calls {ids} are answered by {got} in {history!r}"
            index += len(ids)
        else:
            assert isinstance(message, (UserMessage, AssistantMessage)), message
