"""Transient agents: started for one job and never left running, however their caller leaves.

One-shot runs (:func:`condukt.run`), operations and sub-agents start agents
that must be gone when their job is: :func:`run_once` runs one prompt on a
fresh agent, and :func:`stop_quietly` is the cleanup every such caller
runs in its ``finally``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, cast

import trio

from ..events import Event
from ..messages import DocumentBlock, ImageBlock
from ..otp import ConduktError, Handle, Node, Server, current_node, open_node

__all__ = ["run_once", "stop_quietly"]


class _Runs(Protocol):
    """What :func:`run_once` uses of the agent it starts (an ``AgentHandle``)."""

    async def run(self, prompt: str, **options: Any) -> Any: ...


async def stop_quietly(handle: Handle, reason: str = "normal") -> None:
    """Stop ``handle`` if it still runs, shielded from cancellation, never raising.

    For cleanup in ``finally`` blocks: transient agents (one-shots,
    sub-agents) must be gone however their caller leaves.
    """
    with trio.CancelScope(shield=True):
        if handle.alive:
            try:
                await handle.stop(reason)
            except ConduktError:
                pass  # it exited on its own in the meantime


async def run_once(
    agent_class: type[Server],
    prompt: str,
    *,
    output: Any = None,
    input: Any = None,
    input_schema: Any = None,
    timeout: float | None = 300,
    max_turns: int | None = None,
    images: Iterable[ImageBlock | str | os.PathLike[str]] | None = None,
    documents: Iterable[DocumentBlock | str | os.PathLike[str]] | None = None,
    on_event: Callable[[Event], Awaitable[None]] | None = None,
    node: Node | None = None,
    **options: Any,
) -> Any:
    """Run ``prompt`` on a fresh ``agent_class`` agent with start ``options``, then stop it.

    What :func:`condukt.run` and operations do once they know the class: the
    agent starts under ``node``, else the current node, else a temporary
    one; project instructions and a class-level ``session_store`` are off
    unless ``options`` turn them on. The agent is stopped when the run
    succeeds, raises, or the caller is cancelled (then the run is aborted).
    """
    options.setdefault("load_project_instructions", False)
    options.setdefault("session_store", None)
    run_options: dict[str, Any] = {
        "output": output,
        "input": input,
        "input_schema": input_schema,
        "timeout": timeout,
        "max_turns": max_turns,
        "images": images,
        "documents": documents,
        "on_event": on_event,
    }
    if node is not None and not isinstance(node, Node):
        raise TypeError(f"node must be a condukt Node, got {node!r}")
    node = node or current_node()
    if node is not None:
        return await _run_on(node, agent_class, prompt, options, run_options)
    async with open_node() as temporary:
        return await _run_on(temporary, agent_class, prompt, options, run_options)


async def _run_on(
    node: Node, agent_class: type[Server], prompt: str, options: dict[str, Any], run_options: dict[str, Any]
) -> Any:
    handle = await node.spawn(agent_class, **options)
    try:
        return await cast(_Runs, handle).run(prompt, **run_options)
    finally:
        await stop_quietly(handle)
