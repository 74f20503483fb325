"""Agents with ``hibernate_after``: an idle agent's history is held serialized until its next message."""

from __future__ import annotations

import math
from typing import Any

import trio

import condukt
from condukt.agent import RunResult
from condukt.messages import ToolResultMessage, UserMessage
from condukt.otp.lowlevel import process_of
from condukt.sessions import MemoryStore
from condukt.testing import FunctionModel, call, reply


class Echo(condukt.Tool):
    name = "echo"
    description = "Echoes its text."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return f"echo {args['text']}"


def answer(request: condukt.ModelRequest) -> Any:
    """Calls ``echo`` once for a prompt starting with "tool", then answers with what it saw."""
    last = request.messages[-1]
    if type(last) is UserMessage and last.text.startswith("tool"):
        return call("echo", {"text": last.text})
    if type(last) is ToolResultMessage:
        return reply(f"tool said {last.text}")
    return reply(f"{len(request.messages)} messages, last {getattr(last, 'text', '')!r}")


OPTIONS: dict[str, Any] = {"tools": [Echo], "load_project_instructions": False}


async def nap(agent: condukt.AgentHandle) -> None:
    """Sleep past the agent's hibernate_after (virtual time) and check it hibernated."""
    await trio.sleep(2.0)
    assert agent.state == "hibernated"
    proc = process_of(agent)
    assert proc is not None and proc.hibernated


async def test_idle_agent_hibernates_and_state_says_so(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=FunctionModel(answer), hibernate_after=1.0, **OPTIONS)
        await agent.run("hello")
        assert agent.state == "idle"
        await nap(agent)
        assert agent.info().state == "hibernated"
        assert agent.info().queued == 0
        history = await agent.history()  # a call wakes it
        assert agent.state == "idle"
        assert [type(m).__name__ for m in history] == ["UserMessage", "AssistantMessage"]


async def script(agent: condukt.AgentHandle, sleepy: bool) -> list[Any]:
    """Every public operation in turn; with ``sleepy``, the agent hibernates before each."""
    seen: list[Any] = []

    async def step(fn: Any) -> None:
        if sleepy:
            await nap(agent)
        try:
            value = await fn()
            if type(value) is RunResult:  # its run id starts with the agent's own session id
                value = (value.run_id.rsplit("/", 1)[1], value.status, value.value, value.error)
            seen.append(value)
        except condukt.ConduktError as exc:
            seen.append(type(exc).__name__)

    await step(lambda: agent.run("first"))
    await step(lambda: agent.run("tool please"))
    await step(agent.last_result)
    await step(agent.history)
    await step(lambda: _stream(agent, "streamed"))
    await step(lambda: agent.steer("too late"))  # nothing runs: NotRunning
    await step(agent.abort)  # nothing runs: False
    await step(lambda: agent.follow_up("later"))
    await step(lambda: agent.run("queued behind the follow-up"))
    await step(agent.history)
    await step(agent.compact)
    await step(lambda: agent.run("after compact"))
    await step(agent.clear)
    await step(agent.history)
    await step(lambda: agent.run("fresh"))
    await step(agent.last_result)
    seen.append(agent.session_id is not None)
    return seen


async def test_every_operation_on_a_hibernated_agent_matches_an_awake_one(autojump_clock: Any) -> None:
    """The same script against an agent that never hibernates and one that hibernates between steps."""
    async with condukt.open_node() as node:
        awake = await node.spawn(condukt.Agent, model=FunctionModel(answer), hibernate_after=math.inf, **OPTIONS)
        sleepy = await node.spawn(condukt.Agent, model=FunctionModel(answer), hibernate_after=1.0, **OPTIONS)
        expected = await script(awake, sleepy=False)
        assert await script(sleepy, sleepy=True) == expected
        assert expected[0] == "1 messages, last 'first'"
        assert expected[1] == "tool said echo tool please"
        await nap(sleepy)
        await sleepy.stop()
        assert not sleepy.alive


async def _stream(agent: condukt.AgentHandle, prompt: str) -> list[str]:
    async with agent.stream(prompt) as events:
        return [type(event).__name__ async for event in events]


async def test_concurrent_callers_wake_a_hibernated_agent_once(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=FunctionModel(answer), hibernate_after=1.0, **OPTIONS)
        await agent.run("one")
        await nap(agent)
        results: list[str] = []
        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(lambda i=i: _append(results, agent.run(f"p{i}")))
        assert len(results) == 5
        history = await agent.history()
        assert len(history) == 12
        prompts = [m.text for m in history if type(m) is UserMessage]
        assert prompts[0] == "one" and sorted(prompts[1:]) == ["p0", "p1", "p2", "p3", "p4"]


async def _append(results: list[str], run: Any) -> None:
    results.append(await run)


async def test_node_default_applies_to_agents_and_a_start_overrides_it(autojump_clock: Any) -> None:
    async with condukt.open_node(hibernate_after=1.0) as node:
        default = await node.spawn(condukt.Agent, model=FunctionModel(answer), **OPTIONS)
        never = await node.spawn(condukt.Agent, model=FunctionModel(answer), hibernate_after=math.inf, **OPTIONS)
        await trio.sleep(2.0)
        assert default.state == "hibernated"
        assert never.state == "idle"


async def test_persistence_saves_the_same_after_a_wake(autojump_clock: Any) -> None:
    store = MemoryStore()
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=FunctionModel(answer), session_store=store, id="s1", hibernate_after=1.0, **OPTIONS
        )
        await agent.run("one")
        await nap(agent)
        await agent.run("two")
        await agent.stop()
        saved = await store.load("s1")
        assert saved is not None
        assert [m.text for m in saved.messages if type(m) is UserMessage] == ["one", "two"]
        again = await node.spawn(condukt.Agent, model=FunctionModel(answer), session_store=store, id="s1", **OPTIONS)
        assert len(await again.history()) == 4


async def test_an_agent_running_does_not_hibernate(autojump_clock: Any) -> None:
    gate = trio.Event()

    async def slow(request: condukt.ModelRequest) -> Any:
        await gate.wait()
        return reply("done")

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=FunctionModel(slow), hibernate_after=1.0, **OPTIONS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "wait")
            await trio.sleep(10.0)
            assert agent.state == "running"
            gate.set()
        assert agent.state == "idle"
        await nap(agent)
