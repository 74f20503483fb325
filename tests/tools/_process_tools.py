"""Tools for the ``isolate="process"`` tests: a worker process imports them by module and name.

They live here, not in the test module, so that a worker imports only this
module (and condukt), not pytest and the tests.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import attrs

import condukt


@attrs.frozen
class Box:
    """A box to measure."""

    width: float
    height: float


@condukt.tool(isolate="process")
def write_later(path: str, seconds: float) -> str:
    """Writes this worker's pid (a line) to ``path``.pid, sleeps ``seconds``, then writes "written" to ``path``."""
    Path(path + ".pid").write_text(f"{os.getpid()}\n")
    time.sleep(seconds)
    Path(path).write_text("written")
    return "written"


@condukt.tool(isolate="process")
def area(box: Box, scale: int = 1) -> dict[str, object]:
    """The area of a box (converted from the model's JSON, then pickled), and where it was computed."""
    return {"area": box.width * box.height * scale, "box_type": type(box).__name__, "pid": os.getpid()}


@condukt.tool(isolate="process")
def fail(kind: str) -> str:
    """Raises ToolError or ValueError in the worker."""
    if kind == "tool":
        raise condukt.ToolError("no such thing")
    raise ValueError(f"bad {kind}")


@condukt.tool(isolate="process")
def shadowed() -> str:
    """Its module-level name is rebound below, so a worker cannot find it."""
    return "unreachable"


shadowed_tool = shadowed
shadowed = None  # type: ignore[assignment]
