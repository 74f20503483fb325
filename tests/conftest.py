"""Fixtures shared by every test package."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator

import pytest
from waiting import WallBound, gone

#: How much longer than its nominal bound a wall-clock check may take: the suite runs on
#: small machines with other work on them (CI sets nothing; raise it on slower hosts).
WALL_CLOCK_SLACK = float(os.environ.get("CONDUKT_WALL_CLOCK_SLACK", "4"))


@pytest.fixture
def process_gone() -> Callable[[int], bool]:
    """``process_gone(pid)``: True once ``pid`` has exited (a zombie counts), False if it still runs.

    Woken by the kernel when the process exits (a pidfd), so it never
    polls; it gives up after 2 s x ``CONDUKT_WALL_CLOCK_SLACK`` of real time.
    Synchronous: call it from a thread or after the work that killed the
    process has ended.
    """
    return functools.partial(gone, timeout=2.0 * WALL_CLOCK_SLACK)


@pytest.fixture
def wall_bound(request: pytest.FixtureRequest) -> WallBound:
    """The suite's one tolerant wall-clock check: ``with wall_bound(2.0, "what"): ...``.

    For what only real time can show (a subprocess killed, a socket closed);
    anything else uses trio's virtual clock. The block fails when it takes
    longer than ``seconds`` x ``CONDUKT_WALL_CLOCK_SLACK`` (default 4).
    ``at_least=s`` also fails it when it took less than ``s`` seconds (no
    slack there: load only makes things slower), for what must really wait.
    Only tests marked ``@pytest.mark.slow`` may use it, so every wall-clock
    assertion in the suite is found with ``-m slow``.
    """
    if request.node.get_closest_marker("slow") is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses wall_bound: mark it @pytest.mark.slow")

    @contextlib.contextmanager
    def bound(seconds: float, what: str, *, at_least: float = 0.0) -> Iterator[None]:
        start = time.monotonic()
        yield
        elapsed = time.monotonic() - start
        limit = seconds * WALL_CLOCK_SLACK
        assert elapsed <= limit, f"{what} took {elapsed:.2f} s (bound {seconds} s x slack {WALL_CLOCK_SLACK})"
        assert elapsed >= at_least, f"{what} took {elapsed:.2f} s, less than the {at_least} s it must wait"

    return bound
