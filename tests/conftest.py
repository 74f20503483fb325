"""Fixtures shared by every test package."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # A killed child nobody reaped yet is a zombie: it no longer runs.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def process_gone() -> Callable[[int], bool]:
    """``process_gone(pid)``: True once ``pid`` stopped running (waits up to 2 s, real time)."""

    def gone(pid: int) -> bool:
        deadline = time.monotonic() + 2.0
        while _running(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    return gone


#: How much longer than its nominal bound a wall-clock check may take: the suite runs on
#: small machines with other work on them (CI sets nothing; raise it on slower hosts).
WALL_CLOCK_SLACK = float(os.environ.get("CONDUKT_WALL_CLOCK_SLACK", "4"))


@pytest.fixture
def wall_bound(request: pytest.FixtureRequest) -> Callable[[float, str], contextlib.AbstractContextManager[None]]:
    """The suite's one tolerant wall-clock check: ``with wall_bound(2.0, "what"): ...``.

    For what only real time can show (a subprocess killed, a socket closed);
    anything else uses trio's virtual clock. The block fails when it takes
    longer than ``seconds`` x ``CONDUKT_WALL_CLOCK_SLACK`` (default 4). Only
    tests marked ``@pytest.mark.slow`` may use it, so every wall-clock
    assertion in the suite is found with ``-m slow``.
    """
    if request.node.get_closest_marker("slow") is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses wall_bound: mark it @pytest.mark.slow")

    @contextlib.contextmanager
    def bound(seconds: float, what: str) -> Iterator[None]:
        start = time.monotonic()
        yield
        elapsed = time.monotonic() - start
        limit = seconds * WALL_CLOCK_SLACK
        assert elapsed <= limit, f"{what} took {elapsed:.2f} s (bound {seconds} s x slack {WALL_CLOCK_SLACK})"

    return bound
