"""Fixtures shared by every test package."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
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
