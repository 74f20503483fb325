"""Handoffs: the conversation goes to another agent, whose answer ends the run; cycles and crashes are typed."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt
from condukt.agent import HandoffCycle, HandoffFailed
from condukt.events import Event, HandedOff, SubagentEvent, TextDelta
from condukt.messages import AssistantMessage, ToolResultMessage, UserMessage
from condukt.testing import FunctionModel, ScriptedModel, call, reply


class Lookup(condukt.Tool):
    """Only the specialist has it."""

    name = "lookup_invoice"
    description = "Look an invoice up."
    parameters = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        return f"invoice {args['id']}: paid"


class Billing(condukt.Agent):
    """Answers billing questions."""

    system_prompt = "You are the billing specialist."
    load_project_instructions = False

    def tools(self) -> list[Any]:
        return [Lookup]


class Triage(condukt.Agent):
    """Routes the user to the right specialist."""

    system_prompt = "You route users."
    load_project_instructions = False

    def tools(self) -> list[Any]:
        return [condukt.handoff(Billing, model=billing_model())]


_BILLING: list[Any] = []


def billing_model() -> Any:
    return _BILLING[-1]


async def test_triage_hands_off_to_a_specialist_whose_answer_is_the_run_result(autojump_clock: trio.abc.Clock) -> None:
    specialist = ScriptedModel([call("lookup_invoice", {"id": "42"}, id="l1"), reply("Invoice 42 is paid.")])
    _BILLING.append(specialist)
    triage_model = ScriptedModel([call("transfer_to_billing", {"reason": "billing question"}, id="h1")])
    events: list[Event] = []

    async def record(event: Event) -> None:
        events.append(event)

    async with condukt.open_node() as node:
        triage = await node.spawn(Triage, model=triage_model)
        answer = await triage.run("Was invoice 42 paid?", on_event=record)
        assert answer == "Invoice 42 is paid."
        history = await triage.history()
        assert triage.alive
    # The specialist's own instructions and tools applied, and it got the conversation.
    request = specialist.requests[0]
    assert request.system_prompt == "You are the billing specialist."
    assert [t.name for t in request.tools] == ["lookup_invoice"]
    assert [type(m) for m in request.messages] == [UserMessage]
    assert request.messages[0].text == "Was invoice 42 paid?"
    # Its events reached the caller, after the handoff's own.
    handed = [e for e in events if isinstance(e, HandedOff)]
    assert len(handed) == 1 and handed[0].target == "transfer_to_billing"
    forwarded = [e for e in events if isinstance(e, SubagentEvent)]
    assert forwarded and all(e.role == "transfer_to_billing" and e.agent_id == handed[0].agent_id for e in forwarded)
    assert any(isinstance(e.event, TextDelta) for e in forwarded)
    # The triage agent's history records the handoff and its answer: consistent, ready for the next run.
    assert [type(m) for m in history] == [UserMessage, AssistantMessage, ToolResultMessage]
    assert history[2].text == "Invoice 42 is paid."


async def test_the_history_goes_over_through_the_filter(autojump_clock: trio.abc.Clock) -> None:
    specialist = ScriptedModel([reply("ok")])
    kept: list[int] = []

    def last_two(history: Any) -> Any:
        kept.append(len(history))
        return history[-2:]

    class Desk(condukt.Agent):
        load_project_instructions = False

        def tools(self) -> list[Any]:
            return [condukt.handoff(Billing, model=specialist, input_filter=last_two, name="to_billing")]

    model = ScriptedModel([reply("hello"), reply("sure"), call("to_billing", id="h1")])
    async with condukt.open_node() as node:
        desk = await node.spawn(Desk, model=model)
        await desk.run("hi")
        await desk.run("one more thing")
        assert await desk.run("my invoice?") == "ok"
    assert kept == [5]  # hi, hello, one more thing, sure, my invoice?
    assert [m.text for m in specialist.requests[0].messages] == ["sure", "my invoice?"]


class Ping(condukt.Agent):
    load_project_instructions = False

    def tools(self) -> list[Any]:
        return [condukt.handoff(Pong, model=FunctionModel(lambda r: call("transfer_to_ping", id="p2")))]


class Pong(condukt.Agent):
    load_project_instructions = False

    def tools(self) -> list[Any]:
        return [condukt.handoff(Ping, model=FunctionModel(lambda r: call("transfer_to_pong", id="p3")))]


async def test_a_handoff_cycle_fails_the_run_with_a_typed_error(autojump_clock: trio.abc.Clock) -> None:
    async with condukt.open_node() as node:
        ping = await node.spawn(Ping, model=ScriptedModel([call("transfer_to_pong", id="p1")]))
        with pytest.raises(HandoffCycle) as caught:
            await ping.run("go")
        assert caught.value.chain == ("Ping", "Pong", "Ping")
        assert ping.alive


class Crashing(condukt.Agent):
    load_project_instructions = False

    async def init(self, options: Any) -> None:
        raise RuntimeError("specialist is broken")


async def test_a_target_that_crashes_fails_the_run_typed_and_the_agent_survives(autojump_clock: trio.abc.Clock) -> None:
    class Front(condukt.Agent):
        load_project_instructions = False

        def tools(self) -> list[Any]:
            return [condukt.handoff(Crashing, model=ScriptedModel([]))]

    model = ScriptedModel([call("transfer_to_crashing", id="h1"), reply("still here")])
    async with condukt.open_node() as node:
        front = await node.spawn(Front, model=model)
        with pytest.raises(HandoffFailed) as caught:
            await front.run("help")
        assert caught.value.target == "transfer_to_crashing"
        assert front.alive
        assert await front.run("anyone?") == "still here"


async def test_a_target_whose_run_crashes_midway_fails_the_run_typed(autojump_clock: trio.abc.Clock) -> None:
    class Boom(condukt.Tool):
        name = "boom"
        description = "Crashes its agent."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
            context.agent.kill()
            await trio.sleep_forever()
            return ""

    class Fragile(condukt.Agent):
        load_project_instructions = False

        def tools(self) -> list[Any]:
            return [Boom]

    class Front(condukt.Agent):
        load_project_instructions = False

        def tools(self) -> list[Any]:
            return [condukt.handoff(Fragile, model=ScriptedModel([call("boom", id="b1")]))]

    async with condukt.open_node() as node:
        front = await node.spawn(Front, model=ScriptedModel([call("transfer_to_fragile", id="h1")]))
        with pytest.raises(HandoffFailed, match="crashed"):
            await front.run("help")
        assert front.alive


async def test_aborting_the_run_stops_the_target(autojump_clock: trio.abc.Clock) -> None:
    started = trio.Event()

    async def slow(request: condukt.ModelRequest) -> Any:
        started.set()
        await trio.sleep_forever()

    class Front(condukt.Agent):
        load_project_instructions = False

        def tools(self) -> list[Any]:
            return [condukt.handoff(Billing, model=FunctionModel(slow))]

    async with condukt.open_node() as node:
        front = await node.spawn(Front, model=ScriptedModel([call("transfer_to_billing", id="h1")]))
        async with trio.open_nursery() as nursery:
            failures: list[BaseException] = []

            async def ask() -> None:
                try:
                    await front.run("help")
                except condukt.Aborted as exc:
                    failures.append(exc)

            nursery.start_soon(ask)
            await started.wait()
            assert await front.abort()
        assert len(failures) == 1
        assert await front.history() == ()
        assert front.alive


def test_handoff_checks_its_arguments() -> None:
    with pytest.raises(TypeError):
        condukt.handoff("Billing")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        condukt.handoff(Billing, input_filter="all")  # type: ignore[arg-type]
    assert condukt.handoff(Billing).name == "transfer_to_billing"
