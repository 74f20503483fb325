"""Fixtures: the local protocol server under test."""

from __future__ import annotations

import pytest
import trio

from condukt.testing.server import ProtocolServer


@pytest.fixture
async def server(nursery: trio.Nursery) -> ProtocolServer:
    """A :class:`ProtocolServer` on an ephemeral port, stopped with the test."""
    server = ProtocolServer()
    await nursery.start(server.run)
    return server
