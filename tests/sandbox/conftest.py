"""Fixtures for the sandbox tests: finding processes by a marker in their command line."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

import pytest


def processes_with(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != b"Z":
            found.append(int(entry))
    return found


@pytest.fixture
def marker() -> str:
    """A unique ``sleep`` duration: ``sleep <marker>`` finds this test's processes and no one else's."""
    return f"{900 + uuid.uuid4().int % 10000}.{uuid.uuid4().int % 1000:03d}"


@pytest.fixture
def none_left(process_gone: Callable[[int], bool]) -> Callable[[str], bool]:
    """``none_left(marker)``: True once every process carrying ``marker`` has exited.

    Waits for each one's exit (``process_gone``: woken by the kernel, real
    time, bounded); processes found after that would be new ones, a failure too.
    """

    def check(marker: str) -> bool:
        return all(process_gone(pid) for pid in processes_with(marker)) and not processes_with(marker)

    return check
