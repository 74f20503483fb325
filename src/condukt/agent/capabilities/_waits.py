"""What the tool calls of a run that wait for the outside share: approvals' and deferred tools' persistence.

A call waiting for a person (an approval, an answer) may wait for days and
through restarts. While any call of a run waits: the run's deadline is
paused (waiting for a person does not count against ``timeout``), and the
results of the turn's calls that ended are kept, so the checkpoint saved
with the snapshot holds them and a restarted agent does not run them again.
One :class:`TurnWaits` per run (in ``run.state``), whichever capabilities
make its calls wait: the deadline pause must be counted across them all.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs
import trio

from ...messages import AssistantMessage, ToolResultMessage
from ...sessions import RunCheckpoint
from .._run import Run

__all__ = ["TurnWaits", "Waiter"]

_KEY = "condukt.waits"


class Waiter:
    """One waiting call's wake-up: set when it is answered, or when a result of the turn is to be saved."""

    __slots__ = ("wake",)

    def __init__(self) -> None:
        self.wake = trio.Event()

    async def sleep(self) -> None:
        """Wait for the next wake-up (cancelled with the run)."""
        await self.wake.wait()
        self.wake = trio.Event()


class TurnWaits:
    """Per run: the paused deadline, the ended calls' results, the calls waiting now."""

    __slots__ = ("_deadline", "_paused", "_paused_at", "dirty", "results", "waiters")

    def __init__(self) -> None:
        #: Results of the turn in flight's calls that ended, by call id (for the checkpoint).
        self.results: dict[str, ToolResultMessage] = {}
        #: The calls waiting now.
        self.waiters: list[Waiter] = []
        #: A result arrived since the last save.
        self.dirty = False
        self._paused = 0
        self._paused_at = 0.0
        self._deadline = math.inf

    @staticmethod
    def of(run: Run) -> TurnWaits:
        """``run``'s (made on first use)."""
        waits = run.state.get(_KEY)
        if waits is None:
            waits = run.state[_KEY] = TurnWaits()
        return waits

    def record(self, result: ToolResultMessage) -> None:
        """Keep ``result`` for the checkpoint; a waiting call saves it now (the run may wait long)."""
        self.results[result.tool_call_id] = result
        if self.waiters:
            self.dirty = True
            self.waiters[0].wake.set()

    async def wait(self, run: Run, waiter: Waiter, done: Callable[[], bool]) -> None:
        """Sleep in ``waiter`` until ``done()`` is true, saving the results that end meanwhile.

        The run's deadline is paused meanwhile. Cancelled with the run (an abort).
        """
        self.waiters.append(waiter)
        self._pause(run)
        try:
            while not done():
                await waiter.sleep()
                if self.dirty:
                    self.dirty = False
                    await run.history_changed()
        finally:
            self._resume(run)
            self.waiters.remove(waiter)

    def checkpoint(self, run: Run, checkpoint: RunCheckpoint) -> RunCheckpoint:
        """``checkpoint`` with the results of ``run``'s turn in flight that ended."""
        messages = run.context.messages
        last = messages[-1] if messages else None
        if type(last) is not AssistantMessage or not last.tool_calls:
            return checkpoint
        ids = {call.id for call in last.tool_calls}
        return attrs.evolve(checkpoint, results=tuple(r for i, r in self.results.items() if i in ids))

    def turn_ended(self) -> None:
        """The turn is in the history: its results no longer need keeping."""
        self.results.clear()

    def _pause(self, run: Run) -> None:
        if self._paused == 0:
            self._paused_at = trio.current_time()
            self._deadline = run.scope.deadline
            run.scope.deadline = math.inf
        self._paused += 1

    def _resume(self, run: Run) -> None:
        self._paused -= 1
        if self._paused == 0 and self._deadline != math.inf:
            run.scope.deadline = self._deadline + (trio.current_time() - self._paused_at)
