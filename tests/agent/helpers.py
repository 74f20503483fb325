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
from typing import Any

import trio

import condukt
from condukt.messages import AssistantMessage, Message, ToolResultMessage, UserMessage


class Recorder(condukt.Agent):
    """An agent that logs its events to ``options["log"]`` (when given)."""
    extra_options = frozenset({"log"})

    async def init(self, options: Mapping[str, Any]) -> None:
        self.log: list[Any] | None = options.get("log")

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
        self.calls: list[dict[str, Any]] = []
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
