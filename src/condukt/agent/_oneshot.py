"""One-shot runs: a transient agent for one prompt, never leaked."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..events import Event
from ..messages import DocumentBlock, ImageBlock
from ..otp import Node
from ._agent import Agent
from ._transient import run_once

__all__ = ["run"]


async def run(
    agent: type[Agent] | str,
    prompt: str | None = None,
    /,
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
    """Run one prompt on a transient agent and return its answer.

    ``await condukt.run("prompt", model=..., tools=[...], system_prompt=..., output=...)``
    uses a plain :class:`Agent`; ``await condukt.run(MyAgent, "prompt", ...)``
    uses ``MyAgent`` (its tools, system prompt and model, overridable by
    ``options``). ``output``/``input``/``input_schema``/``images``/``documents``/``on_event`` work as
    in :meth:`AgentHandle.run`; other keywords are start options.

    The agent starts under ``node`` if given (a service keeps one node for
    all its requests: one connection pool, shared provider limits), else
    the current node (inside ``open_node``), else a temporary node, and is
    always stopped afterwards: when the run
    succeeds, raises, or the caller is cancelled. Project instructions are
    not loaded unless ``load_project_instructions=True`` is passed, and the
    conversation is not persisted (a class-level ``session_store`` is
    ignored) unless ``session_store=`` is passed: a one-shot has no history
    to resume, and a snapshot per call would only grow the store.
    """
    if isinstance(agent, str):
        if prompt is not None:
            raise TypeError("condukt.run(prompt, ...) takes the prompt once")
        agent_class: type[Agent] = Agent
        prompt = agent
    else:
        if not (isinstance(agent, type) and issubclass(agent, Agent)):
            raise TypeError(f"condukt.run expects a prompt or an Agent subclass, got {agent!r}")
        if prompt is None:
            raise TypeError("condukt.run(MyAgent, prompt) needs a prompt")
        agent_class = agent
    return await run_once(
        agent_class,
        prompt,
        output=output,
        input=input,
        input_schema=input_schema,
        timeout=timeout,
        max_turns=max_turns,
        images=images,
        documents=documents,
        on_event=on_event,
        node=node,
        **options,
    )
