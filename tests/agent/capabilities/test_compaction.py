"""Compaction end to end: after every run and on ``compact()``, pairs kept, old large results elided."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio

import condukt
from condukt.compaction import Compactor, Sliding, ToolResultPrune, compact_with
from condukt.messages import AssistantMessage, Message, TextBlock, ToolCall, ToolResultMessage, UserMessage
from condukt.testing import ScriptedModel, call, reply

from .helpers import Echo, Sleep, assert_paired, result_texts


def user(text: str) -> UserMessage:
    return UserMessage((TextBlock(text),))


def asks(*ids: str) -> AssistantMessage:
    return AssistantMessage(tuple(ToolCall(i, "echo", {}) for i in ids), stop_reason="tool_use")


def answer(call_id: str, text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(call_id, "echo", (TextBlock(text),))


def says(text: str) -> AssistantMessage:
    return AssistantMessage((TextBlock(text),))


#: Three runs: a parallel fan-out, a chain of calls, a plain answer.
HISTORY: list[Message] = [
    user("one"), asks("a", "b"), answer("a"), answer("b"), says("1"),
    user("two"), asks("c"), answer("c"), asks("d"), answer("d"), says("2"),
    user("three"), says("3"),
]  # fmt: skip


def expected_window(messages: Sequence[Message], keep: int) -> list[Message]:
    """The longest suffix of at most ``keep`` messages that starts with a user message."""
    for start in range(max(0, len(messages) - keep), len(messages)):
        if isinstance(messages[start], UserMessage):
            return list(messages[start:])
    return []


# --------------------------------------------------------------------------- Sliding


@pytest.mark.parametrize("keep", range(len(HISTORY) + 2))
async def test_sliding_keeps_the_most_recent_whole_exchanges(keep: int) -> None:
    compacted = await compact_with(Sliding(keep=keep), HISTORY)
    assert len(compacted) <= keep
    assert compacted == expected_window(HISTORY, keep)
    assert not compacted or isinstance(compacted[0], UserMessage)
    assert_paired(compacted)


async def test_sliding_after_every_run_of_a_real_agent() -> None:
    keep = 6
    model = ScriptedModel(
        [
            [call("echo", {"text": "a"}), call("echo", {"text": "b"})], reply("1"),  # run 1: 5 messages
            call("echo", {"text": "c"}), call("echo", {"text": "d"}), reply("2"),  # run 2: 6 messages
            reply("3"),  # run 3: 2 messages
            call("echo", {"text": "e"}), reply("4"),  # run 4: 4 messages
        ]
    )  # fmt: skip
    history: list[Message] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Echo], compactor=Sliding(keep=keep))
        for prompt in ["one", "two", "three", "four"]:
            first = len(model.requests)
            await agent.run(prompt)
            # The run started from the history compacted after the previous run ...
            assert list(model.requests[first].messages) == [*history, user(prompt)]
            # ... and its own messages were compacted when it ended.
            uncompacted = [*model.requests[-1].messages, model.requests[-1].messages[-1]]
            history = list(await agent.history())
            uncompacted[-1] = history[-1]  # the final answer
            assert history == expected_window(uncompacted, keep), prompt
            assert len(history) <= keep and isinstance(history[0], UserMessage)
            assert_paired(history)
    assert [m.text for m in history if isinstance(m, UserMessage)] == ["three", "four"]


async def test_a_run_longer_than_keep_leaves_only_what_fits() -> None:
    # One run of 7 messages with keep=4: no suffix of 4 starts with the
    # user, so nothing is kept rather than a broken conversation.
    model = ScriptedModel([call("echo"), call("echo"), call("echo"), reply("done"), reply("next")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Echo], compactor=Sliding(keep=4))
        await agent.run("long")
        assert await agent.history() == ()
        await agent.run("short")
        assert [type(m) for m in await agent.history()] == [UserMessage, AssistantMessage]
    assert [m.text for m in model.requests[-1].messages] == ["short"]


@pytest.mark.parametrize("keep", [-1, 1.5, True, "3"])
def test_sliding_refuses_a_bad_keep(keep: Any) -> None:
    with pytest.raises(ValueError, match="keep must be an int >= 0"):
        Sliding(keep=keep)


# --------------------------------------------------------------------------- ToolResultPrune


async def test_prune_elides_only_old_results_larger_than_max_size() -> None:
    big = "x" * 120
    model = ScriptedModel(
        [
            call("echo", {"text": big}),  # oldest: large -> elided
            call("echo", {"text": "y" * 50}),  # old but exactly max_size -> kept
            [
                call("echo", {"text": "small"}),
                call("echo", {"text": "z" * 51}),
            ],  # old: small kept, large elided
            call("echo", {"text": big}),  # recent -> kept
            call("echo", {"text": big}),  # recent -> kept
            reply("done"),
            reply("again"),
        ]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[Echo], compactor=ToolResultPrune(keep_recent=2, max_size=50)
        )
        await agent.run("work")
        # During the run every result was whole.
        assert result_texts(model.requests[5].messages) == [big, "y" * 50, "small", "z" * 51, big, big]
        history = await agent.history()
        await agent.run("more")
    assert result_texts(history) == [
        "[tool result elided to save context: 120 characters]",
        "y" * 50,
        "small",
        "[tool result elided to save context: 51 characters]",
        big,
        big,
    ]
    assert len(history) == 1 + 5 * 2 + 1 + 1  # nothing removed: user, 5 calls (6 results), answer
    assert_paired(history)
    elided = next(m for m in history if isinstance(m, ToolResultMessage))
    assert (elided.name, elided.is_error) == ("echo", False)
    # The next run's request carries the pruned history.
    assert result_texts(model.requests[-1].messages) == result_texts(history)


async def test_prune_keeps_recent_results_however_large() -> None:
    messages = [
        user("u"),
        asks("a"),
        answer("a", "x" * 10_000),
        asks("b"),
        answer("b", "y" * 10_000),
        says("ok"),
    ]
    assert await compact_with(ToolResultPrune(keep_recent=2, max_size=10), messages) == messages
    pruned = await compact_with(ToolResultPrune(keep_recent=0, max_size=10), messages)
    assert result_texts(pruned) == [
        "[tool result elided to save context: 10000 characters]",
        "[tool result elided to save context: 10000 characters]",
    ]
    assert messages[2].text == "x" * 10_000  # the input is not modified


@pytest.mark.parametrize("option", ["keep_recent", "max_size"])
def test_prune_refuses_bad_options(option: str) -> None:
    with pytest.raises(ValueError, match=f"{option} must be an int >= 0"):
        ToolResultPrune(**{option: -1})


# --------------------------------------------------------------------------- compact()


class Adjustable:
    """Keeps everything until ``keep`` is set, then slides."""

    def __init__(self) -> None:
        self.keep: int | None = None
        self.calls = 0

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        self.calls += 1
        if self.keep is None:
            return list(messages)
        return await Sliding(self.keep).compact(messages)


async def test_compact_runs_the_compactor_now_and_returns_how_many_messages_it_removed() -> None:
    compactor = Adjustable()
    assert isinstance(compactor, Compactor)
    model = ScriptedModel([call("echo"), reply("1"), reply("2")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Echo], compactor=compactor)
        await agent.run("one")
        await agent.run("two")
        assert compactor.calls == 2  # after each run
        assert len(await agent.history()) == 6
        compactor.keep = 2
        assert await agent.compact() == 4
        assert [m.text for m in await agent.history()] == ["two", "2"]
        assert await agent.compact() == 0
        assert compactor.calls == 4


async def test_compact_without_a_compactor_changes_nothing() -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("hi")]))
        await agent.run("hello")
        assert await agent.compact() == 0
        assert len(await agent.history()) == 2


async def test_a_failed_run_is_compacted_too() -> None:
    model = ScriptedModel([reply("1"), call("sleep", {"seconds": 0}), condukt.ModelError("overloaded")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Sleep], compactor=Sliding(keep=3))
        await agent.run("one")
        assert len(await agent.history()) == 2
        with pytest.raises(condukt.ModelError):
            await agent.run("two")
        # The failed run kept its completed turn (not the one in flight), and
        # the history was compacted after it: 5 messages cut to the last 3.
        assert [m.text for m in await agent.history()] == ["two", "", "slept"]


async def test_compact_during_a_run_waits_for_it(autojump_clock: trio.testing.MockClock) -> None:
    model = ScriptedModel([call("sleep", {"seconds": 100}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Sleep], compactor=Sliding(keep=10))
        async with trio.open_nursery() as nursery:
            results: list[str] = []

            async def run() -> None:
                results.append(await agent.run("wait"))

            nursery.start_soon(run)
            await trio.sleep(10)
            assert agent.running
            assert await agent.compact() == 0  # waited its turn: the run ended first
            assert not agent.running and len(await agent.history()) == 4
        assert [m.text for m in await agent.history()] == ["wait", "", "slept", "done"]


# --------------------------------------------------------------------------- custom compactors


class DropsCalls:
    """Broken: keeps tool results but drops the assistant messages that asked for them."""

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        return [m for m in messages if not isinstance(m, AssistantMessage)]


class DropsResults:
    """Broken: keeps tool calls but drops their results."""

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        return [m for m in messages if not isinstance(m, ToolResultMessage)]


class MovesResults:
    """Broken: puts every tool result at the end, far from its call."""

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        return [m for m in messages if not isinstance(m, ToolResultMessage)] + results


class Summarises:
    """A valid custom compactor: a summary in place of all but the last exchange."""

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        last = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        if last == 0:
            return list(messages)
        return [user(f"(summary of {last} earlier messages)"), says("noted"), *messages[last:]]


@pytest.mark.parametrize(
    ("compactor", "problem"),
    [
        (DropsCalls(), "DropsCalls separated tool result 'a' from its call"),
        (DropsResults(), "DropsResults separated tool call 'a' from its result"),
        (MovesResults(), "MovesResults separated tool call 'a' from its result"),
    ],
    ids=["result-without-call", "call-without-result", "result-moved-away"],
)
async def test_compact_with_rejects_a_compactor_that_breaks_pairing(compactor: Any, problem: str) -> None:
    with pytest.raises(ValueError) as failure:
        await compact_with(compactor, HISTORY)
    assert str(failure.value) == problem


async def test_compact_with_rejects_a_history_that_does_not_start_with_the_user() -> None:
    class KeepsFromTheAnswer:
        async def compact(self, messages: Sequence[Message]) -> list[Message]:
            return list(messages[-1:])

    with pytest.raises(
        ValueError,
        match="KeepsFromTheAnswer left a history starting with AssistantMessage; it must start with a UserMessage",
    ):
        await compact_with(KeepsFromTheAnswer(), HISTORY)


async def test_a_valid_custom_compactor_runs_after_each_run() -> None:
    model = ScriptedModel([call("echo"), reply("1"), reply("2")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Echo], compactor=Summarises())
        await agent.run("one")
        await agent.run("two")
        history = await agent.history()
    assert [m.text for m in history] == ["(summary of 4 earlier messages)", "noted", "two", "2"]


async def test_agent_compact_reports_a_broken_compactor_to_its_caller() -> None:
    # A rejected compaction is the caller's error: the agent keeps its
    # (uncompacted) conversation and stays alive.
    compactor = Adjustable()
    model = ScriptedModel([call("echo"), reply("1")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Echo], compactor=compactor)
        await agent.run("one")
        before = await agent.history()
        compactor.compact = DropsCalls().compact  # type: ignore[method-assign]
        with pytest.raises(ValueError, match="separated tool result"):
            await agent.compact()
        assert agent.alive
        assert await agent.history() == before


@pytest.mark.parametrize("bad", [object(), Sliding], ids=["object", "class-not-instance"])
async def test_something_that_is_not_a_compactor_is_refused_at_spawn(bad: Any) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(TypeError, match="compactor must have an async compact"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), compactor=bad)
