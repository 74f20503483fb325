"""Steps: a run stepped through from asyncio (``async with agent.iter(...) as steps``).

Unlike a :class:`~condukt.asyncio.Stream`, nothing is read ahead: each
``__anext__`` asks trio for the next step (which lets the run go on from the
current one), so the run waits at each step exactly as on trio, and the
step's ``replace_tool_calls`` made from asyncio takes effect before its
calls run.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from ..agent import ModelStep, ToolsStep
from ..events import Done, Error
from ._guest import Guest

__all__ = ["Steps"]

_END: Any = object()


class Steps:
    """The steps of one run, on asyncio: ``async for step in steps``; ``result``, ``run_id``, ``steer``.

    The steps are the trio :class:`~condukt.agent.ModelStep` and
    :class:`~condukt.agent.ToolsStep` objects. Leaving the block early (or
    cancelling the task iterating it) aborts the run, as on trio.
    """

    def __init__(self, guest: Guest, handle: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._guest = guest
        self._handle = handle
        self._args = args
        self._kwargs = kwargs
        self._context: Any = None
        self._inner: Any = None

    async def __aenter__(self) -> Steps:
        async def enter() -> Any:
            context = self._handle.iter(*self._args, **self._kwargs)
            steps = await context.__aenter__()
            self._context = context
            return steps

        self._inner = await self._guest.call(enter)
        return self

    def __aiter__(self) -> Steps:
        return self

    async def __anext__(self) -> ModelStep | ToolsStep:
        """The next step (the run goes on from the current one); cancelling the caller leaves the run waiting."""
        inner = self._inner

        async def next_step() -> Any:
            try:
                return await inner.__anext__()
            except StopAsyncIteration:
                return _END

        step = await self._guest.call(next_step)
        if step is _END:
            raise StopAsyncIteration
        result: ModelStep | ToolsStep = step
        return result

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Leave: a run that has not ended is aborted, as on trio (waits for it to stop)."""
        context = self._context
        if context is not None:
            self._context = None
            await self._guest.call(context.__aexit__, None, None, None)

    async def steer(self, text: str) -> None:
        """See :meth:`condukt.agent.Steps.steer` (cancelling the caller may leave the steer delivered or not)."""
        await self._guest.call(self._inner.steer, text)

    @property
    def result(self) -> Any:
        """See :attr:`condukt.agent.Steps.result`."""
        return self._inner.result

    @property
    def run_id(self) -> str:
        """The run's id (what ``abort(run_id)`` takes)."""
        return "" if self._inner is None else str(self._inner.run_id)

    @property
    def done(self) -> Done | None:
        """The :class:`~condukt.events.Done` event once the run ended."""
        return None if self._inner is None else self._inner.done

    @property
    def error(self) -> Error | None:
        """The :class:`~condukt.events.Error` event if the run failed."""
        return None if self._inner is None else self._inner.error
