"""Tool approvals: calls that wait for a person, across crashes and node restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from waiting import Watched

import condukt
from condukt.events import AgentEnd, ApprovalDecided, ApprovalRequested, Done, Event
from condukt.messages import AssistantMessage, ToolResultMessage, UserMessage
from condukt.sessions import DiskStore, Snapshot, SQLiteStore
from condukt.testing import ScriptedModel, call, reply

from ..helpers import Recorder, SavesSeen, result_in, wait_pending


class Transfer(condukt.Tool):
    """Moves money: its side effect is the ``ledger`` list."""

    name = "transfer"
    description = "Transfers money."
    parameters = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}
    requires_approval = True

    def __init__(self, ledger: list[int], **opts: Any) -> None:
        super().__init__(**opts)
        self.ledger = ledger

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        self.ledger.append(args["amount"])
        return f"sent {args['amount']}"


async def test_the_tool_runs_only_after_approval(autojump_clock: trio.abc.Clock) -> None:
    ledger: list[int] = []
    model = ScriptedModel([call("transfer", {"amount": 5}, id="c1"), reply("sent it")])
    events: list[Event] = []

    async def record(event: Event) -> None:
        events.append(event)

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Transfer(ledger)], load_project_instructions=False)
        async with trio.open_nursery() as nursery:
            answers: list[str] = []

            async def ask() -> None:
                answers.append(await agent.run("pay 5", on_event=record))

            nursery.start_soon(ask)
            (pending,) = await wait_pending(agent)
            assert (pending.call_id, pending.tool, pending.arguments) == ("c1", "transfer", {"amount": 5})
            await trio.sleep(60)  # the call waits as long as it takes
            assert ledger == []
            await agent.approve("c1")
        assert answers == ["sent it"]
    assert ledger == [5]
    assert ApprovalRequested("c1", "transfer", {"amount": 5}, None) in events
    assert ApprovalDecided("c1", "transfer", True, "") in events
    result = model.requests[-1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.text == "sent 5" and not result.is_error


async def test_a_denial_reaches_the_model_and_the_tool_never_runs(autojump_clock: trio.abc.Clock) -> None:
    ledger: list[int] = []
    model = ScriptedModel([call("transfer", {"amount": 500}, id="c1"), reply("ok, not sent")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Transfer(ledger)], load_project_instructions=False)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "pay 500")
            await wait_pending(agent)
            await agent.deny("c1", "too much money")
        assert await agent.pending_approvals() == ()
        with pytest.raises(condukt.agent.UnknownApproval):
            await agent.approve("c1")  # decided already
    assert ledger == []
    result = model.requests[-1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.is_error
    assert "too much money" in result.text


async def test_unknown_call_id_is_a_typed_error_in_the_caller(autojump_clock: trio.abc.Clock) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([]), load_project_instructions=False)
        with pytest.raises(condukt.agent.UnknownApproval) as error:
            await agent.deny("nope", "x")
        assert error.value.call_id == "nope"
        assert agent.alive


async def test_approval_timeout_denies_the_call(autojump_clock: trio.abc.Clock) -> None:
    ledger: list[int] = []
    model = ScriptedModel([call("transfer", {"amount": 1}, id="c1"), reply("gave up")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[Transfer(ledger)], approval_timeout=30, load_project_instructions=False
        )
        start = trio.current_time()
        # The run's own timeout (10s) does not count the time waiting for a person.
        assert await agent.run("pay 1", timeout=10) == "gave up"
        assert trio.current_time() - start == pytest.approx(30, abs=1)
    assert ledger == []
    result = model.requests[-1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.is_error and "approval timeout" in result.text


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
async def test_two_approvals_in_one_turn_in_either_order(
    order: tuple[str, str], autojump_clock: trio.abc.Clock
) -> None:
    ledger: Watched[int] = Watched()
    looked: list[str] = []

    @condukt.tool
    async def look() -> str:
        """Looks (needs no approval)."""
        looked.append("x")
        return "looked"

    model = ScriptedModel(
        [
            [call("transfer", {"amount": 1}, id="a"), call("look", id="l"), call("transfer", {"amount": 2}, id="b")],
            reply("both"),
        ]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[Transfer(ledger), look], load_project_instructions=False
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "pay twice")
            pending = await wait_pending(agent, 2)
            assert {p.call_id for p in pending} == {"a", "b"}
            assert looked == ["x"]  # the turn's other call ran meanwhile
            await agent.approve(order[0])
            await ledger.wait_for_length(1)
            await trio.testing.wait_all_tasks_blocked()  # the other call goes on waiting
            assert ledger == [1 if order[0] == "a" else 2]
            await agent.approve(order[1])
    assert sorted(ledger) == [1, 2]
    results = [m for m in model.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["a", "l", "b"]  # call order, whatever the decision order


async def test_a_predicate_decides_which_calls_wait(autojump_clock: trio.abc.Clock) -> None:
    ledger: list[int] = []
    model = ScriptedModel([[call("transfer", {"amount": 5}, id="s"), call("transfer", {"amount": 900}, id="big")], reply("ok")])
    tool = Transfer(ledger, requires_approval=lambda args: args["amount"] > 100)
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[tool], load_project_instructions=False)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "pay")
            (pending,) = await wait_pending(agent)
            assert pending.call_id == "big"
            assert ledger == [5]
            await agent.approve("big")
    assert ledger == [5, 900]


async def test_arguments_in_events_and_pending_list_are_redacted(autojump_clock: trio.abc.Clock) -> None:
    ledger: list[int] = []
    events: list[Event] = []

    class Login(Transfer):
        name = "login"
        parameters = {"type": "object", "properties": {"password": {"type": "string"}}}

    async def record(event: Event) -> None:
        events.append(event)

    model = ScriptedModel([call("login", {"password": "hunter2-secret"}, id="c"), reply("in")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            tools=[Login(ledger)],
            secrets={"PASSWORD": condukt.secrets.static("hunter2-secret")},
            load_project_instructions=False,
        )
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                await agent.run("log in", on_event=record)

            nursery.start_soon(ask)
            (pending,) = await wait_pending(agent)
            assert "hunter2" not in repr(pending)
            await agent.approve("c")
    requested = [e for e in events if isinstance(e, ApprovalRequested)]
    assert requested and "hunter2" not in repr(requested)


def agent_spec(
    model: Any, ledger: list[int], tmp_path: Path, store: Any, incarnations: list[condukt.AgentHandle] | None = None
) -> condukt.ChildSpec:
    return condukt.ChildSpec(
        "agent",
        Recorder,
        kwargs={
            "model": model,
            "tools": [Transfer(ledger)],
            "cwd": tmp_path,
            "session_store": store,
            "id": "payer",
            "load_project_instructions": False,
            "incarnations": incarnations,
        },
        name="payer",
    )


@pytest.mark.parametrize("kind", ["disk", "sqlite"])
async def test_a_pending_approval_survives_a_crash_and_supervisor_restart(kind: str, tmp_path: Path) -> None:
    ledger: list[int] = []
    inner = DiskStore() if kind == "disk" else SQLiteStore()
    saves: Watched[Snapshot] = Watched()
    incarnations: Watched[condukt.AgentHandle] = Watched()
    model = ScriptedModel([[call("transfer", {"amount": 7}, id="c1"), call("transfer", {"amount": 8}, id="c2")], reply("all paid")])
    ended: list[Event] = []
    async with condukt.open_node() as node:
        await node.start_supervisor([agent_spec(model, ledger, tmp_path, SavesSeen(inner, saves), incarnations)])
        first = node.whereis("payer", condukt.AgentHandle)
        assert first is not None
        async with node.subscribe("payer") as events:  # the agent's session id is its id
            caller_saw: list[BaseException] = []
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    try:
                        await first.run("pay 7 and 8")
                    except condukt.CallError as exc:
                        caller_saw.append(exc)

                nursery.start_soon(ask)
                await wait_pending(first, 2)
                await first.approve("c1")
                # c1 has run and its result is in the snapshot (a call still running at
                # the crash would be reported interrupted instead: another test).
                await saves.wait_until(lambda: any(result_in(snapshot, "c1") for snapshot in saves))
                assert ledger == [7]
                first.kill()  # the OTP API: an untrappable exit, the supervisor restarts it
            assert len(caller_saw) == 1  # the caller is gone; the result goes to subscribers
            _, second = await incarnations.wait_for_length(2)
            assert node.whereis("payer") is second
            (pending,) = await wait_pending(second)
            assert (pending.call_id, pending.arguments) == ("c2", {"amount": 8})
            assert ledger == [7]
            await second.approve("c2")
            with trio.fail_after(5):
                async for published in events:
                    ended.append(published.event)
                    if isinstance(published.event, Done):
                        break
        result = await second.last_result()
        assert result is not None and (result.status, result.value) == ("completed", "all paid")
        history = await second.history()
    assert ledger == [7, 8]
    assert any(isinstance(e, AgentEnd) and e.text == "all paid" for e in ended)
    assert [type(m) for m in history] == [UserMessage, AssistantMessage, ToolResultMessage, ToolResultMessage, AssistantMessage]
    assert [m.text for m in history if isinstance(m, ToolResultMessage)] == ["sent 7", "sent 8"]
    if isinstance(inner, SQLiteStore):
        await inner.aclose()


async def test_a_pending_approval_survives_a_node_restart(tmp_path: Path) -> None:
    ledger: list[int] = []
    log: Watched[Event] = Watched()
    async with condukt.open_node() as node:
        await node.start_supervisor(
            [agent_spec(ScriptedModel([call("transfer", {"amount": 3}, id="c1")]), ledger, tmp_path, DiskStore())]
        )
        agent = node.whereis("payer", condukt.AgentHandle)
        assert agent is not None
        await agent.follow_up("pay 3")  # a run nobody waits for
        await wait_pending(agent)
        # Leaving the block shuts the whole node down with the call still pending.
    # A new node, as after a deploy: the same store directory, a fresh model for what is left.
    model = ScriptedModel([reply("paid 3")])
    async with condukt.open_node() as node:
        spec = agent_spec(model, ledger, tmp_path, DiskStore())
        await node.start_supervisor([attrs.evolve(spec, kwargs={**spec.kwargs, "log": log})])
        agent = node.whereis("payer", condukt.AgentHandle)
        assert agent is not None
        (pending,) = await wait_pending(agent)
        assert pending.call_id == "c1" and ledger == []
        await agent.approve("c1")
        await log.wait_until(lambda: any(isinstance(event, Done) for event in log))
        result = await agent.last_result()
        assert result is not None and (result.status, result.value) == ("completed", "paid 3")
    assert ledger == [3]
    assert [m.text for m in model.requests[0].messages] == ["pay 3", "", "sent 3"]


async def test_a_call_running_at_the_crash_is_asked_again_and_a_denial_reaches_the_model(tmp_path: Path) -> None:
    """A non-idempotent call that needs approval and was running at the crash: the person decides again."""
    started: Watched[str] = Watched()
    incarnations: Watched[condukt.AgentHandle] = Watched()
    log: Watched[Event] = Watched()

    class Deploy(condukt.Tool):
        name = "deploy"
        description = "Deploys."
        requires_approval = True

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
            started.append(context.tool_call_id)
            if len(started) == 1:
                await trio.sleep_forever()  # still deploying when the agent dies
            return "deployed"

    model = ScriptedModel([[call("deploy", id="d1"), call("deploy", id="d2")], reply("one of two deployed")])
    spec = condukt.ChildSpec(
        "agent",
        Recorder,
        kwargs={"model": model, "tools": [Deploy], "cwd": tmp_path, "session_store": DiskStore(), "id": "ops",
                "load_project_instructions": False, "incarnations": incarnations, "log": log},
        name="ops",
    )
    async with condukt.open_node() as node:
        await node.start_supervisor([spec])
        first = node.whereis("ops", condukt.AgentHandle)
        assert first is not None
        await first.follow_up("deploy twice")
        await wait_pending(first, 2)
        await first.approve("d1")
        await started.wait_for_length(1)
        first.kill()
        _, second = await incarnations.wait_for_length(2)
        assert node.whereis("ops") is second
        # d1 may or may not have deployed: its approval is asked again, with d2's.
        pending = await wait_pending(second, 2)
        assert sorted(p.call_id for p in pending) == ["d1", "d2"]
        await second.deny("d1", "it may have deployed already")
        await second.approve("d2")
        await log.wait_until(lambda: any(isinstance(event, Done) for event in log))
        result = await second.last_result()
        assert result is not None and result.value == "one of two deployed"
    assert started == ["d1", "d2"]  # d1 was not re-issued
    d1, d2 = [m for m in model.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert d1.is_error and "it may have deployed already" in d1.text
    assert d2.text == "deployed"


async def test_abort_ends_the_wait_and_nothing_stays_pending(tmp_path: Path) -> None:
    ledger: list[int] = []
    model = ScriptedModel([call("transfer", {"amount": 9}, id="c1")])
    store = DiskStore()
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[Transfer(ledger)], cwd=tmp_path, session_store=store, id="a",
            load_project_instructions=False,
        )
        async with trio.open_nursery() as nursery:
            failures: list[BaseException] = []

            async def ask() -> None:
                try:
                    await agent.run("pay 9")
                except condukt.Aborted as exc:
                    failures.append(exc)

            nursery.start_soon(ask)
            await wait_pending(agent)
            assert await agent.abort()
        assert len(failures) == 1
        assert await agent.pending_approvals() == ()
        result = await agent.last_result()
        assert result is not None and result.status == "aborted"
    snapshot = await DiskStore().bind(tmp_path).load("a")
    assert snapshot is None or snapshot.run is None  # nothing to resume after a restart
    assert ledger == []


def test_requires_approval_takes_a_bool_or_a_predicate() -> None:
    ledger: list[int] = []
    with pytest.raises(TypeError, match="requires_approval"):
        Transfer(ledger, requires_approval="yes")
    tool = Transfer(ledger, requires_approval=False, limit=3)
    assert tool.opts == {"limit": 3}  # not an option the tool sees
    assert not tool.needs_approval({"amount": 1})

    class Method(Transfer):
        def requires_approval(self, args: dict[str, Any]) -> bool:  # type: ignore[override]
            return bool(args["amount"] > 10)

    assert Method(ledger).needs_approval({"amount": 11}) and not Method(ledger).needs_approval({"amount": 1})
    broken = Transfer(ledger, requires_approval=lambda args: args["missing"])
    assert broken.needs_approval({"amount": 1})  # a predicate that fails asks
