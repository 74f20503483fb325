"""Opening a node from asyncio (``async with open_node() as node``), and the node of the current task."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from types import TracebackType
from typing import Any

import trio

from .. import otp
from ..otp import lowlevel as otp_lowlevel
from ._guest import Guest, set_result
from ._node import Node
from ._thread import ThreadHost

__all__ = ["OpenNode", "current", "current_node", "open_node"]

#: The node of the innermost enclosing ``open_node`` block of this asyncio task.
current: contextvars.ContextVar[Node | None] = contextvars.ContextVar("condukt_asyncio_node", default=None)


class OpenNode:
    """What :func:`open_node` returns: ``async with`` it for a :class:`Node` of the running loop."""

    def __init__(self, kwargs: dict[str, Any], default: bool, thread: bool) -> None:
        self._kwargs = kwargs
        self._default = default
        self._thread = thread
        self._exit_event: trio.Event | None = None
        self._guest: Guest | None = None
        self._closed: asyncio.Future[None] | None = None
        self._token: contextvars.Token[Node | None] | None = None

    async def __aenter__(self) -> Node:
        guest = self._guest = await (ThreadHost.acquire() if self._thread else Guest.acquire())
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[otp.Node] = loop.create_future()

        async def hold() -> None:
            # The node lives in a trio task of its own until the asyncio block ends.
            async with otp.open_node(**self._kwargs) as node:
                with otp_lowlevel.run_default_node(node) if self._default else contextlib.nullcontext():
                    self._exit_event = trio.Event()
                    guest.deliver(loop, set_result, opened, node)
                    await self._exit_event.wait()

        self._closed = asyncio.ensure_future(guest.call(hold))
        waiting: set[asyncio.Future[Any]] = {opened, self._closed}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if opened.done():
            proxy = Node(guest, opened.result())
            self._token = current.set(proxy)
            return proxy
        await guest.release()
        self._closed.result()  # raises what opening raised
        raise RuntimeError("the node did not open")  # pragma: no cover

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._guest is not None and self._closed is not None
        if self._token is not None:
            with contextlib.suppress(ValueError):  # left in another context than entered: nothing to reset
                current.reset(self._token)
        exit_event = self._exit_event
        if exit_event is not None:
            self._guest.call_soon(exit_event.set)
        try:
            await self._closed
        finally:
            await self._guest.release()


def open_node(*, default: bool = False, thread: bool = False, **kwargs: Any) -> OpenNode:
    """``async with condukt.asyncio.open_node() as node``: a node on the running asyncio loop.

    Takes the options of :func:`condukt.open_node`. Leaving the block stops
    the node (its processes, then its HTTP client), as on trio. Cancelling
    the task inside the block cancels what it awaits, not the node.

    ``default=True`` makes it the default node of this loop for the block:
    :func:`run` (and trio code run through :func:`call`) without ``node=``
    uses it, from any task. That is what an application's lifespan wants
    (see :mod:`condukt.lifespan`).

    ``thread=True`` runs trio in a thread of its own instead of as a guest
    on this loop (one such thread per process, shared by every node opened
    this way): for hosts where guest mode cannot be used, such as a loop
    per request. Such a node may be used from any asyncio loop of the
    process while its block is open; leave the block on the loop that
    entered it. Calls cross threads (slower than guest mode); everything
    else, cancellation included, is the same. ``default=True`` then makes
    it the default of that trio thread (``run``/``call`` with ``node=`` it
    or inside its block use it).
    """
    return OpenNode(kwargs, default, thread)


async def current_node() -> Node | None:
    """The node of the enclosing ``open_node`` block of this task, else the loop's default node, else ``None``.

    The loop's default node is the one opened with ``open_node(default=True)``
    (as :mod:`condukt.lifespan` does). Cancellation: cancelling the caller
    only stops the look-up.
    """
    enclosing = current.get()
    if enclosing is not None:
        return enclosing
    guest = await Guest.acquire()
    try:
        node = await guest.call(_current_trio_node)
        return None if node is None else Node(guest, node)
    finally:
        await guest.release()


async def _current_trio_node() -> otp.Node | None:
    return otp.current_node()
