"""One node for a web application's lifetime, on trio or asyncio servers alike.

Starlette and FastAPI (any server; asyncio or trio is detected)::

    app = FastAPI(lifespan=condukt.lifespan.lifespan)

    @app.post("/ask")
    async def ask(request: Request):
        node = request.state.node                 # also app.state.node
        return await condukt.asyncio.run("...", model=...)   # on trio: condukt.run; both use that node

quart-trio::

    app.while_serving(condukt.lifespan.while_serving)

Any other trio or asyncio code: ``async with condukt.lifespan.open_app_node() as node``.

While the node is open it is the **default node of the event loop**: a
one-shot ``condukt.run(...)`` (on trio) or ``condukt.asyncio.run(...)``
(on asyncio) without ``node=`` runs on it from any request handler, so
requests share one connection pool and the provider limits instead of each
opening a throwaway node. (Request handlers run in tasks that do not
inherit the lifespan's context, which is why a plain ``open_node`` block in
the lifespan is not enough.)
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import trio

from . import otp
from .otp import lowlevel as otp_lowlevel

__all__ = ["lifespan", "open_app_node", "while_serving"]


def _library() -> str:
    # Inside trio's guest run on asyncio, asyncio code is not in a trio task: this tells them apart.
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        pass
    else:
        return "trio"
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return "neither trio nor asyncio"
    return "asyncio"


@contextlib.asynccontextmanager
async def open_app_node() -> AsyncIterator[Any]:
    """``async with open_app_node() as node``: a node that is the event loop's default for the block.

    On trio the node is a :class:`condukt.Node`; on asyncio a
    :class:`condukt.asyncio.Node` (trio runs as a guest on the loop). See
    the module for what "default" means. Leaving the block stops the node
    and its processes (each ``terminate`` runs), also when the block is
    cancelled. Raises ``RuntimeError`` outside trio and asyncio.
    """
    library = _library()
    if library == "trio":
        async with otp.open_node() as node:
            with otp_lowlevel.run_default_node(node):
                yield node
    elif library == "asyncio":
        from . import asyncio as condukt_asyncio

        async with condukt_asyncio.open_node(default=True) as proxy:
            yield proxy
    else:
        raise RuntimeError(f"condukt runs on trio or asyncio, not {library}")


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[dict[str, Any]]:
    """A Starlette/FastAPI ``lifespan=``: :func:`open_app_node` for the app's lifetime.

    The node is ``request.state.node`` in handlers (Starlette's lifespan
    state) and ``app.state.node``. To open more things in your own
    lifespan, nest ``async with open_app_node() as node:`` in it instead.
    Cancellation: the server ending the lifespan stops the node.
    """
    async with open_app_node() as node:
        state = getattr(app, "state", None)
        if state is not None:
            state.node = node
        yield {"node": node}


async def while_serving() -> AsyncIterator[None]:
    """For quart-trio's ``app.while_serving(...)``: the app's node while it serves.

    Quart calls it once at startup (the node opens, as the default node of
    the trio run) and resumes it at shutdown (the node stops): no
    ``__aenter__``/``__aexit__`` by hand. Handlers reach the node with
    ``condukt.current_node()`` and ``condukt.run`` uses it.
    Cancellation: shutdown stops the node.
    """
    async with open_app_node():
        yield
