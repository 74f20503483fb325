"""The local provider-format server the command line's tests talk to."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from condukt.testing.server import ProtocolServer


@pytest.fixture
async def server(nursery: trio.Nursery) -> AsyncIterator[ProtocolServer]:
    """A :class:`ProtocolServer` on 127.0.0.1 for the test's duration."""
    server = ProtocolServer()
    await nursery.start(server.run)
    yield server
