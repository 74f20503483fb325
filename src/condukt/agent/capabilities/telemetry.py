"""Telemetry: structured start/stop/exception events through an in-process hook API.

Handlers are process-global, like Erlang's ``:telemetry``::

    from condukt import telemetry

    def handler(event: telemetry.TelemetryEvent) -> None:
        if event.name == ("condukt", "llm", "stop"):
            print(event.metadata["model"], event.measurements["output_tokens"])

    detach = telemetry.attach(handler)      # returns detach
    with telemetry.attached(handler): ...   # or for a block (tests)

A handler is called synchronously, in the emitting task, for every event; it
must be quick and must not block. A handler that raises is logged on the
``condukt.telemetry`` logger and detached; the emitter never sees the error.
:func:`enabled` tells an emitter whether anybody listens at all.

The events condukt emits (the contract; durations are seconds measured by the
emitter, token counts are ints):

========================================  ===============================================  =====================================
name                                      measurements                                     metadata
========================================  ===============================================  =====================================
``("condukt", "agent", "start")``         (none)                                           ``agent_id``, ``agent``, ``model``
``("condukt", "agent", "stop")``          (none)                                           ``agent_id``, ``agent``, ``model``,
                                                                                           ``reason``
``("condukt", "run", "start")``           (none)                                           ``agent_id``, ``run_id``, ``model``
``("condukt", "run", "stop")``            ``duration``, ``input_tokens``,                  ``agent_id``, ``run_id``, ``model``
                                          ``output_tokens``, ``cache_read_tokens``,
                                          ``cache_write_tokens``, ``turns``
``("condukt", "run", "exception")``       ``duration``, ``input_tokens``,                  ``agent_id``, ``run_id``, ``model``,
                                          ``output_tokens``, ``cache_read_tokens``,        ``error_type``, ``error``
                                          ``cache_write_tokens``, ``turns``
``("condukt", "llm", "start")``           (none)                                           ``agent_id``, ``run_id``, ``turn``,
                                                                                           ``model``, ``provider``
``("condukt", "llm", "stop")``            ``duration``, ``input_tokens``,                  as start, plus ``stop_reason``
                                          ``output_tokens``, ``cache_read_tokens``,
                                          ``cache_write_tokens``
``("condukt", "llm", "exception")``       ``duration``                                     as start, plus ``error_type``,
                                                                                           ``error``
``("condukt", "tool", "start")``          (none)                                           ``agent_id``, ``run_id``, ``turn``,
                                                                                           ``tool``, ``tool_call_id``
``("condukt", "tool", "stop")``           ``duration``                                     as start, plus ``is_error``
``("condukt", "tool", "exception")``      ``duration``                                     as start, plus ``error_type``,
                                                                                           ``error``
========================================  ===============================================  =====================================

- ``input_tokens`` excludes the prompt tokens read from the provider's cache
  (``cache_read_tokens``, billed at the cache-read rate) and written to it
  (``cache_write_tokens``), as :class:`condukt.messages.Usage` counts them.
- ``run`` "stop"/"exception" and ``llm`` "stop" also carry ``cost`` (US
  dollars, a float) when the usage's cost is known (a model the
  ``genai-prices`` table or given ``prices`` price); it is absent otherwise.
- ``agent_id`` is the agent's session id; ``agent`` its class name; ``model``
  the ``"provider:model"`` name; ``provider`` the provider prefix; ``run_id`` a
  string unique per run; ``turn`` an int counted from 1 within the run.
- ``tool`` "stop" covers a tool that returned and one that raised
  :class:`condukt.ToolError` (``is_error`` true: the error went back to the
  model and the run goes on); "exception" means it raised anything else.
- Telemetry never carries prompts, system prompts, model output, tool
  arguments, tool results or secret values. An emitter redacts an ``error``
  message (secrets, redactor patterns) before emitting it, as it does for
  everything else the agent reports.
- Handlers must tolerate keys that are missing and keys that are new: the
  contract grows by adding keys, never by renaming them.

:mod:`condukt.telemetry.otel` (extra ``condukt[otel]``) turns these events
into OpenTelemetry spans. See ``docs/telemetry.md``.

This module holds the handler table and the capability that emits the
events (:class:`Telemetry`, built into every agent that starts, and every
run that is accepted, while a handler is attached: an agent without
listeners pays nothing for it); :mod:`condukt.telemetry` is its public path.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import attrs
import trio

from ...messages import AssistantMessage, ToolCall, ToolResultMessage
from ...otp import ExitReason
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._run import Run
from .._tool_calls import describe

__all__ = ["AgentTelemetry", "Handler", "Telemetry", "TelemetryEvent", "attach", "attached", "emit", "enabled"]

logger = logging.getLogger("condukt.telemetry")


@attrs.frozen
class TelemetryEvent:
    """One telemetry event, as handlers receive it.

    ``measurements`` and ``metadata`` are read-only snapshots taken when the
    event was emitted: a handler can keep the event, and neither the emitter
    nor another handler can change it afterwards.
    """

    #: e.g. ``("condukt", "run", "start")``.
    name: tuple[str, ...]
    #: Numbers: durations in seconds, token counts, turn counts.
    measurements: Mapping[str, float | int]
    #: Identifiers and labels (never prompts, tool arguments or results).
    metadata: Mapping[str, Any]


#: A telemetry handler: called synchronously, in the emitting thread and task.
Handler = Callable[[TelemetryEvent], None]


class _Attachment:
    """One :func:`attach` call; the same handler attached twice is two of these."""

    __slots__ = ("handler",)

    def __init__(self, handler: Handler) -> None:
        self.handler = handler


# Copy-on-write: emit reads the tuple without a lock (one atomic load), and
# attach/detach replace it under the lock.
_attachments: tuple[_Attachment, ...] = ()
_lock = threading.Lock()


def attach(handler: Handler) -> Callable[[], None]:
    """Call ``handler(event)`` for every event emitted from now on, in any thread.

    Returns ``detach``, which removes this attachment; calling it again is a
    no-op. Attaching the same handler twice makes it receive every event twice,
    and each ``detach`` removes one attachment. Handlers are process-global,
    like Erlang's ``:telemetry``.

    Raises ``TypeError`` if ``handler`` is not callable.
    """
    if not callable(handler):
        raise TypeError(f"a telemetry handler must be callable, got {handler!r}")
    attachment = _Attachment(handler)
    global _attachments
    with _lock:
        _attachments = (*_attachments, attachment)

    def detach() -> None:
        _remove(attachment)

    return detach


@contextlib.contextmanager
def attached(handler: Handler) -> Iterator[Handler]:
    """Attach ``handler`` for the duration of a ``with`` block; yields it."""
    detach = attach(handler)
    try:
        yield handler
    finally:
        detach()


def enabled() -> bool:
    """Whether any handler is attached.

    Emitters may check this first to skip measuring and building the
    dictionaries of an event nobody receives.
    """
    return bool(_attachments)


def emit(name: tuple[str, ...], measurements: Mapping[str, float | int], metadata: Mapping[str, Any]) -> None:
    """Deliver an event to every attached handler, in attach order.

    With no handler attached this returns at once, without reading its
    arguments. Handlers run synchronously in the caller's thread; ``emit``
    never awaits, so it has no cancellation point.

    A handler that raises an ``Exception`` does not reach the emitter: the
    error is logged on the ``condukt.telemetry`` logger and that attachment is
    detached, so a broken handler fails once, not on every event. (A
    ``BaseException`` such as ``KeyboardInterrupt`` propagates.)

    A handler detached in one thread while another thread is emitting may
    still receive that one event.
    """
    attachments = _attachments
    if not attachments:
        return
    event = TelemetryEvent(
        tuple(name), MappingProxyType(dict(measurements)), MappingProxyType(dict(metadata))
    )
    for attachment in attachments:
        try:
            attachment.handler(event)
        except Exception:
            logger.exception(
                "telemetry handler %r raised on event %s; it has been detached",
                attachment.handler,
                ".".join(event.name),
            )
            _remove(attachment)


def _remove(attachment: _Attachment) -> None:
    global _attachments
    with _lock:
        _attachments = tuple(a for a in _attachments if a is not attachment)


_LLM = "telemetry.llm"


def _meta(ctx: AgentContext) -> dict[str, Any]:
    return {"agent_id": ctx.id, "agent": type(ctx.agent).__name__, "model": ctx.model.name}


def _error(ctx: AgentContext, exc: BaseException) -> dict[str, Any]:
    return {"error_type": type(exc).__name__, "error": ctx.scrub(describe(exc))}


class AgentTelemetry(Capability):
    """``("condukt", "agent", "stop")`` for an agent whose start emitted ``("condukt", "agent", "start")``."""

    async def stop(self, ctx: AgentContext, reason: ExitReason) -> None:
        """Emit the stop event with the exit reason (its type for an exception); never waits."""
        shown = reason if isinstance(reason, str) else type(reason).__name__
        emit(("condukt", "agent", "stop"), {}, {**_meta(ctx), "reason": shown})


class Telemetry(Builtin):
    """Emits the telemetry contract's run, llm and tool events (the table above), for one run."""

    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    @classmethod
    def once_resolved(cls, ctx: AgentContext) -> Capability | None:
        """While a handler is attached as the agent starts: emit its start, and stop with it."""
        if not enabled():
            return None
        emit(("condukt", "agent", "start"), {}, _meta(ctx))
        return AgentTelemetry()

    @classmethod
    def for_run(cls, ctx: AgentContext, run: Run) -> Capability | None:
        """One for a run accepted while a handler is attached."""
        return cls(ctx) if enabled() else None

    def _run_meta(self, run: Run) -> dict[str, Any]:
        return {**_meta(self.ctx), "run_id": run.id}

    def run_started(self, run: Run) -> None:
        """``("condukt", "run", "start")``."""
        emit(("condukt", "run", "start"), {}, self._run_meta(run))

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """``("condukt", "run", "stop")`` or ``"exception"``, with duration, tokens and turns.

        Never waits, so never cancelled.
        """
        measurements = {
            "duration": trio.current_time() - run.started_at,
            "input_tokens": run.usage.input_tokens,
            "output_tokens": run.usage.output_tokens,
            "cache_read_tokens": run.usage.cache_read_tokens,
            "cache_write_tokens": run.usage.cache_write_tokens,
            "turns": run.turn,
        }
        if run.usage.cost is not None:
            measurements["cost"] = run.usage.cost
        meta = self._run_meta(run)
        if failure is None:
            emit(("condukt", "run", "stop"), measurements, meta)
        else:
            emit(("condukt", "run", "exception"), measurements, {**meta, **_error(self.ctx, failure)})

    def _turn_meta(self, run: Run) -> dict[str, Any]:
        name = self.ctx.model.name
        provider = name.partition(":")[0] if ":" in name else name
        return {**self._run_meta(run), "turn": run.turn, "provider": provider}

    def model_started(self, run: Run) -> None:
        """``("condukt", "llm", "start")``."""
        meta = self._turn_meta(run)
        run.state[_LLM] = (trio.current_time(), meta)
        emit(("condukt", "llm", "start"), {}, meta)

    def model_finished(self, run: Run, message: AssistantMessage | None, error: BaseException | None) -> None:
        """``("condukt", "llm", "stop")`` with tokens and stop reason, or ``"exception"``."""
        started, meta = run.state.pop(_LLM)
        duration = trio.current_time() - started
        if message is None:
            assert error is not None
            failed = {**meta, **_error(self.ctx, error)}
            emit(("condukt", "llm", "exception"), {"duration": duration}, failed)
            return
        usage = message.usage
        measurements: dict[str, float] = {
            "duration": duration,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        }
        if usage.cost is not None:
            measurements["cost"] = usage.cost
        emit(("condukt", "llm", "stop"), measurements, {**meta, "stop_reason": message.stop_reason})

    def _tool_meta(self, run: Run, call: ToolCall) -> dict[str, Any]:
        return {**self._run_meta(run), "turn": run.turn, "tool": call.name, "tool_call_id": call.id}

    def tool_started(self, run: Run, call: ToolCall) -> None:
        """``("condukt", "tool", "start")``."""
        emit(("condukt", "tool", "start"), {}, self._tool_meta(run, call))

    def tool_finished(
        self,
        run: Run,
        call: ToolCall,
        result: ToolResultMessage | None,
        error: BaseException | None,
        duration: float,
    ) -> None:
        """``("condukt", "tool", "stop")`` (``is_error`` for a ToolError), or ``"exception"``.

        ``"exception"`` means the tool crashed or was cancelled.
        """
        meta = self._tool_meta(run, call)
        if error is None and result is not None:
            emit(("condukt", "tool", "stop"), {"duration": duration}, {**meta, "is_error": result.is_error})
        else:
            assert error is not None
            failed = {**meta, **_error(self.ctx, error)}
            emit(("condukt", "tool", "exception"), {"duration": duration}, failed)
