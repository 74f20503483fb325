"""The messages an :class:`AgentHandle` sends to its agent process (private protocol)."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from ..messages import ImageBlock

__all__ = [
    "AbortRun",
    "CancelRun",
    "Clear",
    "Compact",
    "FollowUp",
    "GetHistory",
    "RunRequest",
    "Steer",
]


@attrs.define(eq=False)
class RunRequest:
    """Start a run. ``sink`` receives its events (stream runs reply at once)."""

    prompt: str
    images: tuple[ImageBlock, ...] = ()
    timeout: float | None = None
    max_turns: int | None = None
    sink: trio.MemorySendChannel[Any] | None = None
    output: Any = None
    on_event: Any = None


@attrs.frozen
class AbortRun:
    """Stop the active run (``run`` None: whatever runs) and wait until it has stopped."""

    run: RunRequest | None = None


@attrs.frozen
class CancelRun:
    """Fire-and-forget abort of one run whose caller went away."""

    run: RunRequest


@attrs.frozen
class Steer:
    """Add a user message before the next model request of the active run."""

    text: str


@attrs.frozen
class FollowUp:
    """Queue a prompt to run after the current run."""

    text: str


@attrs.frozen
class GetHistory:
    """Ask for the conversation."""


@attrs.frozen
class Clear:
    """Forget the conversation."""


@attrs.frozen
class Compact:
    """Run the compactor now."""
