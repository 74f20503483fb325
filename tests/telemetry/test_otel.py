"""OpenTelemetry spans from synthetic telemetry events, via the SDK's in-memory exporter."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (test extra) is not installed")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from condukt import telemetry
from condukt.telemetry import otel

AGENT = {"agent_id": "sess-1", "agent": "ReviewAgent", "model": "anthropic:claude-sonnet-4-5"}
RUN = {"agent_id": "sess-1", "run_id": "run-1", "model": "anthropic:claude-sonnet-4-5"}


def llm(turn: int, **extra: Any) -> dict[str, Any]:
    return {**RUN, "turn": turn, "provider": "anthropic", **extra}


def tool(turn: int, name: str, call_id: str, **extra: Any) -> dict[str, Any]:
    return {**RUN, "turn": turn, "tool": name, "tool_call_id": call_id, **extra}


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def handler(exporter: InMemorySpanExporter) -> Iterator[otel.OpenTelemetryHandler]:
    # A private provider: the global one is never set by these tests.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = otel.OpenTelemetryHandler(provider)
    with telemetry.attached(handler):
        yield handler
    provider.shutdown()


def emit(kind: str, phase: str, metadata: dict[str, Any], **measurements: float) -> None:
    telemetry.emit(("condukt", kind, phase), measurements, metadata)


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """The finished spans by name; the last one wins for a repeated name."""
    return {span.name: span for span in exporter.get_finished_spans()}


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    result: int = span.context.span_id
    return result


def a_run_with_two_turns_and_two_concurrent_tools() -> None:
    emit("agent", "start", AGENT)
    emit("run", "start", RUN)
    emit("llm", "start", llm(1))
    emit("llm", "stop", llm(1, stop_reason="tool_use"), duration=1.5, input_tokens=100, output_tokens=20, cache_write_tokens=900)
    emit("tool", "start", tool(1, "read", "call_a"))
    emit("tool", "start", tool(1, "grep", "call_b"))
    emit("tool", "stop", tool(1, "grep", "call_b", is_error=False), duration=0.25)
    emit("tool", "stop", tool(1, "read", "call_a", is_error=False), duration=0.5)
    emit("llm", "start", llm(2))
    emit("llm", "stop", llm(2, stop_reason="end_turn"), duration=2.0, input_tokens=150, output_tokens=30, cache_read_tokens=900)


def test_a_run_becomes_nested_spans_with_usage(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    a_run_with_two_turns_and_two_concurrent_tools()
    emit("run", "stop", RUN, duration=4.5, input_tokens=250, output_tokens=50, turns=2)
    emit("agent", "stop", {**AGENT, "reason": "normal"})

    spans = exporter.get_finished_spans()
    assert len(spans) == 5
    run = by_name(exporter)["invoke_agent ReviewAgent"]
    assert run.parent is None
    assert run.kind is SpanKind.INTERNAL
    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.id": "sess-1",
        "gen_ai.agent.name": "ReviewAgent",
        "gen_ai.conversation.id": "sess-1",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.usage.input_tokens": 250,
        "gen_ai.usage.output_tokens": 50,
        # The run's stop event gave no cache counts: the sum of its turns'.
        "gen_ai.usage.cache_read.input_tokens": 900,
        "gen_ai.usage.cache_creation.input_tokens": 900,
        "condukt.run.id": "run-1",
        "condukt.run.turns": 2,
    }
    assert run.status.status_code is StatusCode.UNSET

    chats = [span for span in spans if span.name == "chat claude-sonnet-4-5"]
    assert [span.attributes["condukt.turn"] for span in chats] == [1, 2]  # type: ignore[index]
    turns = [(100, 20, "tool_use", {"gen_ai.usage.cache_creation.input_tokens": 900}), (150, 30, "end_turn", {"gen_ai.usage.cache_read.input_tokens": 900})]
    for chat, (tokens_in, tokens_out, reason, cache) in zip(chats, turns, strict=True):
        assert parent_id(chat) == span_id(run)
        assert chat.context is not None and run.context is not None
        assert chat.context.trace_id == run.context.trace_id
        assert chat.kind is SpanKind.CLIENT
        assert dict(chat.attributes or {}) == {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-sonnet-4-5",
            "gen_ai.conversation.id": "sess-1",
            "gen_ai.usage.input_tokens": tokens_in,
            "gen_ai.usage.output_tokens": tokens_out,
            **cache,
            "gen_ai.response.finish_reasons": (reason,),
            "condukt.turn": chat.attributes["condukt.turn"],  # type: ignore[index]
        }

    tools = by_name(exporter)
    for name, call_id in [("read", "call_a"), ("grep", "call_b")]:
        span = tools[f"execute_tool {name}"]
        assert parent_id(span) == span_id(run)
        assert span.kind is SpanKind.INTERNAL
        assert span.status.status_code is StatusCode.UNSET
        assert dict(span.attributes or {}) == {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "condukt.turn": 1,
        }
    assert handler._runs == {}


def test_span_durations_are_the_emitters(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    a_run_with_two_turns_and_two_concurrent_tools()
    emit("run", "stop", RUN, duration=4.5, input_tokens=250, output_tokens=50, turns=2)

    durations: dict[str, list[float]] = {}
    for span in exporter.get_finished_spans():
        assert span.start_time is not None and span.end_time is not None
        durations.setdefault(span.name, []).append((span.end_time - span.start_time) / 1e9)
    assert durations == {
        "chat claude-sonnet-4-5": [1.5, 2.0],
        "execute_tool grep": [0.25],
        "execute_tool read": [0.5],
        "invoke_agent ReviewAgent": [4.5],
    }


def test_run_usage_is_summed_from_turns_when_the_stop_has_none(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    a_run_with_two_turns_and_two_concurrent_tools()
    emit("run", "stop", RUN, duration=4.5)

    run = by_name(exporter)["invoke_agent ReviewAgent"]
    assert run.attributes is not None
    assert run.attributes["gen_ai.usage.input_tokens"] == 250
    assert run.attributes["gen_ai.usage.output_tokens"] == 50


def test_exceptions_set_error_status_and_error_type(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    emit("agent", "start", AGENT)
    emit("run", "start", RUN)
    emit("llm", "start", llm(1))
    emit("llm", "exception", llm(1, error_type="ModelError", error="overloaded"), duration=0.1)
    emit("tool", "start", tool(1, "bash", "call_x"))
    emit("tool", "exception", tool(1, "bash", "call_x", error_type="OSError", error="boom"), duration=0.1)
    emit("tool", "start", tool(1, "read", "call_y"))
    emit("tool", "stop", tool(1, "read", "call_y", is_error=True), duration=0.1)
    emit("run", "exception", {**RUN, "error_type": "ModelError", "error": "overloaded"}, duration=1.0)

    spans = by_name(exporter)
    expected = {
        "chat claude-sonnet-4-5": ("ModelError", "overloaded"),
        "execute_tool bash": ("OSError", "boom"),
        "execute_tool read": ("ToolError", None),
        "invoke_agent ReviewAgent": ("ModelError", "overloaded"),
    }
    assert set(spans) == set(expected)
    for name, (error_type, description) in expected.items():
        span = spans[name]
        assert span.status.status_code is StatusCode.ERROR, name
        assert span.status.description == description, name
        assert span.attributes is not None and span.attributes["error.type"] == error_type, name


def test_an_exception_without_a_type_uses_the_fallback(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    emit("run", "start", RUN)
    emit("run", "exception", RUN)

    [run] = exporter.get_finished_spans()
    assert run.attributes is not None and run.attributes["error.type"] == "_OTHER"
    assert run.status.status_code is StatusCode.ERROR


def test_error_messages_can_be_left_out(exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = otel.OpenTelemetryHandler(provider, record_error_messages=False)
    with telemetry.attached(handler):
        emit("run", "start", RUN)
        emit("run", "exception", {**RUN, "error_type": "RunTimeout", "error": "run timed out"})

    [run] = exporter.get_finished_spans()
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description is None
    assert run.attributes is not None and run.attributes["error.type"] == "RunTimeout"


def test_spans_cut_short_by_a_failed_run_fail_with_it(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    emit("run", "start", RUN)
    emit("llm", "start", llm(1))
    emit("llm", "stop", llm(1, stop_reason="tool_use"), duration=1.0, input_tokens=1, output_tokens=1)
    emit("tool", "start", tool(1, "bash", "call_slow"))
    emit("run", "exception", {**RUN, "error_type": "Aborted", "error": "aborted"})

    spans = by_name(exporter)
    assert spans["chat claude-sonnet-4-5"].status.status_code is StatusCode.UNSET
    cut = spans["execute_tool bash"]
    assert cut.status.status_code is StatusCode.ERROR
    assert cut.attributes is not None and cut.attributes["error.type"] == "Aborted"
    assert handler._runs == {}


def test_an_agent_stop_ends_its_open_runs(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    emit("agent", "start", AGENT)
    emit("run", "start", RUN)
    emit("run", "start", {**RUN, "agent_id": "other", "run_id": "run-2"})
    emit("llm", "start", llm(1))
    emit("agent", "stop", {**AGENT, "reason": "killed"})

    assert sorted(span.name for span in exporter.get_finished_spans()) == [
        "chat claude-sonnet-4-5",
        "invoke_agent ReviewAgent",
    ]
    assert all(span.status.status_code is StatusCode.ERROR for span in exporter.get_finished_spans())
    assert list(handler._runs) == ["run-2"]


def test_missing_and_unmatched_events_are_tolerated(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    # Stops with no start, events with no run id, foreign and malformed events.
    emit("run", "stop", RUN, duration=1.0)
    emit("llm", "stop", llm(1), duration=1.0)
    emit("tool", "exception", tool(1, "read", "call_1"))
    emit("llm", "start", {"turn": 1})
    telemetry.emit(("other", "thing", "start"), {}, {})
    telemetry.emit(("condukt",), {}, {})
    emit("run", "start", {"run_id": "run-9", "model": None})
    emit("run", "stop", {"run_id": "run-9"}, duration="soon")  # type: ignore[arg-type]
    assert [span.name for span in exporter.get_finished_spans()] == ["invoke_agent"]
    exporter.clear()

    # Turns and tool calls of a run whose start was missed: root spans, dropped at its stop.
    emit("llm", "start", llm(1))
    emit("tool", "start", tool(1, "read", "call_1"))
    emit("llm", "stop", llm(1), duration=1.0, input_tokens=3, output_tokens=4)
    emit("tool", "stop", tool(1, "read", "call_1"), duration=1.0)
    emit("run", "stop", RUN, duration=1.0)
    assert sorted(span.name for span in exporter.get_finished_spans()) == [
        "chat claude-sonnet-4-5",
        "execute_tool read",
    ]
    assert all(span.parent is None for span in exporter.get_finished_spans())
    assert handler._runs == {}
    assert telemetry.enabled(), "the handler survived all of it"


def test_bookkeeping_is_bounded(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otel, "MAX_OPEN_RUNS", 3)
    for n in range(5):
        emit("run", "start", {**RUN, "run_id": f"run-{n}"})
    assert list(handler._runs) == ["run-2", "run-3", "run-4"]
    assert len(exporter.get_finished_spans()) == 2


def test_only_listed_metadata_becomes_attributes(
    handler: otel.OpenTelemetryHandler, exporter: InMemorySpanExporter
) -> None:
    secret = "sk-SECRET-VALUE-123"
    leaky = {"prompt": secret, "arguments": {"key": secret}, "result": secret, "system_prompt": secret}
    emit("agent", "start", {**AGENT, **leaky})
    emit("run", "start", {**RUN, **leaky})
    emit("llm", "start", llm(1, **leaky))
    emit("llm", "stop", llm(1, stop_reason="end_turn", **leaky), input_tokens=1, output_tokens=1)
    emit("tool", "start", tool(1, "bash", "call_1", **leaky))
    emit("tool", "stop", tool(1, "bash", "call_1", is_error=True, **leaky))
    emit("run", "stop", {**RUN, **leaky})

    spans = exporter.get_finished_spans()
    assert len(spans) == 3
    for span in spans:
        assert secret not in span.to_json()


def test_instrument_attaches_and_its_detach_ends_open_spans(exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    uninstrument = otel.instrument(provider)
    try:
        assert telemetry.enabled()
        emit("run", "start", RUN)
        emit("llm", "start", llm(1))
    finally:
        uninstrument()
    assert not telemetry.enabled()
    assert sorted(span.name for span in exporter.get_finished_spans()) == [
        "chat claude-sonnet-4-5",
        "invoke_agent",
    ]
    emit("run", "stop", RUN)  # nobody listens any more
    assert len(exporter.get_finished_spans()) == 2


def test_importing_without_opentelemetry_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "condukt.telemetry.otel")
    with pytest.raises(ImportError, match=r"condukt\[otel\]"):
        importlib.import_module("condukt.telemetry.otel")
