"""The turn loop on ScriptedModel: replies, tool calls, parallel calls, max_turns, images."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import trio

import condukt
from condukt.events import AgentEnd, MaxTurnsReached, ToolCallEnd, TurnEnd
from condukt.messages import (
    AssistantMessage,
    ImageBlock,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from condukt.testing import ScriptedModel, call, reply

from .helpers import Add, Recorder, Sleep, assert_consistent, of_type, tool_results

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def test_text_reply_is_returned_and_recorded(tmp_path: Path) -> None:
    model = ScriptedModel([reply("Hello there.")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, system_prompt="Be brief.", cwd=tmp_path)
        assert await agent.run("Hi") == "Hello there."
        history = await agent.history()
    assert [type(m) for m in history] == [UserMessage, AssistantMessage]
    assert history[0].text == "Hi" and history[1].text == "Hello there."
    [request] = model.requests
    assert request.system_prompt == "Be brief."
    assert request.messages == (UserMessage((TextBlock("Hi"),)),)
    assert request.tools == ()


async def test_one_tool_call_then_text_sends_call_and_result_in_order() -> None:
    add = Add()
    model = ScriptedModel([call("add", {"a": 2, "b": 3}, id="c1"), reply("It is 5.")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[add])
        assert await agent.run("What is 2+3?") == "It is 5."
        history = await agent.history()
    assert add.calls == [{"a": 2, "b": 3}]
    assert len(model.requests) == 2
    assert [d.name for d in model.requests[0].tools] == ["add"]
    user, assistant, result = model.requests[1].messages
    assert user == UserMessage((TextBlock("What is 2+3?"),))
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls == (ToolCall("c1", "add", {"a": 2, "b": 3}),)
    assert result == ToolResultMessage("c1", "add", (TextBlock("5"),), False)
    assert list(history) == [*model.requests[1].messages, history[-1]]
    assert history[-1].text == "It is 5."


async def test_parallel_calls_run_concurrently(autojump_clock: trio.abc.Clock) -> None:
    sleep = Sleep()
    model = ScriptedModel(
        [
            [call("sleep", {"seconds": 1, "label": label}) for label in ("a", "b", "c")],
            reply("all done"),
        ]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[sleep])
        start = trio.current_time()
        assert await agent.run("nap three times") == "all done"
        elapsed = trio.current_time() - start
    assert 1.0 <= elapsed < 1.5, f"three 1 s calls took {elapsed:.2f} s of virtual time"
    assert sorted(sleep.finished) == ["a", "b", "c"]


async def test_parallel_results_come_back_in_call_order(autojump_clock: trio.abc.Clock) -> None:
    sleep = Sleep()
    log: list[object] = []
    durations = {"slow": 3, "fast": 1, "mid": 2}
    calls = [call("sleep", {"seconds": s, "label": label}, id=label) for label, s in durations.items()]
    model = ScriptedModel([calls, reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[sleep], log=log)
        start = trio.current_time()
        await agent.run("go")
        assert trio.current_time() - start < 3.5
    assert sleep.finished == ["fast", "mid", "slow"]  # they really overlapped
    results = tool_results(model.requests[1])
    assert [(r.tool_call_id, r.text) for r in results] == [
        ("slow", "slept slow"),
        ("fast", "slept fast"),
        ("mid", "slept mid"),
    ]
    # Events report completions as they happen.
    assert [e.id for e in of_type(log, ToolCallEnd)] == ["fast", "mid", "slow"]


async def test_max_turns_stops_a_tool_loop_with_the_last_text() -> None:
    add = Add()
    log: list[object] = []
    steps = [[reply(f"step {n}"), call("add", {"a": n, "b": 0})] for n in range(1, 10)]
    model = ScriptedModel(steps)
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[add], log=log)
        assert await agent.run("loop forever", max_turns=3) == "step 3"
        history = await agent.history()
    assert len(model.requests) == 3
    assert len(add.calls) == 3
    assert of_type(log, MaxTurnsReached) == [MaxTurnsReached(3)]
    assert of_type(log, AgentEnd)[0].turns == 3
    assert_consistent(history)


async def test_max_turns_start_option_is_the_default_for_runs() -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 1})] * 5)
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Add()], max_turns=2)
        assert await agent.run("loop") == ""
    assert len(model.requests) == 2


async def test_turn_end_carries_each_response() -> None:
    log: list[object] = []
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), reply("3")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[Add()], log=log)
        await agent.run("sum")
    ends = of_type(log, TurnEnd)
    assert [e.turn for e in ends] == [1, 2]
    assert ends[0].message.tool_calls[0].name == "add"
    assert ends[1].message.text == "3"


async def test_images_reach_the_request_as_image_blocks(tmp_path: Path) -> None:
    path = tmp_path / "pixel.png"
    path.write_bytes(PNG)
    inline = ImageBlock.from_bytes(b"GIF89a-fake", "image/gif")
    model = ScriptedModel([reply("a pixel and a gif")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        await agent.run("What are these?", images=[path, inline])
    [message] = model.requests[0].messages
    assert isinstance(message, UserMessage)
    text, png, gif = message.content
    assert text == TextBlock("What are these?")
    assert isinstance(png, ImageBlock) and png.media_type == "image/png" and png.to_bytes() == PNG
    assert gif == inline


async def test_history_accumulates_across_runs_and_clear_forgets() -> None:
    model = ScriptedModel([reply("one"), reply("two"), reply("three")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        await agent.run("first")
        await agent.run("second")
        assert [m.text for m in model.requests[1].messages] == ["first", "one", "second"]
        assert len(await agent.history()) == 4
        await agent.clear()
        assert await agent.history() == ()
        await agent.run("third")
    assert [m.text for m in model.requests[2].messages] == ["third"]


async def test_session_ids_are_uuid7_and_distinct() -> None:
    async with condukt.open_node() as node:
        first = await node.spawn(condukt.Agent, model=ScriptedModel([]))
        second = await node.spawn(condukt.Agent, model=ScriptedModel([]))
        given = await node.spawn(condukt.Agent, model=ScriptedModel([]), id="my-session")
        ids = [first.session_id, second.session_id]
        assert given.session_id == "my-session"
    for value in ids:
        parsed = uuid.UUID(value)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == value
    assert ids[0] != ids[1]
    assert ids[0][:8] <= ids[1][:8]  # time-ordered prefix


async def test_usage_is_summed_over_turns() -> None:
    log: list[object] = []
    model = ScriptedModel(
        [
            [reply(usage=Usage(10, 2)), call("add", {"a": 1, "b": 1})],
            reply("2", usage=Usage(15, 1, cache_read_tokens=4)),
        ]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[Add()], log=log)
        await agent.run("sum")
    [end] = of_type(log, AgentEnd)
    assert end.usage == Usage(25, 3, cache_read_tokens=4)
    assert end.text == "2" and end.turns == 2
