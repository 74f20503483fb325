"""How a run ended: :class:`RunResult` (``AgentHandle.last_result()``, ``AgentContext.last_result``)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

__all__ = ["RunResult"]


@attrs.frozen
class RunResult:
    """How a run ended: what ``agent.last_result()`` returns.

    ``status`` is that of its :class:`~condukt.events.Done`; ``value`` the
    result (final text or structured result) when it completed; ``error``
    the exception it failed with (the one its caller got), else None. A run
    whose caller is gone (resumed after a restart, a follow-up) ends here
    too, and in the events its subscribers receive.
    """

    run_id: str
    status: Literal["completed", "failed", "aborted", "timeout"]
    value: Any = None
    error: BaseException | None = None
