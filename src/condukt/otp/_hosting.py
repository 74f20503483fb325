"""Work a process hands to the task of the caller waiting for it (see ``Caller.host``).

A call whose answer needs awaited work (an agent's run) is usually answered
by a task the process starts for it, while the caller sleeps until the
reply. When the caller is a task that only waits, it can do that work
itself: no task to spawn, and no two task switches (caller to worker,
worker back to caller). Measured with callgrind on a run of a running agent
(2 model turns, 1 tool, an in-process model): 310k instructions through a
worker task, 272k hosted by the caller (docs/benchmarks.md, seventh pass).

The work runs in a copy of the process's context variables, as a task the
process started would. The process stops it through the ``cancel``
function its owner gave, not a cancel scope of its own: the work has its
own scopes, and one more around it measured 41k instructions per agent
run (trio 0.35), more than what hosting saves.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from contextvars import Context
from typing import Any

from trio.lowlevel import Task

__all__ = ["Hosted", "in_context"]


class Hosted:
    """Work a process's caller hosts: how to stop it, whether it was told to, and who waits for its end."""

    __slots__ = ("cancel", "cancelled", "waiter")

    def __init__(self, cancel: Callable[[], None]) -> None:
        self.cancel = cancel
        self.cancelled = False
        self.waiter: Task | None = None


class in_context:  # noqa: N801  # used like a function: ``await in_context(ctx, coro)``
    """Await ``coro`` with each of its steps run in ``context`` (the way trio runs a task's steps).

    Hand-written because nothing public does this: trio gives a context to
    a task only when it spawns one, and spawning is what hosting saves.
    Costs one generator resume and one ``Context.run`` per step of ``coro``.
    Afterwards :attr:`yielded` tells whether ``coro`` ever gave trio's
    scheduler a turn (every step it yields is a trap that does).
    """

    __slots__ = ("_context", "_coro", "yielded")

    def __init__(self, context: Context, coro: Coroutine[Any, Any, Any]) -> None:
        self._context = context
        self._coro = coro
        self.yielded = False

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, run = self._coro, self._context.run
        step: Any = coro.send
        value: Any = None
        try:
            while True:
                try:
                    yielded = run(step, value)
                except StopIteration as stop:
                    return stop.value
                self.yielded = True
                try:
                    value = yield yielded
                    step = coro.send
                except BaseException as exc:  # thrown in by whoever awaits us: pass it on
                    step, value = coro.throw, exc
        finally:
            coro.close()  # a no-op once it has finished; else it must not be left suspended
