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
from condukt.sessions import MemoryStore
from condukt.testing import FunctionModel, Reply, ScriptedModel, call, reply

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


async def run_steps(
    summarize: Summarize, turns: int = 40, *, events: list[Event] | None = None, store: Any = None
) -> tuple[str | BaseException, list[int], list[Message], FunctionModel]:
    """A ``turns``-step tool run under ``summarize``: its outcome, request sizes, history and model."""
    sizes: list[int] = []
    model = worker(turns, sizes)
    log = events if events is not None else []

    async def on_event(event: Event) -> None:
        log.append(event)

    async with condukt.open_node() as node:
        options: dict[str, Any] = {} if store is None else {"session_store": store, "session_store_key": "k"}
        agent = await node.spawn(condukt.Agent, model=model, tools=[work], compactor=summarize, **options)
        outcome: str | BaseException
        try:
            outcome = await agent.run("Do the steps.", max_turns=500, on_event=on_event)
        except condukt.AgentError as exc:
            outcome = exc
        history = await agent.history()
    return outcome, sizes, history, model


def hanging(cancelled: list[bool], called: trio.Event | None = None) -> FunctionModel:
    async def respond(request: ModelRequest) -> Any:
        if called is not None:
            called.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.append(True)

    return FunctionModel(respond, name="hangs")


def failing(request: ModelRequest) -> Any:
    raise ModelError("summariser unavailable")


@pytest.mark.parametrize(
    ("summariser_model", "reason"),
    [
        (FunctionModel(failing), "summariser unavailable"),
        (FunctionModel(lambda request: reply("   ")), "answered nothing"),
    ],
    ids=["error", "empty"],
)
async def test_a_summariser_that_fails_or_answers_nothing_falls_back_and_says_so(
    autojump_clock: Any, summariser_model: FunctionModel, reason: str
) -> None:
    events: list[Event] = []
    fallback = Sliding(keep=4)
    outcome, sizes, history, _ = await run_steps(
        Summarize(max_tokens=3000, model=summariser_model, fallback=fallback), events=events
    )
    assert outcome == "all steps done"
    assert max(sizes) <= 3000
    fallbacks = [e for e in events if isinstance(e, CompactionFallback)]
    assert fallbacks and reason in fallbacks[0].reason
    # Sliding cannot cut a one-prompt tool run: older messages were left out with a note instead.
    assert fallbacks[0].compactor == "Sliding" and fallbacks[0].dropped
    assert not any(isinstance(e, Summarized) for e in events)
    assert sum(isinstance(m, ToolResultMessage) for m in history) == 40  # all kept for audit


async def test_a_hanging_summariser_times_out_its_process_is_stopped_and_the_fallback_compacts(
    autojump_clock: Any,
) -> None:
    events: list[Event] = []
    cancelled: list[bool] = []
    prune = condukt.compaction.ToolResultPrune(keep_recent=2, max_size=100)
    outcome, sizes, _, model = await run_steps(
        Summarize(max_tokens=3000, model=hanging(cancelled), timeout=30, fallback=prune), events=events
    )
    assert outcome == "all steps done"
    assert max(sizes) <= 3000
    fallbacks = [e for e in events if isinstance(e, CompactionFallback)]
    assert fallbacks[0].reason == "the summariser did not answer within 30s"
    assert fallbacks[0].compactor == "ToolResultPrune"
    assert cancelled  # its request was cancelled with its process
    assert any("tool result elided" in m.text for m in model.requests[-1].messages)


async def test_a_summary_longer_than_its_budget_is_cut_to_it(autojump_clock: Any) -> None:
    events: list[Event] = []
    wordy = FunctionModel(lambda request: reply("very long summary " * 2000))
    outcome, sizes, _, model = await run_steps(
        Summarize(max_tokens=3000, model=wordy, summary_tokens=300), events=events
    )
    assert outcome == "all steps done"
    assert max(sizes) <= 3000
    summarised = [e for e in events if isinstance(e, Summarized)]
    assert summarised and all(e.truncated for e in summarised)
    summary = model.requests[-1].messages[0].text
    assert summary.endswith("[summary cut to its budget]")
    assert len(summary) < 300 * 4


async def test_a_prompt_larger_than_max_tokens_fails_the_run_with_a_typed_error(autojump_clock: Any) -> None:
    model = ScriptedModel([reply("never")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, compactor=Summarize(max_tokens=1000, model=summariser(), fallback=None)
        )
        with pytest.raises(ContextTooLong, match="max_tokens=1000"):
            await agent.run("x" * 20_000)
        assert await agent.history() == ()  # the run left nothing behind
        assert model.requests == []


async def test_an_abort_during_a_summary_stops_the_summariser_and_leaves_the_history_consistent(
    autojump_clock: Any,
) -> None:
    cancelled: list[bool] = []
    sizes: list[int] = []
    model = worker(100, sizes)
    summarising = trio.Event()
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            tools=[work],
            compactor=Summarize(max_tokens=3000, model=hanging(cancelled, summarising), timeout=3600, ahead=None),
        )
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                with pytest.raises(condukt.Aborted):
                    await agent.run("Do the steps.", max_turns=500)

            nursery.start_soon(go)
            await summarising.wait()
            await agent.abort()
        history = await agent.history()
    assert cancelled == [True]  # the summariser's request was cancelled with its process
    well_formed(history)
    assert not any("[condukt:summary" in m.text for m in history)
    assert sum(isinstance(m, ToolResultMessage) for m in history) == len(sizes)  # every completed turn kept


