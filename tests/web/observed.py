"""What the observer tests watch: servers that crash or block, and the agent tests' ``Gate`` tool (blocks until opened)."""

from __future__ import annotations

from typing import Any

import trio

import condukt
from tests.agent.test_control import Gate

__all__ = ["Blocked", "Crashy", "Gate"]


class Crashy(condukt.Server):
    """Crashes on any cast."""

    async def handle_cast(self, message: Any) -> None:
        raise RuntimeError("crash on purpose")


class Blocked(condukt.Server):
    """Handles a cast of a ``trio.Event`` by waiting for it: later casts pile up in its mailbox."""

    async def handle_cast(self, message: Any) -> None:
        if isinstance(message, trio.Event):
            await message.wait()
