"""What an agent is doing right now, for dashboards: :class:`AgentInfo` (``AgentHandle.info()``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from ..messages import Usage

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["AgentInfo", "RunInfo", "ToolCallInfo", "info_of"]


@attrs.frozen
class ToolCallInfo:
    """A tool call of the run's current turn that has not finished (it runs, or waits for an approval)."""

    id: str
    name: str


@attrs.frozen
class RunInfo:
    """The run in progress: its id (what ``abort`` takes), prompt (scrubbed as the history holds it), turn
    (model requests so far, from 1), the tokens its responses used so far, the tool calls in flight, and
    how long it has run (seconds, trio clock)."""

    id: str
    prompt: str
    turn: int
    usage: Usage
    tool_calls: tuple[ToolCallInfo, ...]
    elapsed: float


@attrs.frozen
class AgentInfo:
    """One agent's state at a moment: its session id, lifecycle ``state`` (``"idle"``, ``"running"``,
    ``"finishing"``, ``"maintaining"``), runs ``queued`` behind the current one, and the current ``run``
    (``None`` when none is in progress)."""

    session_id: str
    state: str
    queued: int
    run: RunInfo | None


def info_of(session: Session) -> AgentInfo:
    """The :class:`AgentInfo` of ``session`` now (reads the agent's state; never awaits)."""
    lifecycle = session._lifecycle
    run = lifecycle.current
    run_info = None
    if run is not None:
        in_flight: tuple[ToolCallInfo, ...] = ()
        calls = run.tool_calls
        if calls is not None:
            pairs = zip(calls.calls, calls.results, strict=True)
            in_flight = tuple(ToolCallInfo(call.id, call.name) for call, result in pairs if result is None)
        elapsed = trio.current_time() - run.started_at if run.started_at else 0.0
        run_info = RunInfo(run.id, session.scrub(run.prompt), run.turn, run.usage, in_flight, elapsed)
    return AgentInfo(session.id, lifecycle.state.value, len(lifecycle.queue), run_info)
