"""One-shot calls from asyncio: :func:`run` (``condukt.run``) and :func:`call` (any trio function)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ParamSpec, TypeVar

from .. import agent as agent_layer
from .. import otp
from ..events import Event
from ..messages import DocumentBlock, ImageBlock
from ._guest import Guest
from ._methods import call_in
from ._node import Node
from ._open_node import current

__all__ = ["call", "run"]

P = ParamSpec("P")
R = TypeVar("R")


async def run(
    agent: type[agent_layer.Agent] | str,
    prompt: str | None = None,
    /,
    *,
    output: Any = None,
    input: Any = None,
    input_schema: Any = None,
    timeout: float | None = 300,
    max_turns: int | None = None,
    images: Iterable[ImageBlock | str | os.PathLike[str]] | None = None,
    documents: Iterable[DocumentBlock | str | os.PathLike[str]] | None = None,
    on_event: Callable[[Event], Awaitable[None]] | None = None,
    node: otp.Node | Node | None = None,
    **options: Any,
) -> Any:
    """:func:`condukt.run` from asyncio: a one-shot run, with the same parameters.

    It runs on ``node=`` (a :class:`Node` of this module, or a trio node)
    if given, else on the node of the enclosing ``open_node`` block of this
    task, else on the loop's default node (``open_node(default=True)``,
    which :mod:`condukt.lifespan` opens), else on a temporary node.
    Cancelling the awaiting task aborts the run (its tool subprocesses are
    gone when the cancellation arrives) before ``CancelledError`` propagates.
    """
    args = (agent,) if prompt is None else (agent, prompt)
    kwargs: dict[str, Any] = {
        "output": output,
        "input": input,
        "input_schema": input_schema,
        "timeout": timeout,
        "max_turns": max_turns,
        "images": images,
        "documents": documents,
        "on_event": on_event,
        **options,
    }
    target = node or current.get()
    if isinstance(target, Node):
        kwargs["node"] = target.inner
        return await call_in(target._guest, agent_layer.run, *args, **kwargs)
    if node is not None:
        kwargs["node"] = node
    return await call(agent_layer.run, *args, **kwargs)


async def call(fn: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Await the trio async function ``fn(*args, **kwargs)`` from asyncio; returns its result.

    It runs in this loop's trio guest run (started if needed), so it may
    use trio and condukt's trio API (inner nodes and handles:
    :attr:`Node.inner`, :attr:`Handle.inner`). Cancellation crosses both
    ways as for every call of this module: cancelling the awaiting task
    cancels ``fn``, and the await returns once ``fn`` has ended; what
    ``fn`` raises arrives as that exception (``trio.Cancelled`` never does).
    Proxies among the arguments arrive as the trio objects they stand for;
    the result is returned as is.
    """
    guest = await Guest.acquire()
    try:
        result: R = await call_in(guest, fn, *args, **kwargs)
        return result
    finally:
        await guest.release()