async def test_a_steer_during_a_summary_is_taken_at_once_and_reaches_the_next_request(autojump_clock: Any) -> None:
    sizes: list[int] = []
    model = worker(30, sizes)
    asked = trio.Event()
    release = trio.Event()

    async def slow(request: ModelRequest) -> Any:
        asked.set()
        await release.wait()
        return reply("Steps 1 to N were done.")

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[work], compactor=Summarize(max_tokens=3000, model=FunctionModel(slow))
        )
        async with trio.open_nursery() as nursery:
            result: list[str] = []

            async def go() -> None:
                result.append(await agent.run("Do the steps.", max_turns=500))

            nursery.start_soon(go)
            await asked.wait()
            with trio.fail_after(1):  # virtual time: the steer does not wait for the summary
                await agent.steer("also note the weather")
            release.set()
    assert result == ["all steps done"]
    after = [r for r in model.requests if any("also note the weather" in m.text for m in r.messages)]
    assert after and after[0].messages[0].text.startswith("Summary of the conversation so far:")


async def test_summary_and_boundary_are_saved_and_a_restarted_agent_uses_them(
    autojump_clock: Any, tmp_path: Any
) -> None:
    store = MemoryStore()
    outcome, _, history, _ = await run_steps(
        Summarize(max_tokens=3000, model=summariser(text="Forty steps done."), ahead=None), store=store
    )
    assert outcome == "all steps done"
    model = ScriptedModel([reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            tools=[work],
            session_store=store,
            session_store_key="k",
            compactor=Summarize(max_tokens=3000, model=summariser(), ahead=None),
        )
        assert await agent.history() == history  # everything summarised is still there, for audit
        await agent.run("Anything else?")
    first = model.requests[0].messages
    assert first[0].text.startswith("Summary of the conversation so far:\nForty steps done.")
    assert list(first[:-1]) == model_view(history) and len(first) < len(history)
    assert first[-1].text == "Anything else?"


async def test_a_summary_is_prepared_ahead_between_runs_by_the_ahead_model(autojump_clock: Any) -> None:
    main_summaries: list[str] = []
    ahead_summaries: list[str] = []
    prepared = trio.Event()

    def ahead_respond(request: ModelRequest) -> Any:
        ahead_summaries.append(request.messages[-1].text)
        prepared.set()
        return reply("Prepared ahead: twenty steps done.")

    sizes: list[int] = []
    model = worker(20, sizes)
    events: list[Event] = []

    async def on_event(event: Event) -> None:
        events.append(event)

    settings = Summarize(
        max_tokens=3000, model=summariser(main_summaries), ahead=0.5, ahead_model=FunctionModel(ahead_respond)
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[work], compactor=settings)
        await agent.run("Do twenty steps.", max_turns=500)
        assert model.requests[-1].messages[0].text == "Do twenty steps."  # no summary needed during the run
        with trio.fail_after(60):
            await prepared.wait()  # made while the agent is idle
        before = len(model.requests)
        await agent.run("Now summarise what you did.", on_event=on_event)
    assert main_summaries == [] and len(ahead_summaries) == 1
    request = model.requests[before]
    assert request.messages[0].text.startswith("Summary of the conversation so far:\nPrepared ahead")
    assert request.messages[-1].text == "Now summarise what you did."
    (summarised,) = [e for e in events if isinstance(e, Summarized)]
    assert summarised.ahead and summarised.tokens_after < summarised.tokens_before


async def test_compact_summarises_now_and_keeps_every_message(autojump_clock: Any) -> None:
    model = ScriptedModel([reply("one"), reply("two"), reply("three"), reply("four")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            compactor=Summarize(max_tokens=3000, model=summariser(text="We said one and two."), keep_last=2),
        )
        for prompt in ["a", "b", "c"]:
            await agent.run(prompt)
        assert await agent.compact() == 0
        history = await agent.history()
        await agent.run("d")
    assert len(history) == 6
    sent = model.requests[-1].messages
    # The kept part starts with the user's "c": it joins the summary's user message.
    assert [b.text for b in sent[0].content] == ["Summary of the conversation so far:\nWe said one and two.", "c"]
    assert [m.text for m in sent[1:]] == ["three", "d"]


def test_bad_settings_are_refused_with_clear_errors() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        Summarize(max_tokens=0)
    with pytest.raises(ValueError, match="keep_last"):
        Summarize(max_tokens=100, keep_last=-1)
    with pytest.raises(ValueError, match="ahead"):
        Summarize(max_tokens=100, ahead=1.5)
    with pytest.raises(ValueError, match="timeout"):
        Summarize(max_tokens=100, timeout=0)
    with pytest.raises(TypeError, match="model"):
        Summarize(max_tokens=100, model=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fallback"):
        Summarize(max_tokens=100, fallback=Sliding)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="summary_tokens"):
        Summarize(max_tokens=100, summary_tokens=60)
