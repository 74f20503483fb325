"""One test, both servers: an app served by hypercorn on trio, and mounted in FastAPI on uvicorn (asyncio)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

import condukt
import condukt.lifespan

from .helpers import hypercorn_trio, uvicorn_server

#: The two ways every surface is served in these tests.
SERVERS = ["hypercorn-trio", "uvicorn-asyncio"]

both_servers = pytest.mark.parametrize("server", SERVERS)


@asynccontextmanager
async def served(server: str, make_app: Callable[[Any], Any]) -> AsyncIterator[str]:
    """Serve ``make_app(node)`` and yield its base URL.

    ``hypercorn-trio``: ``node`` is a trio node opened here, the app served
    natively on trio. ``uvicorn-asyncio``: ``node`` is ``None`` and the app is
    mounted at ``/v1`` in a FastAPI app whose lifespan opens the node
    (``condukt.lifespan``, trio as a guest on uvicorn's loop in its thread).
    """
    if server == "hypercorn-trio":
        async with condukt.open_node() as node, hypercorn_trio(make_app(node)) as url:
            yield url
        return
    from fastapi import FastAPI

    app = FastAPI(lifespan=condukt.lifespan.lifespan)
    app.mount("/v1", make_app(None))
    with uvicorn_server(app) as url:
        yield f"{url}/v1"
