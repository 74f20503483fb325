"""Extension points for bridges that answer agent calls outside a trio task (like :mod:`condukt.otp.lowlevel`).

Application code needs none of this: :class:`~condukt.agent.AgentHandle`
is enough. A bridge that hands answers to another event loop
(:mod:`condukt.asyncio`) starts a run here with a callback instead of a
task that waits for it: no task, no cancel scope, and the answer arrives
in the same trio tick as the agent's reply.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import outcome

from ..events import Event
from ..messages import DocumentBlock, ImageBlock
from ..otp.lowlevel import call_with_callback, send_system
from ..providers import ModelSettings
from ._handle import AgentHandle, refuse_inside_own_run, run_request
from ._requests import CancelRun

__all__ = ["start_run"]


def start_run(
    handle: AgentHandle,
    deliver: Callable[[outcome.Outcome[Any]], None],
    prompt: str,
    *,
    timeout: float | None = 300,
    max_turns: int | None = None,
    images: Iterable[ImageBlock | str | os.PathLike[str]] | None = None,
    output: Any = None,
    input: Any = None,
    input_schema: Any = None,
    on_event: Callable[[Event], Awaitable[None]] | None = None,
    documents: Iterable[DocumentBlock | str | os.PathLike[str]] | None = None,
    model_settings: ModelSettings | Mapping[str, Any] | None = None,
) -> Callable[[], None] | None:
    """Start what :meth:`AgentHandle.run` runs, with its answer handed to ``deliver`` instead of a waiting task.

    The arguments are those of :meth:`AgentHandle.run`, checked the same
    way (``TypeError``/``ValueError`` raised here). ``deliver(outcome)`` is
    called once, synchronously, inside the node's trio run, with an
    :class:`outcome.Value` of what ``run`` would return or an
    :class:`outcome.Error` of what it would raise; it must not block or
    raise. Call this from the node's trio thread: a task, a
    ``run_sync_soon`` callback, or, for a guest run
    (``trio.lowlevel.start_guest_run``), the host loop's own code between
    trio's ticks (:mod:`condukt.asyncio` starts its runs from there, so a
    run costs no trio tick of its own).

    Returns a function that does what cancelling ``run``'s caller does: it
    aborts the run (or takes it out of the queue), and ``deliver`` is not
    called afterwards. Returns ``None`` when the agent's mailbox is full:
    nothing was started; use :meth:`AgentHandle.run`, which waits for room.
    Raises :class:`~condukt.NoProc` if the agent is not alive and
    :class:`~condukt.CallingSelf` from inside the agent's own run.

    Measured (benchmarks/embedding.py, docs/benchmarks.md): a run answered
    this way from asyncio skips a trio task, its cancel scope and one trio
    tick against a task that awaits :meth:`AgentHandle.run`.
    """
    request = run_request(
        prompt, timeout, max_turns, images, output, input, input_schema, on_event, documents, model_settings
    )
    refuse_inside_own_run(handle, "run()")
    withdraw = call_with_callback(handle, request, None, deliver)
    if withdraw is None:
        return None

    def cancel() -> None:
        withdraw()
        send_system(handle, CancelRun(request))

    return cancel
