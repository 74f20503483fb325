"""Telemetry as a capability: the agent, run, llm and tool events of :mod:`condukt.telemetry`.

The session adds it to a run's hooks when a telemetry handler is attached
at the moment the run is accepted (``telemetry.enabled()``), so an agent
without listeners pays nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from .. import telemetry
from ..messages import AssistantMessage, ToolCall, ToolResultMessage
from ..otp import ExitReason
from ._capability import Capability
from ._tool_calls import describe

if TYPE_CHECKING:
    from ._run import Run
    from ._session import Session

__all__ = ["Telemetry"]

_LLM = "telemetry.llm"


def _meta(session: Session) -> dict[str, Any]:
    return {"agent_id": session.id, "agent": type(session.agent).__name__, "model": session.model.name}


def _error(session: Session, exc: BaseException) -> dict[str, Any]:
    return {"error_type": type(exc).__name__, "error": session.scrub(describe(exc))}


class Telemetry(Capability):
    """Emits the telemetry contract's events (see :mod:`condukt.telemetry`)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def agent_started(session: Session) -> None:
        """``("condukt", "agent", "start")``."""
        telemetry.emit(("condukt", "agent", "start"), {}, _meta(session))

    @staticmethod
    def agent_stopped(session: Session, reason: ExitReason) -> None:
        """``("condukt", "agent", "stop")`` with the exit reason (its type for an exception)."""
        shown = reason if isinstance(reason, str) else type(reason).__name__
        telemetry.emit(("condukt", "agent", "stop"), {}, {**_meta(session), "reason": shown})

    def _run_meta(self, run: Run) -> dict[str, Any]:
        return {**_meta(self.session), "run_id": run.id}

    def run_started(self, run: Run) -> None:
        """``("condukt", "run", "start")``."""
        telemetry.emit(("condukt", "run", "start"), {}, self._run_meta(run))

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """``("condukt", "run", "stop")`` or ``"exception"``, with duration, tokens and turns."""
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
            telemetry.emit(("condukt", "run", "stop"), measurements, meta)
        else:
            telemetry.emit(("condukt", "run", "exception"), measurements, {**meta, **_error(self.session, failure)})

    def _turn_meta(self, run: Run) -> dict[str, Any]:
        name = self.session.model.name
        provider = name.partition(":")[0] if ":" in name else name
        return {**self._run_meta(run), "turn": run.turn, "provider": provider}

    def model_started(self, run: Run) -> None:
        """``("condukt", "llm", "start")``."""
        meta = self._turn_meta(run)
        run.state[_LLM] = (trio.current_time(), meta)
        telemetry.emit(("condukt", "llm", "start"), {}, meta)

    def model_finished(self, run: Run, message: AssistantMessage | None, error: BaseException | None) -> None:
        """``("condukt", "llm", "stop")`` with tokens and stop reason, or ``"exception"``."""
        started, meta = run.state.pop(_LLM)
        duration = trio.current_time() - started
        if message is None:
            assert error is not None
            failed = {**meta, **_error(self.session, error)}
            telemetry.emit(("condukt", "llm", "exception"), {"duration": duration}, failed)
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
        telemetry.emit(("condukt", "llm", "stop"), measurements, {**meta, "stop_reason": message.stop_reason})

    def _tool_meta(self, run: Run, call: ToolCall) -> dict[str, Any]:
        return {**self._run_meta(run), "turn": run.turn, "tool": call.name, "tool_call_id": call.id}

    def tool_started(self, run: Run, call: ToolCall) -> None:
        """``("condukt", "tool", "start")``."""
        telemetry.emit(("condukt", "tool", "start"), {}, self._tool_meta(run, call))

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
            telemetry.emit(("condukt", "tool", "stop"), {"duration": duration}, {**meta, "is_error": result.is_error})
        else:
            assert error is not None
            failed = {**meta, **_error(self.session, error)}
            telemetry.emit(("condukt", "tool", "exception"), {"duration": duration}, failed)
