"""Fixtures: a local protocol server and a node."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

import condukt

from .helpers import WatchedServer


@pytest.fixture
async def server(nursery: trio.Nursery) -> WatchedServer:
    """A :class:`ProtocolServer` on an ephemeral port, stopped with the test (``await server.wait_closed()``)."""
    server = WatchedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def node() -> AsyncIterator[condukt.Node]:
    """A node, closed (HTTP client included) after the test."""
    async with condukt.open_node() as node:
        yield node
