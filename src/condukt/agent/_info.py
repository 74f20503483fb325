"""What an agent is doing right now, for dashboards: :class:`AgentInfo` (``AgentHandle.info()``)."""

from __future__ import annotations

import attrs

from ..messages import Usage

__all__ = ["AgentInfo", "RunInfo", "ToolCallInfo"]


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
    ``"finishing"``, ``"maintaining"``, ``"hibernated"``), runs ``queued`` behind the current one, and
    the current ``run`` (``None`` when none is in progress)."""

    session_id: str
    state: str
    queued: int
    run: RunInfo | None
