"""Agents, tools and capture helpers shared by the feature tests.

``Logged`` is an agent that appends every event it emits (through
``handle_event``) to the list given as its ``log`` start option; ``Echo``
and ``Sleep`` are small tools.
``Everything`` gathers every byte a user could see of a run: model
requests, streamed events, ``handle_event`` events, node-subscriber
events, history, telemetry events, OpenTelemetry spans and log records,
so a test can grep all of it at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import pytest
import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import condukt
from condukt import serialization, telemetry
from condukt.events import Event
from condukt.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from condukt.telemetry import otel

from ..helpers import Recorder

#: An agent that logs its events to ``options["log"]`` (the agent suite's helper).
Logged = Recorder


class Echo(condukt.Tool):
    """``echo``: answers its ``text`` argument, or the ``text`` option when no argument is given."""

    name = "echo"
    description = "Echo a text."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return args.get("text", self.opts.get("text", ""))


class Sleep(condukt.Tool):
    """``sleep``: sleeps ``seconds`` (virtual time under ``autojump_clock``) and answers ``"slept"``."""

    name = "sleep"
    description = "Sleep."
    parameters = {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        await trio.sleep(args["seconds"])
        return "slept"


async def abort_after(agent: condukt.AgentHandle, prompt: str, seconds: float) -> None:
    """Run ``prompt`` and abort it after ``seconds``; the run must raise ``Aborted``."""
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            with pytest.raises(condukt.Aborted):
                await agent.run(prompt)

        nursery.start_soon(run)
        await trio.sleep(seconds)
        assert await agent.abort()


def texts_of(request: condukt.ModelRequest) -> list[str]:
    """Every text the model saw in ``request``: system prompt and all text blocks."""
    found = [request.system_prompt or ""]
    for message in request.messages:
        for block in message.content:
            text = getattr(block, "text", None)
            if isinstance(text, str):
                found.append(text)
    return found


def user_texts(request: condukt.ModelRequest) -> list[str]:
    """The text of each user message of ``request``."""
    return [m.text for m in request.messages if isinstance(m, UserMessage)]


def result_texts(messages: Sequence[Message]) -> list[str]:
    """The text of each tool result in ``messages``."""
    return [m.text for m in messages if isinstance(m, ToolResultMessage)]


def assert_paired(history: Sequence[Message]) -> None:
    """Every assistant tool call is answered at once by its result; no orphan results."""
    index = 0
    while index < len(history):
        message = history[index]
        index += 1
        assert not isinstance(message, ToolResultMessage), f"orphan tool result at {index - 1}: {message!r}"
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            got = [
                r.tool_call_id for r in history[index : index + len(ids)] if isinstance(r, ToolResultMessage)
            ]
            assert got == ids, f"calls {ids} are answered by {got}"
            index += len(ids)


@attrs.define
class Everything:
    """Every captured artefact of some runs; :meth:`dump` renders them all as text."""

    exporter: InMemorySpanExporter
    telemetry_events: list[telemetry.TelemetryEvent] = attrs.Factory(list)
    events: list[Any] = attrs.Factory(list)
    published: list[Any] = attrs.Factory(list)
    histories: list[Sequence[Message]] = attrs.Factory(list)
    requests: list[condukt.ModelRequest] = attrs.Factory(list)

    def dump(self, caplog: pytest.LogCaptureFixture) -> list[str]:
        """Everything as strings: reprs and converter JSON of data, span JSON, log text."""
        out: list[str] = []
        for event in [*self.events, *self.published]:
            out += [repr(event), serialization.dumps(event, Event)]
        for history in self.histories:
            for message in history:
                out += [repr(message), serialization.dumps(message, Message)]
        for request in self.requests:
            out += [repr(request), serialization.dumps(request), serialization.dumps(list(request.messages))]
        out += [repr(event) for event in self.telemetry_events]
        for span in self.exporter.get_finished_spans():
            out += [span.to_json(), repr(dict(span.attributes or {})), repr(span.status.description)]
        out += [caplog.text, *(record.getMessage() for record in caplog.records)]
        return out


@contextmanager
def capture_telemetry() -> Iterator[Everything]:
    """Attach a recording handler and an OpenTelemetry handler (private provider) for a block."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # private: the global provider is never set
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    everything = Everything(exporter)
    handler = otel.OpenTelemetryHandler(provider)
    with telemetry.attached(everything.telemetry_events.append), telemetry.attached(handler):
        yield everything
    handler.close()
    provider.shutdown()


def leaks(texts: Sequence[str], value: str) -> list[str]:
    """The captured texts that contain ``value`` (shortened for a readable failure)."""
    return [text[:300] for text in texts if value in text]
