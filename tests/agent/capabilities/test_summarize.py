"""condukt.compaction.Summarize: requests kept under max_tokens by a model's summary, mid-run too."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest
import trio

import condukt
from condukt.compaction import ContextTooLong, Sliding, Summarize, model_view
from condukt.events import CompactionFallback, Event, Summarized, ToolCallEnd
from condukt.messages import AssistantMessage, Message, TextBlock, ToolResultMessage, Usage, UserMessage
from condukt.providers import ModelError, ModelRequest
from condukt.sessions import DiskStore
from condukt.testing import FunctionModel, ScriptedModel, call, reply
from condukt.testing import Reply

#: The test's own idea of a token: three characters of what a request carries.
CHARS_PER_TOKEN = 3


def measure(request: ModelRequest) -> int:
    """The request's size in tokens as this test's "provider" counts it (independent of condukt's estimate)."""
    chars = len(request.system_prompt or "")
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    for message in request.messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif hasattr(block, "arguments"):
                chars += len(block.name) + len(json.dumps(block.arguments))
    return chars // CHARS_PER_TOKEN + 1


def well_formed(messages: Sequence[Message]) -> None:
    """Starts with the user; every tool result right after the call that asked for it."""
    assert messages and isinstance(messages[0], UserMessage)
    waiting: list[str] = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id in waiting, f"result {message.tool_call_id} without its call"
            waiting.remove(message.tool_call_id)
            continue
        assert not waiting, f"calls {waiting} without their results"
        if isinstance(message, AssistantMessage):
            waiting = [c.id for c in message.tool_calls]


@condukt.tool
async def work(step: int) -> str:
    """Do one step of the work."""
    return f"step {step} done: " + "lorem ipsum dolor sit amet " * 10


def worker(turns: int, sizes: list[int]) -> FunctionModel:
    """A model that calls ``work`` ``turns`` times (one call per turn), then answers; it records each request's size."""
    steps = itertools.count(1)

    def respond(request: ModelRequest) -> Any:
        size = measure(request)
        sizes.append(size)
        step = next(steps)
        usage = Reply("", usage=Usage(input_tokens=size, output_tokens=10))
        if step > turns:
            return [usage, Reply("all steps done")]
        return [usage, call("work", {"step": step})]

    return FunctionModel(respond, name="worker")


def summariser(log: list[str] | None = None, text: str = "Steps were done; keep going.") -> FunctionModel:
    def respond(request: ModelRequest) -> Any:
        if log is not None:
            log.append(request.messages[-1].text)
        return [Reply("", usage=Usage(input_tokens=measure(request))), Reply(text)]

    return FunctionModel(respond, name="summariser")


async def test_a_200_turn_tool_run_finishes_with_summaries_and_every_request_under_the_limit(autojump_clock: Any) -> None:
    sizes: list[int] = []
    events: list[Event] = []
    summaries: list[str] = []
    limit = 3000
    model = worker(200, sizes)
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            tools=[work],
            compactor=Summarize(max_tokens=limit, model=summariser(summaries), keep_last=4),
        )

        async def on_event(event: Event) -> None:
            events.append(event)

        text = await agent.run("Do the 200 steps.", max_turns=500, on_event=on_event)
        history = await agent.history()
    assert text == "all steps done"
    assert len(sizes) == 201
    assert max(sizes) <= limit, max(sizes)
    # Without summaries the history would be far over the limit.
    assert measure(ModelRequest(None, tuple(history))) > 5 * limit
    summarised = [e for e in events if isinstance(e, Summarized)]
    assert len(summarised) >= 3
    assert all(e.tokens_after < e.tokens_before for e in summarised)
    assert len(summaries) >= len(summarised)  # (one more may be in the making, ahead of a next run)
    for request in model.requests:
        well_formed(request.messages)
    # Everything stays in the history for audit: all 200 calls and results.
    assert sum(isinstance(m, ToolResultMessage) for m in history) == 200
    assert sum(isinstance(e, ToolCallEnd) for e in events) == 200
    # Summary and boundary are in the history: the model's view of it is what the last request saw (plus the answer).
    view = model_view(history)
    assert view[0].text.startswith("Summary of the conversation so far:")
    assert view[:-1] == list(model.requests[-1].messages)[: len(view) - 1]
