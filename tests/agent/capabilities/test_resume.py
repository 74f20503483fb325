"""resume=True: a run interrupted by a crash continues when the supervisor restarts the agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from waiting import Watched

import condukt
from condukt import telemetry
from condukt.events import AgentEnd, Done, Event
from condukt.messages import AssistantMessage, ToolResultMessage, UserMessage
from condukt.providers import ModelRequest
from condukt.sessions import DiskStore
from condukt.testing import FunctionModel, call, reply

from .helpers import Recorder


class Echo(condukt.Tool):
    name = "echo"
    description = "Echoes."
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        return f"echo {args['n']}"


def hanging_once(hang_at_turn: int) -> tuple[FunctionModel, trio.Event]:
    """Calls echo each turn; the first time it reaches ``hang_at_turn`` it hangs (then the test kills the agent)."""
    hanging = trio.Event()

    async def respond(request: ModelRequest) -> Any:
        turns = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        if turns + 1 == hang_at_turn and not hanging.is_set():
            hanging.set()
            await trio.sleep_forever()
        if turns < 2:
            return call("echo", {"n": turns + 1})
        return reply(f"done after {turns} turns")

    return FunctionModel(respond), hanging


async def crash_and_collect(tmp_path: Path, hang_at_turn: int, resume: bool) -> tuple[list[Event], Any, FunctionModel]:
    model, hanging = hanging_once(hang_at_turn)
    incarnations: Watched[condukt.AgentHandle] = Watched()
    spec = condukt.ChildSpec(
        "agent",
        Recorder,
        kwargs={
            "incarnations": incarnations,
            "model": model,
            "tools": [Echo],
            "cwd": tmp_path,
            "session_store": DiskStore(),
            "id": "worker",
            "resume": resume,
            "load_project_instructions": False,
        },
        name="worker",
    )
    seen: list[Event] = []
    async with condukt.open_node() as node:
        await node.start_supervisor([spec])
        first = node.whereis("worker", condukt.AgentHandle)
        assert first is not None
        async with node.subscribe("worker") as events:
            await first.follow_up("count")  # nobody waits for this run: its result must land somewhere
            with trio.fail_after(5):
                await hanging.wait()
            first.kill()
            _, second = await incarnations.wait_for_length(2)
            assert node.whereis("worker") is second
            if resume:
                with trio.fail_after(5):
                    async for published in events:
                        if published.agent_id == second.session_id:
                            seen.append(published.event)
                            if isinstance(published.event, Done):
                                break
        result = await second.last_result()
        history = await second.history()
    return seen, (result, history), model


@pytest.mark.parametrize("hang_at_turn", [1, 3])
async def test_an_interrupted_run_resumes_from_its_last_completed_turn(tmp_path: Path, hang_at_turn: int) -> None:
    seen, (result, history), model = await crash_and_collect(tmp_path, hang_at_turn, resume=True)
    assert result is not None and (result.status, result.value) == ("completed", "done after 2 turns")
    assert any(isinstance(e, AgentEnd) and e.text == "done after 2 turns" for e in seen)
    assert [type(m) for m in history] == [
        UserMessage, AssistantMessage, ToolResultMessage, AssistantMessage, ToolResultMessage, AssistantMessage
    ]
    assert history[0].text == "count"
    # The resumed request carried the completed turns, not the prompt twice.
    resumed = model.requests[-1]
    assert sum(1 for m in resumed.messages if isinstance(m, UserMessage)) == 1


async def test_a_resumed_run_emits_its_telemetry(tmp_path: Path) -> None:
    events: list[telemetry.TelemetryEvent] = []
    with telemetry.attached(events.append):
        _, (result, _), _ = await crash_and_collect(tmp_path, 3, resume=True)
    assert result is not None and result.status == "completed"
    (stop,) = [e for e in events if e.name == ("condukt", "run", "stop")]  # the killed incarnation never stopped it
    assert stop.metadata["run_id"] == result.run_id
    assert stop.measurements["turns"] == 3
    starts = [e.metadata["run_id"] for e in events if e.name == ("condukt", "run", "start")]
    assert starts == [result.run_id, result.run_id]  # the run began, then began again where it had stopped


async def test_without_resume_the_interrupted_run_does_not_continue(tmp_path: Path) -> None:
    _, (result, history), _ = await crash_and_collect(tmp_path, 3, resume=False)
    assert result is None  # nothing ran after the restart
    assert [type(m) for m in history] == [UserMessage, AssistantMessage, ToolResultMessage, AssistantMessage, ToolResultMessage]
