"""What the observer tests watch: servers that crash or block, and the agent tests' ``Gate`` tool (blocks until opened)."""

from __future__ import annotations

from typing import Any

import trio

import condukt
import condukt.events
from tests.agent.test_control import Gate

__all__ = ["Blocked", "CrashOnTool", "Crashy", "Gate", "Linker"]


class Crashy(condukt.Server):
    """Crashes on any cast."""

    async def handle_cast(self, message: Any) -> None:
        raise RuntimeError("crash on purpose")


class Blocked(condukt.Server):
    """Handles a cast of a ``trio.Event`` by waiting for it: later casts pile up in its mailbox."""

    async def handle_cast(self, message: Any) -> None:
        if isinstance(message, trio.Event):
            await message.wait()


class CrashOnTool(condukt.Agent):
    """An agent that crashes (its process, not its run) as soon as its model calls a tool."""

    async def handle_event(self, event: Any) -> None:
        if isinstance(event, condukt.events.ToolCallStart):
            raise RuntimeError("crash on purpose")


class Linker(condukt.Server):
    """Links to, or monitors, the process a cast names: ``("link", handle)`` or ``("monitor", handle)``."""

    async def handle_cast(self, message: Any) -> None:
        op, other = message
        if op == "link":
            self.link(other)
        else:
            self.monitor(other)

    async def handle_call(self, request: Any, caller: Any) -> Any:
        return "done"  # answered after the casts before it: they are done
