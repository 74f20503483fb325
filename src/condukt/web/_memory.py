"""Memory figures for the observer: the node's resident memory, and an estimate of one process's own state.

Python has no per-task heap (Erlang's ``process_info(Pid, memory)``), so a
process's memory is estimated: the sizes (``sys.getsizeof``) of the
objects its server instance reaches, not counting what the whole node
shares (the node, other processes' handles and state, tasks and cancel
scopes, classes, modules, functions, model clients and their
connections). An agent's history dominates it. The walk stops after
``limit`` objects (``complete`` is then false): it runs on request, for
the one process a page shows, never for every process of a snapshot.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from typing import Any

__all__ = ["deep_size", "resident_memory"]

_SKIPPED_TYPES = (
    type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType,
    types.FrameType, types.CoroutineType, types.GeneratorType, types.AsyncGeneratorType,
)
#: Objects of classes from these packages belong to the runtime the node shares, not to one process.
_SHARED_MODULES = (
    "trio", "outcome", "httpx", "httpcore", "ssl", "socket", "logging", "jsonschema", "referencing",
    "condukt.otp", "condukt.providers", "condukt.sessions", "condukt.sandbox", "condukt.web",
)


def _shared(obj: Any) -> bool:
    if isinstance(obj, _SKIPPED_TYPES):
        return True
    module = type(obj).__module__
    return module.startswith(_SHARED_MODULES)


def deep_size(root: Any, limit: int = 100_000) -> tuple[int, bool]:
    """``(bytes, complete)``: the sizes of the objects ``root`` reaches, not counting the shared runtime.

    Synchronous; it holds the thread for the walk (a few ms per 10,000
    objects): call it for one process at a time.
    """
    seen: set[int] = set()
    stack = [root]
    total = 0
    first = True
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in seen or (not first and _shared(obj)):
            continue
        first = False
        seen.add(key)
        total += sys.getsizeof(obj, 0)
        if len(seen) >= limit:
            return total, False
        stack.extend(gc.get_referents(obj))
    return total, True


def resident_memory() -> int:
    """The process's resident memory in bytes (Linux: now, from ``/proc``; elsewhere its peak)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource  # noqa: PLC0415 - Unix only; Linux never gets here

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
