"""What an agent is doing right now, for dashboards: :class:`AgentInfo` (``AgentHandle.info()``)."""

from __future__ import annotations

import attrs

from ..messages import Usage

__all__ = ["AgentInfo", "DetachedRunInfo", "RunInfo", "ToolCallInfo"]


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


@attrs.frozen
class DetachedRunInfo:
    """Where a detached run stands (``agent.run_info(run_id)``).

    ``status``: ``"queued"``, ``"running"``, ``"done"``, ``"failed"`` or
    ``"aborted"``. ``text``: the final text once done (a structured run's
    result as JSON text). ``error_type``/``message``: why it failed or was
    aborted. ``first_index``/``next_index``: the oldest event index still
    kept, and the index the next event gets.
    """

    run_id: str
    status: str
    text: str | None = None
    error_type: str | None = None
    message: str | None = None
    first_index: int = 0
    next_index: int = 0
