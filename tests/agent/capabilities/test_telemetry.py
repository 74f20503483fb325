"""Telemetry end to end: the events real agents emit, and the OpenTelemetry spans they become.

The contract is the table in ``condukt.agent.capabilities.telemetry``'s module docstring.
Durations are measured on trio's clock, so with ``autojump_clock`` and
scripted delays they are exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import condukt
from condukt import telemetry
from condukt.messages import Usage
from condukt.testing import ScriptedModel, call, reply

from .helpers import Everything, Sleep, abort_after, capture_telemetry

MODEL = "scripted:demo"


@condukt.tool
async def explode() -> str:
    """A tool with a bug."""
    raise RuntimeError("disk on fire")


@condukt.tool
async def refuse() -> str:
    """A tool that fails the way tools should."""
    raise condukt.ToolError("not allowed")


class Reviewer(condukt.Agent):
    def tools(self) -> list[Any]:
        return [Sleep, explode, refuse]


def two_turns() -> ScriptedModel:
    """Turn 1: 1.5 s, 100/20 tokens, one 0.25 s tool call; turn 2: 2 s, 150/30 tokens."""
    return ScriptedModel(
        [
            [reply(usage=Usage(100, 20), delay=1.5), call("sleep", {"seconds": 0.25})],
            reply("done", usage=Usage(150, 30), delay=2.0),
        ],
        name=MODEL,
    )


@pytest.fixture
def captured() -> Iterator[Everything]:
    with capture_telemetry() as everything:
        yield everything


def names(everything: Everything) -> list[str]:
    return [".".join(e.name[1:]) for e in everything.telemetry_events]


def the(everything: Everything, name: str) -> list[telemetry.TelemetryEvent]:
    return [e for e in everything.telemetry_events if ".".join(e.name[1:]) == name]


# --------------------------------------------------------------------------- events


async def test_one_run_emits_the_contract_events_in_order(
    autojump_clock: trio.testing.MockClock, captured: Everything
) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(Reviewer, model=two_turns())
        session = agent.session_id
        assert await agent.run("review") == "done"
        await agent.stop()
    assert names(captured) == [
        "agent.start",
        "run.start",
        "llm.start", "llm.stop",
        "tool.start", "tool.stop",
        "llm.start", "llm.stop",
        "run.stop",
        "agent.stop",
    ]  # fmt: skip
    events = captured.telemetry_events
    assert all(e.name[0] == "condukt" for e in events)
    agent_meta = {"agent_id": session, "agent": "Reviewer", "model": MODEL}
    run_id = events[1].metadata["run_id"]
    assert isinstance(run_id, str) and run_id
    run_meta = {"agent_id": session, "run_id": run_id, "model": MODEL}
    llm_meta = {**run_meta, "provider": "scripted"}

    def check(
        event: telemetry.TelemetryEvent, metadata: dict[str, Any], measurements: dict[str, Any]
    ) -> None:
        assert {k: event.metadata[k] for k in metadata} == metadata, event
        assert dict(event.measurements) == pytest.approx(measurements), event

    agent_start, run_start, llm1, llm1_stop, tool, tool_stop, llm2, llm2_stop, run_stop, agent_stop = events
    check(agent_start, agent_meta, {})
    check(run_start, run_meta, {})
    check(llm1, {**llm_meta, "turn": 1}, {})
    check(
        llm1_stop,
        {**llm_meta, "turn": 1, "stop_reason": "tool_use"},
        {"duration": 1.5, "input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 0, "cache_write_tokens": 0},
    )
    tool_meta = {**run_meta, "turn": 1, "tool": "sleep", "tool_call_id": "call_1"}
    check(tool, tool_meta, {})
    check(tool_stop, {**tool_meta, "is_error": False}, {"duration": 0.25})
    check(llm2, {**llm_meta, "turn": 2}, {})
    check(
        llm2_stop,
        {**llm_meta, "turn": 2, "stop_reason": "end_turn"},
        {"duration": 2.0, "input_tokens": 150, "output_tokens": 30, "cache_read_tokens": 0, "cache_write_tokens": 0},
    )
    check(run_stop, run_meta, {"duration": 3.75, "input_tokens": 250, "output_tokens": 50, "cache_read_tokens": 0, "cache_write_tokens": 0, "turns": 2})
    check(agent_stop, {**agent_meta, "reason": "normal"}, {})
    for event in events:
        assert all(type(v) in (int, float) for v in event.measurements.values())
    assert all(
        type(e.measurements[k]) is int
        for e in (llm1_stop, run_stop)
        for k in ("input_tokens", "output_tokens")
    )


async def test_every_run_has_its_own_run_id(
    autojump_clock: trio.testing.MockClock, captured: Everything
) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(Reviewer, model=ScriptedModel([reply("1"), reply("2")]))
        await agent.run("one")
        await agent.run("two")
    run_ids = [e.metadata["run_id"] for e in the(captured, "run.start")]
    assert len(set(run_ids)) == 2
    assert [e.metadata["turn"] for e in the(captured, "llm.start")] == [1, 1]  # counted within each run


async def test_agent_start_and_stop_come_in_pairs(autojump_clock: trio.testing.MockClock) -> None:
    """An agent started with no handler attached emits neither; its runs accepted later are seen."""
    events: list[telemetry.TelemetryEvent] = []
    async with condukt.open_node() as node:
        unobserved = await node.spawn(Reviewer, model=ScriptedModel([reply("one")], name=MODEL))
        with telemetry.attached(events.append):
            observed = await node.spawn(Reviewer, model=ScriptedModel([], name=MODEL))
            ids = {unobserved.session_id: "unobserved", observed.session_id: "observed"}
            assert await unobserved.run("review") == "one"
            await unobserved.stop()
            await observed.stop()
    assert [(ids[e.metadata["agent_id"]], ".".join(e.name[1:])) for e in events] == [
        ("observed", "agent.start"),
        ("unobserved", "run.start"), ("unobserved", "llm.start"), ("unobserved", "llm.stop"), ("unobserved", "run.stop"),
        ("observed", "agent.stop"),
    ]  # fmt: skip


async def test_a_model_error_is_an_llm_and_a_run_exception(
    autojump_clock: trio.testing.MockClock, captured: Everything
) -> None:
    model = ScriptedModel([call("sleep", {"seconds": 1}), condukt.ModelError("overloaded")], name=MODEL)
    async with condukt.open_node() as node:
        agent = await node.spawn(Reviewer, model=model)
        with pytest.raises(condukt.ModelError, match="overloaded"):
            await agent.run("review")
    assert names(captured) == [
        "agent.start",
        "run.start", "llm.start", "llm.stop", "tool.start", "tool.stop", "llm.start", "llm.exception", "run.exception",
        "agent.stop",  # when the node closes
    ]  # fmt: skip
    (llm_exception,) = the(captured, "llm.exception")
    assert llm_exception.metadata["turn"] == 2
    assert (llm_exception.metadata["error_type"], llm_exception.metadata["error"]) == (
        "ModelError",
        "overloaded",
    )
    assert set(llm_exception.measurements) == {"duration"}
    (run_exception,) = the(captured, "run.exception")
    assert (run_exception.metadata["error_type"], run_exception.metadata["error"]) == (
        "ModelError",
        "overloaded",
    )
    assert dict(run_exception.measurements) == {
        "duration": 1.0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "turns": 2,
    }


async def test_a_tool_raising_is_a_tool_exception_and_the_run_goes_on(
    autojump_clock: trio.testing.MockClock, captured: Everything
) -> None:
    model = ScriptedModel([[call("explode"), call("refuse")], reply("coped")], name=MODEL)
    async with condukt.open_node() as node:
        agent = await node.spawn(Reviewer, model=model)
        assert await agent.run("try") == "coped"
    (exception,) = the(captured, "tool.exception")
    assert exception.metadata["tool"] == "explode"
    assert (exception.metadata["error_type"], exception.metadata["error"]) == ("RuntimeError", "disk on fire")
    assert set(exception.measurements) == {"duration"}
    (stop,) = the(captured, "tool.stop")  # a ToolError is reported to the model: a stop
    assert (stop.metadata["tool"], stop.metadata["is_error"]) == ("refuse", True)
    assert names(captured)[-2:] == ["run.stop", "agent.stop"]


async def test_an_abort_during_a_model_request_is_an_llm_exception(
    autojump_clock: trio.testing.MockClock, captured: Everything
) -> None:
    model = ScriptedModel([reply("slow", delay=100)], name=MODEL)
    async with condukt.open_node() as node:
        agent = await node.spawn(Reviewer, model=model)
        await abort_after(agent, "wait", 5)
    assert names(captured) == [
        "agent.start",
        "run.start",
        "llm.start",
        "llm.exception",
        "run.exception",
        "agent.stop",
    ]
    (llm_exception,) = the(captured, "llm.exception")
    assert llm_exception.metadata["error_type"] == "Cancelled"
    assert llm_exception.measurements["duration"] == 5.0


async def test_an_abort_during_a_tool_call_closes_its_start(
    autojump_clock: trio.testing.MockClock, captured: Everything
) -> None:
    model = ScriptedModel([call("sleep", {"seconds": 100})], name=MODEL)
    async with condukt.open_node() as node:
        agent = await node.spawn(Reviewer, model=model)
        await abort_after(agent, "wait", 5)
    (run_exception,) = the(captured, "run.exception")
    assert run_exception.metadata["error_type"] == "Aborted"
    assert dict(run_exception.measurements) == {
        "duration": 5.0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "turns": 1,
    }
    # Every start is closed by a stop or an exception (the contract), like
    # the model request an abort cancels (llm.exception, "Cancelled").
    assert names(captured)[1:4] == ["run.start", "llm.start", "llm.stop"]
    assert names(captured)[4:] == ["tool.start", "tool.exception", "run.exception", "agent.stop"]


# --------------------------------------------------------------------------- OpenTelemetry


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def test_one_run_yields_nested_spans_with_usage(
    autojump_clock: trio.testing.MockClock, captured: Everything
) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(Reviewer, model=two_turns())
        session = agent.session_id
        await agent.run("review")
    spans = captured.exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "chat demo",
        "chat demo",
        "execute_tool sleep",
        "invoke_agent Reviewer",
    ]
    (run,) = [s for s in spans if s.name.startswith("invoke_agent")]
    chats = sorted(
        (s for s in spans if s.name.startswith("chat")), key=lambda s: s.attributes["condukt.turn"]
    )
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    # The run span is a root; turns and tool calls are its children, in one trace.
    assert run.parent is None
    for child in (*chats, tool):
        assert child.parent is not None and child.parent.span_id == span_id(run)
        assert child.context.trace_id == run.context.trace_id
        assert run.start_time <= child.start_time and child.end_time <= run.end_time
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "Reviewer"
    assert run.attributes["gen_ai.agent.id"] == session == run.attributes["gen_ai.conversation.id"]
    assert run.attributes["gen_ai.request.model"] == "demo"
    assert run.attributes["gen_ai.provider.name"] == "scripted"
    assert (run.attributes["gen_ai.usage.input_tokens"], run.attributes["gen_ai.usage.output_tokens"]) == (
        250,
        50,
    )
    assert run.attributes["condukt.run.turns"] == 2
    usage = [
        (c.attributes["gen_ai.usage.input_tokens"], c.attributes["gen_ai.usage.output_tokens"]) for c in chats
    ]
    assert usage == [(100, 20), (150, 30)]
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [("tool_use",), ("end_turn",)]
    assert all(c.attributes["gen_ai.operation.name"] == "chat" for c in chats)
    assert tool.attributes["gen_ai.tool.name"] == "sleep"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    # Span lengths are the emitter's (virtual) durations.
    assert [c.end_time - c.start_time for c in chats] == [1_500_000_000, 2_000_000_000]
    assert tool.end_time - tool.start_time == 250_000_000
    assert run.end_time - run.start_time == 3_750_000_000
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)


async def test_failures_become_error_spans(
    autojump_clock: trio.testing.MockClock, captured: Everything
) -> None:
    model = ScriptedModel([[call("explode"), call("refuse")], condukt.ModelError("overloaded")], name=MODEL)
    async with condukt.open_node() as node:
        agent = await node.spawn(Reviewer, model=model)
        with pytest.raises(condukt.ModelError):
            await agent.run("try")
    spans = {s.name: s for s in captured.exporter.get_finished_spans()}
    assert len(captured.exporter.get_finished_spans()) == 5
    run = spans["invoke_agent Reviewer"]
    assert run.status.status_code is StatusCode.ERROR and run.status.description == "overloaded"
    assert run.attributes["error.type"] == "ModelError"
    exploded = spans["execute_tool explode"]
    assert (
        exploded.status.status_code is StatusCode.ERROR
        and exploded.attributes["error.type"] == "RuntimeError"
    )
    refused = spans["execute_tool refuse"]
    assert refused.attributes["error.type"] == "ToolError" and refused.status.description is None
    failed_turns = [s for s in captured.exporter.get_finished_spans() if s.name == "chat demo"]
    assert [s.status.status_code for s in failed_turns] == [StatusCode.UNSET, StatusCode.ERROR]
