"""The agent's lifecycle: one explicit state machine for runs, queues, steers and aborts.

States and the only transitions between them::

    IDLE --start(job)--> RUNNING --loop ended--> FINISHING --Done delivered--> IDLE
    IDLE --start(op)---> MAINTAINING --------------------------------------> IDLE

A job is a run or a maintenance operation (``clear``, ``compact``). While
the agent is not IDLE, new jobs wait in a bounded queue, in arrival order
(OTP callers wait their turn in the mailbox), and follow-ups wait in their
own bounded queue; when a job ends, the next follow-up starts first (it
continues the conversation the last run was having), then the next queued
job. Every transition is a method of :class:`Lifecycle` and happens in the
agent process: the mailbox handler or the job's own task, never both at
once (trio runs one task at a time, and the transitions never await).

A job's task is a worker the agent starts, which runs job after job while
any wait, or, for a run asked of an idle agent by a task that waits for it,
that caller's own task (``Caller.host``): it runs that one job, and what
queued meanwhile gets a worker.

``Done`` is delivered while the run is FINISHING, after the history is
settled and saved; only then does the agent go IDLE and start the next job.
So a caller that saw ``Done`` finds the agent's state complete, and a new
run it submits simply queues behind whatever is still finishing.
"""

from __future__ import annotations

import contextlib
import enum
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio
from trio.lowlevel import Task, current_task

from ..events import Done, Error
from ..otp import NO_REPLY, Caller
from ._context import AgentContext
from ._errors import Aborted, Busy, NotRunning
from ._loop import cancellation, run_turns, settle, settle_waits
from ._requests import RunRequest
from ._run import Run

__all__ = ["EMPTY_QUEUE", "Lifecycle", "State"]


class State(enum.Enum):
    """Where the agent stands."""

    IDLE = "idle"
    RUNNING = "running"
    FINISHING = "finishing"
    MAINTAINING = "maintaining"


#: Placeholder for the worker between ``start_soon`` and its first step.
_STARTING: Any = object()
#: The queues of an agent that never queued anything (see ``Lifecycle.__init__``).
_EMPTY: Any = ()
#: The same, for the kernel: an agent that hibernates drops its empty deques for it.
EMPTY_QUEUE: Any = _EMPTY


class _Operation:
    """A queued maintenance job: ``await fn()`` answers ``caller``."""

    __slots__ = ("caller", "fn")

    def __init__(self, fn: Callable[[], Awaitable[Any]], caller: Caller) -> None:
        self.fn = fn
        self.caller = caller


class Runs(Protocol):
    """What the lifecycle asks of its agent: the run for a follow-up's text (nobody waits for its answer)."""

    def follow_up_run(self, text: str) -> Run: ...


