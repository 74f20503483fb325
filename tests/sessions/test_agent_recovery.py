"""An agent restarted by its supervisor comes back with its conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from waiting import Watched

import condukt
from condukt.messages import AssistantMessage, ToolResultMessage, UserMessage
from condukt.sessions import DiskStore, MemoryStore, SQLiteStore
from condukt.testing import FunctionModel, call, reply
from tests.agent.helpers import Recorder


class Echo(condukt.Tool):
    name = "echo"
    description = "Echoes."
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        return f"echo {args['n']}"


def crashing_model() -> FunctionModel:
    """Turns 1-2 call a tool; turn 3 of the first incarnation crashes the loop; then answers."""
    state = {"crashed": False}

    def respond(request: condukt.ModelRequest) -> Any:
        turns = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        last = request.messages[-1]
        if isinstance(last, UserMessage) and turns == 0:
            return call("echo", {"n": 1})
        if turns == 1:
            return call("echo", {"n": 2})
        if turns == 2 and not state["crashed"]:
            state["crashed"] = True
            raise RuntimeError("bug in the loop machinery")
        return reply(f"continuing after {turns} turns: {last.text if isinstance(last, UserMessage) else ''}")

    return FunctionModel(respond)


def store_for(kind: str, tmp_path: Path) -> Any:
    if kind == "disk":
        return DiskStore()
    if kind == "sqlite":
        return SQLiteStore()
    return MemoryStore()


@pytest.mark.parametrize("kind", ["disk", "sqlite", "memory"])
async def test_crash_after_turn_two_restores_turns_one_and_two(kind: str, tmp_path: Path) -> None:
    model = crashing_model()
    store = store_for(kind, tmp_path)
    incarnations: Watched[condukt.AgentHandle] = Watched()
    async with condukt.open_node() as node:
        await node.start_supervisor(
            [
                condukt.ChildSpec(
                    "agent",
                    Recorder,
                    kwargs={
                        "model": model, "tools": [Echo], "cwd": tmp_path, "session_store": store,
                        "incarnations": incarnations,
                    },
                    name="worker",
                )
            ]
        )
        first = node.whereis("worker")
        first_session = first.session_id
        with pytest.raises(condukt.CallError) as crash:
            await first.run("count to four")
        assert isinstance(crash.value.reason, RuntimeError)
        _, second = await incarnations.wait_for_length(2)
        assert node.whereis("worker") is second
        history = await second.history()
        assert [type(m) for m in history] == [
            UserMessage,
            AssistantMessage,
            ToolResultMessage,
            AssistantMessage,
            ToolResultMessage,
        ]
        assert [m.text for m in history if isinstance(m, ToolResultMessage)] == ["echo 1", "echo 2"]
        assert second.session_id == first_session

        answer = await second.run("go on")
        assert answer == "continuing after 2 turns: go on"
        assert len(model.requests[-1].messages) == 6  # the restored five plus the follow-up prompt
    if kind == "disk":
        assert list((tmp_path / ".condukt" / "sessions").glob("*.json"))
    if kind == "sqlite":
        assert (tmp_path / ".condukt" / "sessions.sqlite3").exists()
        await store.aclose()


async def test_clear_removes_the_stored_snapshot(tmp_path: Path) -> None:
    store = DiskStore()
    async with condukt.open_node() as node:
        model = FunctionModel(lambda request: reply("hi"))
        agent = await node.spawn(condukt.Agent, model=model, cwd=tmp_path, session_store=store, id="s1")
        await agent.run("hello")
        assert (await DiskStore().bind(tmp_path).load("s1")) is not None
        await agent.clear()
        assert (await DiskStore().bind(tmp_path).load("s1")) is None


async def test_explicit_start_options_override_restored_settings(tmp_path: Path) -> None:
    store = MemoryStore()
    async with condukt.open_node() as node:
        model = FunctionModel(lambda request: reply("ok"))
        agent = await node.spawn(
            condukt.Agent, model=model, cwd=tmp_path, session_store=store, id="s2",
            system_prompt="first prompt", thinking_level="low",
        )
        await agent.run("hello")
        await agent.stop()
        again = await node.spawn(
            condukt.Agent, model=model, cwd=tmp_path, session_store=store, id="s2", system_prompt="second prompt"
        )
        await again.run("and now?")
    request = model.requests[-1]
    assert request.system_prompt == "second prompt"  # explicit option wins
    assert request.thinking_level == "low"  # restored setting kept
    assert [m.text for m in request.messages] == ["hello", "ok", "and now?"]


async def test_a_corrupt_snapshot_fails_the_start_and_is_not_overwritten(tmp_path: Path) -> None:
    store = DiskStore()
    path = store.bind(tmp_path).path("s3")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    async with condukt.open_node() as node:
        with pytest.raises(condukt.sessions.CorruptSnapshot):
            await node.spawn(condukt.Agent, model=FunctionModel(lambda r: reply("x")), cwd=tmp_path, session_store=store, id="s3")
    assert path.read_text() == "{not json"


async def test_every_completed_turn_is_saved_before_the_next_model_request(tmp_path: Path) -> None:
    store = MemoryStore()
    seen: list[int] = []

    async def respond(request: condukt.ModelRequest) -> Any:
        snapshot = await store.load("s4")
        seen.append(0 if snapshot is None else len(snapshot.messages))
        turns = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return call("echo", {"n": turns}) if turns < 3 else reply("done")

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=FunctionModel(respond), tools=[Echo], cwd=tmp_path, session_store=store, id="s4"
        )
        await agent.run("go")
    # Before turn 1 nothing was saved; before turns 2, 3, 4 the previous turns were.
    assert seen == [0, 3, 5, 7]
