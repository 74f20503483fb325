"""Tool calls at most once unless idempotent: journaled as started then with their result; the resume rules."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import trio
from waiting import Watched

import condukt
from condukt.events import Done, Event
from condukt.messages import AssistantMessage, ToolResultMessage
from condukt.sessions import Lease, MemoryStore, Snapshot
from condukt.testing import ScriptedModel, call, reply
from condukt.tools import Bash, Command, Edit, Glob, Grep, Read, Write

from ..helpers import Recorder


class JournalSeen(MemoryStore):
    """A MemoryStore that reports each tool journal entry once it is written: ``(call_id, finished)``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.entries: Watched[tuple[str, bool]] = Watched()

    async def _append_tool(self, lease: Lease, run_id: str, call_id: str, name: str, result: Any) -> None:
        await super()._append_tool(lease, run_id, call_id, name, result)
        self.entries.append((call_id, result is not None))


class Effect(condukt.Tool):
    """``effect``: records each call's label in ``ran``; a label in ``hang`` blocks until the agent dies (once)."""

    description = "Has an effect."
    parameters = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}

    def __init__(self, name: str, ran: Watched[str], hang: set[str], **opts: Any) -> None:
        super().__init__(**opts)
        self.name = name
        self.ran = ran
        self.hang = hang

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        label = args["label"]
        self.ran.append(label)
        if label in self.hang:
            self.hang.discard(label)
            await trio.sleep(math.inf)
        return f"{self.name} did {label}"


async def test_each_call_is_journaled_as_started_before_it_runs_and_with_its_result_after(tmp_path: Path) -> None:
    store = JournalSeen()
    seen_during: list[Snapshot | None] = []

    class Peek(condukt.Tool):
        name = "peek"
        description = "Looks at the stored session while it runs."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
            seen_during.append(await store.load("j1"))
            return "peeked"

    model = ScriptedModel([call("peek", id="p1"), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[Peek], cwd=tmp_path, session_store=store, id="j1",
            load_project_instructions=False,
        )  # fmt: skip
        assert await agent.run("go") == "done"
        await agent.stop()
    (during,) = seen_during
    # While the call ran, the turn in flight was stored, with the call journaled as started.
    assert during is not None and during.run is not None
    assert isinstance(during.messages[-1], AssistantMessage) and during.messages[-1].tool_calls[0].id == "p1"
    assert during.run.started == ("p1",) and during.run.results == ()
    assert list(store.entries) == [("p1", False), ("p1", True)]
    final = await store.load("j1")
    assert final is not None and final.run is None
    assert [type(m) for m in final.messages][-2:] == [ToolResultMessage, AssistantMessage]


async def test_after_a_crash_resume_keeps_saved_results_reruns_idempotent_calls_and_reports_the_others_interrupted(
    tmp_path: Path,
) -> None:
    store = JournalSeen()
    ran: Watched[str] = Watched()
    hang = {"b", "c"}
    pay = Effect("pay", ran, hang)  # not idempotent
    look = Effect("look", ran, hang, idempotent=True)
    incarnations: Watched[condukt.AgentHandle] = Watched()
    log: Watched[Event] = Watched()
    model = ScriptedModel(
        [
            [call("pay", {"label": "a"}, id="a"), call("look", {"label": "b"}, id="b"),
             call("pay", {"label": "c"}, id="c"), call("pay", {"label": "d"}, id="d")],
            reply("finished"),
        ]
    )  # fmt: skip

    class Gate(condukt.agent.Capability):
        """Holds call d back in the first incarnation: it never starts before the crash."""

        def __init__(self) -> None:
            self.first = True

        async def gate_tool_call(self, run: condukt.agent.Run, call: Any) -> ToolResultMessage | None:
            if call.id == "d" and self.first:
                self.first = False
                await trio.sleep(math.inf)
            return None

    gate = Gate()
    spec = condukt.ChildSpec(
        "agent",
        Recorder,
        kwargs={"model": model, "tools": [pay, look], "cwd": tmp_path, "session_store": store, "id": "j2",
                "resume": True, "load_project_instructions": False, "incarnations": incarnations, "log": log,
                "capabilities": [gate]},
        name="j2",
    )  # fmt: skip
    async with condukt.open_node() as node:
        await node.start_supervisor([spec])
        (first,) = await incarnations.wait_for_length(1)
        await first.follow_up("do four things")
        # a finished and its result is journaled; b and c started and hang; d never started.
        await store.entries.wait_until(lambda: {("a", True), ("b", False), ("c", False)} <= set(store.entries))
        await ran.wait_until(lambda: {"b", "c"} <= set(ran))
        first.kill()
        _, second = await incarnations.wait_for_length(2)
        await log.wait_until(lambda: any(isinstance(e, Done) for e in log))
        result = await second.last_result()
        assert result is not None and (result.status, result.value) == ("completed", "finished")
    assert sorted(ran) == ["a", "b", "b", "c", "d"]  # b (idempotent) ran again; a, c not; d ran once, now
    results = {m.tool_call_id: m for m in model.requests[-1].messages if isinstance(m, ToolResultMessage)}
    assert results["a"].text == "pay did a" and not results["a"].is_error  # the saved result
    assert results["b"].text == "look did b"
    assert results["c"].is_error and "interrupted" in results["c"].text and "may or may not" in results["c"].text
    assert results["d"].text == "pay did d"
    assert len(model.requests) == 2  # the turn in flight was not asked of the model again


def test_tools_say_whether_they_are_idempotent() -> None:
    class Charge(condukt.Tool):
        name = "charge"
        description = "Charges."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
            return ""

    assert Charge().idempotent is False
    assert Charge(idempotent=True).idempotent is True and "idempotent" not in Charge(idempotent=True).opts
    with pytest.raises(TypeError):
        Charge(idempotent="yes")

    @condukt.tool(idempotent=True)
    async def lookup(term: str) -> str:
        """Looks a term up."""
        return term

    @condukt.tool
    async def send(text: str) -> str:
        """Sends."""
        return text

    assert lookup.idempotent is True and send.idempotent is False
    assert all(tool.idempotent for tool in (Read, Glob, Grep))
    assert not any(tool.idempotent for tool in (Bash, Command, Write, Edit))