class Lifecycle:
    """The state machine of one agent process (see the module docstring)."""

    __slots__ = (
        "_depth",
        "_exit_reason",
        "_guarding",
        "_next",
        "_worker",
        "ctx",
        "current",
        "follow_ups",
        "queue",
        "runs",
        "state",
    )

    def __init__(self, ctx: AgentContext, runs: Runs) -> None:
        self.ctx = ctx
        #: Makes the runs of follow-ups (the agent's state; a reference, not a bound method per agent).
        self.runs = runs
        self.state = State.IDLE
        #: The run that is RUNNING or FINISHING.
        self.current: Run | None = None
        # Both start as a shared empty tuple and become deques when first
        # used: an empty deque is large (benchmarks/code_choices.py), and most
        # agents never queue.
        self.queue: deque[Run | _Operation] = _EMPTY
        self.follow_ups: deque[str] = _EMPTY
        self._guarding = False
        # The job's task: a worker started when the agent gets busy, which
        # runs job after job while any wait and ends when the agent is idle
        # again, or the task of a caller hosting its run (``_hosted_job``).
        # (Keeping a worker parked between jobs made back-to-back runs on one
        # agent cheaper but spawn + run + stop dearer, by about as much
        # (benchmarks/agent_loop.py), and it keeps a task and its frames alive
        # in every agent that ever ran; hosting saves more, and keeps nothing.)
        self._worker: Task | None = None
        # Nurseries the worker had open before its job (a caller hosting its run may have some).
        self._depth = 0
        self._next: Run | _Operation | None = None
        #: Set by :meth:`exit`: the reason to stop with once the job in progress has ended.
        self._exit_reason: tuple[Any] | None = None

    # ------------------------------------------------------------------ requests

    def submit(self, run: Run) -> None:
        """Start ``run`` now if idle, else queue it; :class:`Busy` when the queue is full."""
        if self.state is State.IDLE:
            self._start(run)
            return
        self._enqueue(run)
        if run.sink is not None:
            self._guard_queued_streams()

    def submit_operation(self, fn: Callable[[], Awaitable[Any]], caller: Caller) -> Any:
        """Run a maintenance job after the jobs before it; its result answers ``caller``."""
        operation = _Operation(fn, caller)
        if self.state is State.IDLE:
            self._start(operation)
        else:
            self._enqueue(operation)
        return NO_REPLY

    def steer(self, text: str) -> None:
        """Add ``text`` to the running run; too late for it (finishing): a follow-up."""
        run = self.current
        if self.state is State.RUNNING and run is not None:
            run.steers = [*run.steers, text]
        elif self.state is State.FINISHING:
            self._follow_ups().append(text)
        else:
            raise NotRunning(f"{self.ctx.handle!r} has no run to steer")

    def follow_up(self, text: str) -> None:
        """Run ``text`` after the current job (now if idle); :class:`Busy` when that queue is full."""
        if self.state is State.IDLE:
            self._start(self.runs.follow_up_run(text))
            return
        limit = self.ctx.config.max_follow_ups
        if len(self.follow_ups) >= limit:
            raise Busy(f"{len(self.follow_ups)} follow-ups are already queued (max_follow_ups={limit})")
        self._follow_ups().append(text)

    def abort(self, request: RunRequest | None, run_id: str | None, from_run: bool, caller: Caller) -> Any:
        """Stop a run; the reply (True if it was stopped) comes once it has stopped.

        With neither ``request`` nor ``run_id``: the current run, and the
        follow-ups waiting behind it are dropped. A queued run is removed
        before it starts. A run that is FINISHING can no longer be aborted.
        """
        targeted = request is not None or run_id is not None
        if not targeted:
            self.follow_ups = _EMPTY
        run = self.current
        if run is not None and (not targeted or run.request is request or run.id == run_id):
            if self.state is not State.RUNNING:
                return False  # its result is being delivered: too late
            if from_run:
                # The caller is part of the run: it cannot wait for the run's
                # end. It gets its answer first, and the cancellation at its
                # next checkpoint (replying after cancelling would cancel the
                # call itself instead).
                caller.reply(True)
                run.abort()
                return NO_REPLY
            run.abort()
            run.abort_waiters = [*run.abort_waiters, caller]
            return NO_REPLY
        if targeted:
            for job in self.queue:
                if type(job) is Run and (job.request is request or job.id == run_id):
                    self._drop_queued(job)
                    return True
        return False

    def cancel(self, request: RunRequest) -> None:
        """The caller of ``request`` went away: stop it if it runs, forget it if queued."""
        run = self.current
        if run is not None and run.request is request:
            run.abort()
            return
        for job in self.queue:
            if type(job) is Run and job.request is request:
                self._drop_queued(job)
                return

    def close(self) -> None:
        """The process is exiting: queued streams end (their callers get the exit reason)."""
        for job in self.queue:
            if type(job) is Run and job.sink is not None:
                job.sink.close()
        self.queue = _EMPTY

    # ------------------------------------------------------------------ transitions

    def _enqueue(self, job: Run | _Operation) -> None:
        limit = self.ctx.config.max_queued_runs
        if len(self.queue) >= limit:
            raise Busy(f"{self.ctx.handle!r} already has {len(self.queue)} queued runs (max_queued_runs={limit})")
        if self.queue is _EMPTY:
            self.queue = deque()
        self.queue.append(job)

    def _start(self, job: Run | _Operation) -> None:
        if type(job) is Run:
            self.state = State.RUNNING
            self.current = job
        else:
            self.state = State.MAINTAINING
        self._next = job
        if self._worker is None:  # else the worker is between jobs and takes this one next
            self._worker = _STARTING
            caller = job.caller if type(job) is Run else None
            if caller is not None and caller.can_host and not settle_waits(job):  # type: ignore[arg-type]
                # A run asked of an idle agent by a task that waits for it: that
                # task runs it (no worker task to start, no switch to it and back).
                # Not a run whose end awaits listeners or hooks (events to
                # deliver, a store to save to): its caller could be held there
                # by a listener its own cancellation stopped, and such a run
                # costs more hosted than in a worker (``benchmarks/agent_instructions.py
                # N on_event`` counts it).
                caller.host(self._hosted_job, self._cancel_hosted)
            else:
                self.ctx.agent.start_soon(self._work)

    def _to_finishing(self, run: Run, failure: BaseException | None) -> None:
        self.state = State.FINISHING
        if run.steers:
            # Steers that arrived too late for the run are not lost: they run
            # next, unless the run was aborted (an abort drops what waits).
            if not isinstance(failure, Aborted):
                self._follow_ups().extendleft(reversed(run.steers))
            run.steers = ()

    def _follow_ups(self) -> deque[str]:
        if self.follow_ups is _EMPTY:
            self.follow_ups = deque()
        return self.follow_ups

    def exit(self, reason: Any) -> None:
        """Stop the agent with ``reason`` once the job in progress has ended (at once when idle).

        The job's ``Done`` is delivered and its caller answered first;
        the jobs queued behind it are not started (the process's exit ends them).
        """
        if self.state is State.IDLE and self._worker is None:
            self.ctx.agent.stop(reason)
            return
        self._exit_reason = (reason,)

    def _to_idle(self) -> None:
        self.state = State.IDLE
        self.current = None
        if self._exit_reason is not None:
            self.ctx.agent.stop(self._exit_reason[0])
            return
        if self.follow_ups:
            self._start(self.runs.follow_up_run(self.follow_ups.popleft()))
        elif self.queue:
            self._start(self.queue.popleft())

    def _drop_queued(self, run: Run) -> None:
        self.queue.remove(run)
        failure = Aborted("run aborted before it started")
        if run.caller is not None:
            run.caller.reply_error(failure)
        if run.sink is not None:
            # A fresh channel with room: the reader sees the run end at once. A reader
            # that left its stream block (which is what aborts a queued stream) has
            # closed its end already: nobody is told, and nothing breaks.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                run.sink.send_nowait(Error("Aborted", str(failure)))
                run.sink.send_nowait(Done("aborted"))
            run.sink.close()

    def _guard_queued_streams(self) -> None:
        """Make sure queued streams end if the process exits (a kill included)."""
        if not self._guarding:
            self._guarding = True
            self.ctx.agent.start_soon(self._close_on_exit)

    async def _close_on_exit(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            self.close()

    # ------------------------------------------------------------------ jobs

    async def _work(self) -> None:
        """The worker task: runs the jobs handed to it by :meth:`_start` until none is left.

        A run's steps are inline rather than in a coroutine of their own: a
        coroutine less per run (and one object less per run in flight).
        """
        self._worker = current_task()
        self._depth = 0
        while True:
            job = self._next
            if job is None:
                self._worker = None
                return
            self._next = None
            if type(job) is not Run:
                await self._operation_job(job)
                continue
            run: Run = job
            try:
                value, failure = await run_turns(run)
                self._to_finishing(run, failure)
                await settle(run, value, failure)
            finally:
                if run.sink is not None:
                    run.sink.close()
            self._answer(run, value, failure)
            # Nothing of a finished run stays alive in the worker's frame while the next job runs.
            job = run = value = failure = None  # type: ignore[assignment]
            self._to_idle()

    async def _hosted_job(self) -> None:
        """The run of a caller that waits for it, in the caller's task (``Caller.host``); that job only.

        The jobs queued behind it get a worker task of their own. The
        caller's cancellation reaches the run as ``trio.Cancelled`` from the
        caller's scopes: the loop takes that as an abort (the history rolls
        back) and it propagates at once; a worker task settles the run
        (``Done("aborted")``), as when a worker's caller leaves, so that
        the caller never waits on a callback its own cancellation may have
        stopped (the reader of an ``on_event`` channel). A cancellation
        because the process exits ends it as it would end a worker: at once.
        """
        worker = self._worker = current_task()
        self._depth = len(worker.child_nurseries)
        run: Run = self._next  # type: ignore[assignment]  # hosting is only offered for runs
        self._next = None
        run.hosted = True
        try:
            value, failure = await run_turns(run)
        except BaseException as exc:
            if run.aborted and not run.ending and cancellation(exc):  # the caller left (the history is rolled back)
                self._worker = _STARTING
                self.ctx.agent.start_soon(self._settle_left, run, None, Aborted("run aborted"))
            raise
        if run.ending:
            return
        if settle_waits(run):
            # Its settle awaits (callbacks, hooks, a store): a worker task does it,
            # and the caller waits for the reply, which it may leave, as from a
            # worker's run. (Shielded in the caller's task, a callback whose
            # reader went with the caller's cancellation would hold it forever.)
            self._worker = _STARTING
            self.ctx.agent.start_soon(self._settle_left, run, value, failure)
        else:
            self._to_finishing(run, failure)
            await settle(run, value, failure)  # nothing in it waits: nothing can cancel it
            self._answer(run, value, failure)
            self._worker = None
            self._to_idle()

    async def _settle_left(self, run: Run, value: Any, failure: BaseException | None) -> None:
        """A worker task: settle a hosted run whose loop ended, then take the jobs queued behind it."""
        self._worker = current_task()
        self._depth = 0
        self._to_finishing(run, failure)
        await settle(run, value, failure)
        self._answer(run, value, failure)
        run = None  # type: ignore[assignment]  # not kept alive while the next jobs run
        self._to_idle()
        await self._work()

    def _cancel_hosted(self) -> None:
        """The process exits during a hosted run (``Caller.host``): end it now, without settling it."""
        run = self.current
        if run is None:
            return
        run.end()

    @staticmethod
    def _answer(run: Run, value: Any, failure: BaseException | None) -> None:
        """The run has settled (``Done`` delivered): answer its caller and its abort waiters."""
        caller = run.caller
        if caller is not None:
            if failure is None:
                caller.reply(value)
            else:
                caller.reply_error(failure)
        for waiter in run.abort_waiters:
            waiter.reply(True)

    @property
    def working(self) -> bool:
        """Whether a job is in progress in a task (a worker, or a caller hosting its run)."""
        worker = self._worker
        return worker is not None and worker is not _STARTING

    def runs_in(self, task: Task) -> bool:
        """Whether ``task`` is this agent's worker or one of its descendants (a tool, a callback's task).

        Such a task is part of the job in progress: waiting on the agent from
        there would wait on itself.
        """
        worker = self._worker
        if worker is None or worker is _STARTING:
            return False  # no job in progress: nothing to wait on
        current: Task | None = task
        while current is not None:
            if current is worker:
                return True
            nursery = current.parent_nursery
            if nursery is None:
                return False
            current = nursery.parent_task
            if current is worker and self._depth:
                # A caller hosting its run: only the nurseries the run opened
                # hold its tasks (not the ones the caller had open around it).
                return nursery in worker.child_nurseries[self._depth :]
        return False

    async def _operation_job(self, operation: _Operation) -> None:
        try:
            result = await operation.fn()
        except Exception as exc:  # the operation's own failure (a broken compactor): the caller's answer
            operation.caller.reply_error(exc)
        else:
            operation.caller.reply(result)
        self._to_idle()
