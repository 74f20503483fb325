"""What the observer tests watch: a tool that blocks until the test opens it, and servers that crash or block."""

from __future__ import annotations

from typing import Any

import trio

import condukt


class Gate(condukt.Tool):
    """``gate``: blocks until ``self.open`` is set, then answers ``"passed"``."""

    name = "gate"
    description = "Waits for the test."
    parameters = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        super().__init__()
        self.entered = trio.Event()
        self.open = trio.Event()

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        self.entered.set()
        await self.open.wait()
        return "passed"


class Crashy(condukt.Server):
    """Crashes on any cast."""

    async def handle_cast(self, message: Any) -> None:
        raise RuntimeError("crash on purpose")


class Blocked(condukt.Server):
    """Handles a cast of a ``trio.Event`` by waiting for it: later casts pile up in its mailbox."""

    async def handle_cast(self, message: Any) -> None:
        if isinstance(message, trio.Event):
            await message.wait()
