"""OpenTelemetry spans from condukt telemetry events (extra ``condukt[otel]``).

::

    from condukt.telemetry import otel

    uninstrument = otel.instrument()              # the global tracer provider
    uninstrument = otel.instrument(my_provider)   # or a given one
    ...
    uninstrument()

Each run becomes an ``invoke_agent {agent}`` span whose children are one
``chat {model}`` span per model turn and one ``execute_tool {tool}`` span per
tool call, with the attribute names of the OpenTelemetry GenAI semantic
conventions (``gen_ai.*``, ``error.type``). Parents are set explicitly from
the run, turn and tool-call ids in the events, never from the current
OpenTelemetry context: an agent's tasks do not inherit the caller's context
variables in a way that would nest spans correctly. A run span is therefore a
root span.

Only the identifiers, names, counts and error types listed in
``docs/telemetry.md`` become attributes; nothing else in an event's metadata
is read. Prompts, model output, tool arguments and tool results are not in
the events to begin with.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as error:  # tested with the package hidden
    raise ImportError(
        "condukt.telemetry.otel needs the OpenTelemetry API, which is not installed; "
        "install condukt with the 'otel' extra: pip install 'condukt[otel]'"
    ) from error

from ..agent.capabilities.telemetry import TelemetryEvent, attach

__all__ = ["OpenTelemetryHandler", "instrument"]

# Attribute names: OpenTelemetry GenAI semantic conventions (development
# status), open-telemetry/semantic-conventions-genai docs/gen-ai/gen-ai-spans.md
# and gen-ai-agent-spans.md; error.type from the general recording-errors page.
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
ERROR_TYPE = "error.type"
# condukt's own, for correlating spans with events and logs.
RUN_ID = "condukt.run.id"
RUN_TURNS = "condukt.run.turns"
TURN = "condukt.turn"
#: US dollars, when the usage's cost is known (no GenAI convention names one yet).
USAGE_COST = "condukt.usage.cost"

#: ``error.type`` of a tool that raised :class:`condukt.ToolError` (reported to
#: the model; the run went on).
TOOL_ERROR_TYPE = "ToolError"
#: ``error.type`` when an exception event names none (the conventions' fallback).
OTHER_ERROR_TYPE = "_OTHER"

# Bounds on bookkeeping for runs and agents whose stop event never comes (a
# handler attached mid-run, an emitter that crashed): the oldest entry is
# dropped, its open spans ended, once a table is full.
MAX_OPEN_RUNS = 10_000
MAX_KNOWN_AGENTS = 10_000


_EventHandler = Callable[["OpenTelemetryHandler", Mapping[str, Any], Mapping[str, Any]], None]


#: An open span and its start time (ns since the epoch).
_Open = tuple[Span, int]


@attrs.define(eq=False)
class _Run:
    """One run's span and its open children.

    Children are keyed ``("llm", turn)`` and ``("tool", tool_call_id)``, so
    with the run's own key this is the (run_id, turn) and (run_id,
    tool_call_id) bookkeeping, dropped in one piece with the run.
    """

    span: Span | None  # None: the run started before this handler was attached
    context: Context  # the parent context of its children
    start_ns: int
    agent_id: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    children: dict[tuple[str, Any], _Open] = attrs.Factory(dict)


class OpenTelemetryHandler:
    """A telemetry handler that records runs, model turns and tool calls as spans.

    Attach it with :func:`condukt.telemetry.attach` (or use :func:`instrument`).
    ``tracer_provider`` defaults to the global one. With
    ``record_error_messages=False`` an exception's message is left out of the
    span status description (its ``error.type`` is always recorded).

    Events may arrive from several threads; the handler serialises them. It
    tolerates missing, repeated and unmatched events: a stop with no start is
    ignored, a turn or tool call whose run span it never saw becomes a root
    span. Everything kept for a run is dropped when the run stops, fails, or
    its agent stops.
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, record_error_messages: bool = True
    ) -> None:
        from .. import __version__

        self._tracer = trace.get_tracer("condukt", __version__, tracer_provider=tracer_provider)
        self._record_error_messages = record_error_messages
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._agents: dict[str, str] = {}  # agent_id -> agent class name

    def __call__(self, event: TelemetryEvent) -> None:
        name = event.name
        if len(name) != 3 or name[0] != "condukt":
            return
        handler = self._dispatch.get((name[1], name[2]))
        if handler is not None:
            with self._lock:
                handler(self, event.measurements, event.metadata)

    def close(self) -> None:
        """End every span still open and forget all state (e.g. when detached)."""
        with self._lock:
            runs = list(self._runs.values())
            self._runs.clear()
            self._agents.clear()
            for run in runs:
                self._end_run(run)

    # -- agents

    def _agent_start(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        agent_id, agent = _str(metadata.get("agent_id")), _str(metadata.get("agent"))
        if agent_id is None or agent is None:
            return
        self._agents.pop(agent_id, None)
        self._agents[agent_id] = agent
        while len(self._agents) > MAX_KNOWN_AGENTS:
            del self._agents[next(iter(self._agents))]

    def _agent_stop(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        agent_id = _str(metadata.get("agent_id"))
        if agent_id is None:
            return
        self._agents.pop(agent_id, None)
        # A run still open when its agent stops did not finish.
        for run_id in [r for r, run in self._runs.items() if run.agent_id == agent_id]:
            self._end_run(self._runs.pop(run_id), error_type=OTHER_ERROR_TYPE)

    # -- runs

    def _run_start(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        run_id = _str(metadata.get("run_id"))
        if run_id is None:
            return
        agent_id = _str(metadata.get("agent_id"))
        agent = _str(metadata.get("agent")) or (self._agents.get(agent_id) if agent_id else None)
        provider, model = _model_parts(metadata.get("model"), None)
        attributes = _attributes(
            {
                OPERATION_NAME: "invoke_agent",
                PROVIDER_NAME: provider,
                AGENT_ID: agent_id,
                AGENT_NAME: agent,
                CONVERSATION_ID: agent_id,
                REQUEST_MODEL: model,
                RUN_ID: run_id,
            }
        )
        start_ns = time.time_ns()
        span = self._tracer.start_span(
            f"invoke_agent {agent}" if agent else "invoke_agent",
            context=Context(),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start_ns,
        )
        previous = self._runs.pop(run_id, None)
        if previous is not None:
            self._end_run(previous)
        self._runs[run_id] = _Run(span, trace.set_span_in_context(span, Context()), start_ns, agent_id)
        self._bound_runs()

    def _run_stop(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        self._run_end(measurements, metadata, failed=False)

    def _run_exception(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        self._run_end(measurements, metadata, failed=True)

    def _run_end(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any], *, failed: bool) -> None:
        run_id = _str(metadata.get("run_id"))
        run = self._runs.pop(run_id, None) if run_id is not None else None
        if run is None:
            return
        if run.span is not None:
            # The emitter's totals when it gives them, else the sum of the turns seen.
            input_tokens = _int(measurements.get("input_tokens"))
            output_tokens = _int(measurements.get("output_tokens"))
            cache_read = _int(measurements.get("cache_read_tokens"))
            cache_write = _int(measurements.get("cache_write_tokens"))
            run.span.set_attributes(
                _attributes(
                    {
                        USAGE_INPUT_TOKENS: run.input_tokens if input_tokens is None else input_tokens,
                        USAGE_OUTPUT_TOKENS: run.output_tokens if output_tokens is None else output_tokens,
                        USAGE_CACHE_READ_TOKENS: run.cache_read_tokens if cache_read is None else cache_read,
                        USAGE_CACHE_WRITE_TOKENS: run.cache_write_tokens if cache_write is None else cache_write,
                        RUN_TURNS: _int(measurements.get("turns")),
                        USAGE_COST: _float(measurements.get("cost")),
                    }
                )
            )
        if failed:
            self._end_run(
                run,
                error_type=_error_type(metadata),
                message=self._message(metadata),
                measurements=measurements,
            )
        else:
            self._end_run(run, measurements=measurements)

    # -- model turns

    def _llm_start(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        provider, model = _model_parts(metadata.get("model"), metadata.get("provider"))
        self._start_child(
            metadata,
            ("llm", metadata.get("turn")),
            f"chat {model}" if model else "chat",
            SpanKind.CLIENT,
            {
                OPERATION_NAME: "chat",
                PROVIDER_NAME: provider,
                REQUEST_MODEL: model,
                CONVERSATION_ID: _str(metadata.get("agent_id")),
                TURN: _int(metadata.get("turn")),
            },
        )

    def _llm_stop(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        run, entry = self._take_child(metadata, ("llm", metadata.get("turn")))
        input_tokens = _int(measurements.get("input_tokens"))
        output_tokens = _int(measurements.get("output_tokens"))
        cache_read = _int(measurements.get("cache_read_tokens"))
        cache_write = _int(measurements.get("cache_write_tokens"))
        if run is not None:
            # Counted even for a turn whose start was missed: the run's sum.
            run.input_tokens += input_tokens or 0
            run.output_tokens += output_tokens or 0
            run.cache_read_tokens += cache_read or 0
            run.cache_write_tokens += cache_write or 0
        if entry is None:
            return
        stop_reason = _str(metadata.get("stop_reason"))
        entry[0].set_attributes(
            _attributes(
                {
                    USAGE_INPUT_TOKENS: input_tokens,
                    USAGE_OUTPUT_TOKENS: output_tokens,
                    USAGE_CACHE_READ_TOKENS: cache_read,
                    USAGE_CACHE_WRITE_TOKENS: cache_write,
                    RESPONSE_FINISH_REASONS: None if stop_reason is None else (stop_reason,),
                    USAGE_COST: _float(measurements.get("cost")),
                }
            )
        )
        _end(entry, measurements)

    def _llm_exception(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        self._fail_child(measurements, metadata, ("llm", metadata.get("turn")))

    # -- tool calls

    def _tool_start(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        tool = _str(metadata.get("tool"))
        self._start_child(
            metadata,
            ("tool", metadata.get("tool_call_id")),
            f"execute_tool {tool}" if tool else "execute_tool",
            SpanKind.INTERNAL,
            {
                OPERATION_NAME: "execute_tool",
                TOOL_NAME: tool,
                TOOL_CALL_ID: _str(metadata.get("tool_call_id")),
                TURN: _int(metadata.get("turn")),
            },
        )

    def _tool_stop(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        _, entry = self._take_child(metadata, ("tool", metadata.get("tool_call_id")))
        if entry is None:
            return
        if metadata.get("is_error") is True:
            # The tool failed (ToolError): the model was told and the run went
            # on. No description: the error text is tool output.
            _set_error(entry[0], TOOL_ERROR_TYPE, None)
        _end(entry, measurements)

    def _tool_exception(self, measurements: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        self._fail_child(measurements, metadata, ("tool", metadata.get("tool_call_id")))

    _dispatch: ClassVar[Mapping[tuple[str, str], _EventHandler]] = {
        ("agent", "start"): _agent_start,
        ("agent", "stop"): _agent_stop,
        ("run", "start"): _run_start,
        ("run", "stop"): _run_stop,
        ("run", "exception"): _run_exception,
        ("llm", "start"): _llm_start,
        ("llm", "stop"): _llm_stop,
        ("llm", "exception"): _llm_exception,
        ("tool", "start"): _tool_start,
        ("tool", "stop"): _tool_stop,
        ("tool", "exception"): _tool_exception,
    }

    # -- bookkeeping

    def _start_child(
        self,
        metadata: Mapping[str, Any],
        key: tuple[str, Any],
        name: str,
        kind: SpanKind,
        attributes: Mapping[str, Any],
    ) -> None:
        """Open a turn or tool-call span under the event's run (a span-less run if its start was missed)."""
        run_id = _str(metadata.get("run_id"))
        if run_id is None:
            return
        run = self._runs.get(run_id)
        if run is None:
            run = _Run(None, Context(), time.time_ns(), _str(metadata.get("agent_id")))
            self._runs[run_id] = run
            self._bound_runs()
        start_ns = time.time_ns()
        span = self._tracer.start_span(
            name, context=run.context, kind=kind, attributes=_attributes(attributes), start_time=start_ns
        )
        key = (key[0], _key(key[1]))
        _end(run.children.pop(key, None), None)  # a repeated start
        run.children[key] = (span, start_ns)

    def _take_child(
        self, metadata: Mapping[str, Any], key: tuple[str, Any]
    ) -> tuple[_Run | None, _Open | None]:
        """The event's run and, removed from it, its open span ``key`` (either may be missing)."""
        run_id = _str(metadata.get("run_id"))
        run = self._runs.get(run_id) if run_id is not None else None
        if run is None:
            return None, None
        return run, run.children.pop((key[0], _key(key[1])), None)

    def _fail_child(
        self, measurements: Mapping[str, Any], metadata: Mapping[str, Any], key: tuple[str, Any]
    ) -> None:
        _, entry = self._take_child(metadata, key)
        if entry is not None:
            _set_error(entry[0], _error_type(metadata), self._message(metadata))
            _end(entry, measurements)

    def _bound_runs(self) -> None:
        while len(self._runs) > MAX_OPEN_RUNS:
            self._end_run(self._runs.pop(next(iter(self._runs))))

    def _end_run(
        self,
        run: _Run,
        *,
        error_type: str | None = None,
        message: str | None = None,
        measurements: Mapping[str, Any] | None = None,
    ) -> None:
        """End ``run``'s open children, then its span; all failed with ``error_type`` if given.

        Children still open when their run ends were cut short by its end
        (an abort, a timeout, a crash), so they share its failure.
        """
        for entry in run.children.values():
            if error_type is not None:
                _set_error(entry[0], error_type, None)
            _end(entry, None)
        run.children.clear()
        if run.span is not None:
            if error_type is not None:
                _set_error(run.span, error_type, message)
            _end((run.span, run.start_ns), measurements)

    def _message(self, metadata: Mapping[str, Any]) -> str | None:
        return _str(metadata.get("error")) if self._record_error_messages else None


def instrument(tracer_provider: TracerProvider | None = None) -> Callable[[], None]:
    """Attach an :class:`OpenTelemetryHandler`; returns a function that detaches it.

    Detaching also ends any span still open (a run in flight), so nothing
    recorded so far is lost.
    """
    handler = OpenTelemetryHandler(tracer_provider)
    detach = attach(handler)

    def uninstrument() -> None:
        detach()
        handler.close()

    return uninstrument


def _end(entry: _Open | None, measurements: Mapping[str, Any] | None) -> None:
    """End a span; at start + the emitter's ``duration`` when there is one.

    The emitter's clock is the authority on durations (it may be trio's
    virtual clock in tests), so span lengths agree with the measurements.
    """
    if entry is None:
        return
    span, start_ns = entry
    duration = measurements.get("duration") if measurements is not None else None
    if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0:
        span.end(end_time=start_ns + int(duration * 1e9))
    else:
        span.end()


def _set_error(span: Span, error_type: str, message: str | None) -> None:
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, message))


def _error_type(metadata: Mapping[str, Any]) -> str:
    return _str(metadata.get("error_type")) or OTHER_ERROR_TYPE


def _model_parts(model: Any, provider: Any) -> tuple[str | None, str | None]:
    """``(provider, model name)`` from a ``"provider:model"`` name and an optional provider."""
    name, provider_name = _str(model), _str(provider)
    if name is None:
        return provider_name, None
    prefix, sep, rest = name.partition(":")
    if sep and prefix and rest and provider_name in (None, prefix):
        return prefix, rest
    return provider_name, name


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _float(value: Any) -> float | None:
    """A finite number as a float; ``None`` for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _key(value: Any) -> Any:
    """A dict key for a turn or tool call id from metadata (unhashable values as text)."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
