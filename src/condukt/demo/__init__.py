"""Demos: ``python -m condukt.demo`` (agents) and ``python -m condukt.demo runtime`` (OTP only)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import trio


def run_demo(main: Callable[[], Awaitable[None]]) -> None:
    """Run a demo's ``main`` under trio; Ctrl-C exits quietly with status 130."""
    try:
        trio.run(main)
    except KeyboardInterrupt:
        sys.exit(130)
