"""What a capability sees: ``AgentContext``, and the hooks that take it (``answer``, ``compact``, ``checkpoint``).

A capability written against the documented surface keeps working when the
kernel changes; one written against the old ``Session`` (the same attribute
names) keeps working too, with a deprecation warning where a name moved.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import condukt
from condukt.agent import AgentContext, Capability, Run
from condukt.messages import AssistantMessage, Message, TextBlock, UserMessage
from condukt.otp import ExitReason
from condukt.sessions import MemoryStore, RunCheckpoint
from condukt.testing import ScriptedModel, call, reply

from .helpers import Add, Sleep

#: The documented attributes and methods of AgentContext (its docstring's table). Changing this set
#: is a decision about what capabilities may rely on: add freely; remove only with a deprecation path.
CONTEXT_SURFACE = {
    "agent", "handle", "node", "config", "id", "cwd", "messages", "system_prompt", "secrets", "secret_env",
    "scrub", "scrubs", "scrub_blocks", "created_at", "declared_tools", "model", "tools", "tools_by_name",
    "tool_definitions", "set_tools", "checkpoint", "exit", "restored_run", "lease", "last_result", "plain_agent",
}  # fmt: skip


def test_the_context_offers_exactly_its_documented_surface() -> None:
    public = {name for name in [*AgentContext.__slots__, *vars(AgentContext)] if not name.startswith("_")}
    assert public == CONTEXT_SURFACE
    documented = AgentContext.__doc__ or ""
    assert all(f"``{name}" in documented for name in CONTEXT_SURFACE)
    with pytest.raises(AttributeError):
        object.__new__(AgentContext).__dict__  # noqa: B018  # slots: no attribute can be added by mistake


class Snoop(Capability):
    """Records what the context holds at each hook; exercises every documented attribute."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    async def setup(self, ctx: AgentContext) -> None:
        self.seen["setup"] = (ctx.id, ctx.cwd, list(ctx.declared_tools), ctx.system_prompt, ctx.restored_run)
        ctx.system_prompt = f"{ctx.system_prompt} Be brief."
        assert ctx.handle.node is ctx.node and isinstance(ctx.agent, condukt.Agent)
        assert ctx.plain_agent is condukt.Agent

    def run_started(self, run: Run) -> None:
        ctx = run.context
        self.seen["run"] = (
            [tool.name for tool in ctx.tools],
            sorted(ctx.tools_by_name),
            [d.name for d in ctx.tool_definitions],
            ctx.model.name,
            ctx.scrubs,
            ctx.scrub("a secret-value here"),
            dict(ctx.secret_env),
        )

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        checkpoint = run.context.checkpoint()
        assert checkpoint is not None
        self.seen.setdefault("checkpoints", []).append((checkpoint.run_id == run.id, checkpoint.turn))
        return False

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        self.seen["after_run"] = run.context.last_result  # not yet this run's: it is being settled


async def test_a_capability_sees_the_agent_through_its_context(tmp_path: Path) -> None:
    snoop = Snoop()
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), reply("3")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            tools=[Add],
            cwd=tmp_path,
            id="conv-1",
            system_prompt="You add.",
            secrets={"TOKEN": "secret-value"},
            capabilities=[snoop],
            load_project_instructions=False,
        )
        assert await agent.run("1+2?") == "3"
        last = await agent.last_result()
    assert snoop.seen["setup"] == ("conv-1", tmp_path, [Add], "You add.", None)
    assert model.requests[0].system_prompt == "You add. Be brief."
    assert snoop.seen["run"] == (
        ["add"], ["add"], ["add"], model.name, True, "a [REDACTED:TOKEN] here", {"TOKEN": "secret-value"}
    )
    assert snoop.seen["checkpoints"] == [(True, 1), (True, 2)]
    assert snoop.seen["after_run"] is None
    assert last is not None and last.value == "3" and last.status == "completed"


class Legacy(Capability):
    """A capability as written against the old ``Session``: parameter names, attributes and ``run.session``."""

    def __init__(self) -> None:
        self.prompts: list[str | None] = []
        self.histories: list[int] = []

    async def setup(self, session):  # type: ignore[no-untyped-def]  # as users wrote them
        session.system_prompt = (session.system_prompt or "") + " (legacy)"
        self.prompts.append(session.config.system_prompt)

    async def after_run(self, run, failure):  # type: ignore[no-untyped-def]
        self.histories.append(len(run.session.messages))


async def test_a_capability_written_against_session_still_works_with_a_deprecation_warning() -> None:
    legacy = Legacy()
    model = ScriptedModel([reply("hi")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with condukt.open_node() as node:
            agent = await node.spawn(
                condukt.Agent, model=model, system_prompt="Base.", capabilities=[legacy], load_project_instructions=False
            )
            assert await agent.run("hello") == "hi"
    assert legacy.prompts == ["Base."]
    assert model.requests[0].system_prompt == "Base. (legacy)"
    assert legacy.histories == [2]
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert messages == ["Run.session is deprecated: use run.context (a condukt.agent.AgentContext)"]
    with pytest.warns(DeprecationWarning, match="condukt.agent.Session is deprecated"):
        assert condukt.agent.Session is AgentContext  # annotations written against Session stay right


# --------------------------------------------------------------------------- answer


@attrs.frozen
class HowMany:
    """A call of the user's own: how many runs has the agent finished?"""


@attrs.frozen
class Forget:
    """A call of the user's own that fails: the agent has nothing to forget."""


class OverBudget(condukt.AgentError):
    """Raised to the caller of ``Forget``."""


class Counter(Capability):
    def __init__(self) -> None:
        self.runs = 0

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        self.runs += 1

    def answer(self, request: Any) -> Any:
        if type(request) is HowMany:
            return self.runs
        if type(request) is Forget:
            raise OverBudget("nothing to forget")
        return NotImplemented


async def test_a_capability_answers_calls_the_agent_does_not_know() -> None:
    counter = Counter()
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=ScriptedModel([reply("a"), reply("b")]), capabilities=[counter]
        )
        await agent.run("one")
        await agent.run("two")
        assert await agent.call(HowMany()) == 2
        with pytest.raises(OverBudget, match="nothing to forget"):
            await agent.call(Forget())
        assert await agent.call(HowMany()) == 2  # an answer that raised hurt nobody
        # Approvals are answered the same way; without them, what the handle says is unchanged.
        assert await agent.pending_approvals() == ()
        with pytest.raises(condukt.agent.UnknownApproval):
            await agent.approve("call-1")
        assert agent.alive


# --------------------------------------------------------------------------- compact


class KeepLastAnswer(Capability):
    """A compaction of the user's own, for ``agent.compact()``: only the last question and answer stay."""

    def __init__(self) -> None:
        self.compactions = 0

    async def compact(self, ctx: AgentContext) -> None:
        self.compactions += 1
        await trio.lowlevel.checkpoint()
        ctx.messages[:] = ctx.messages[-2:]


class BrokenCompaction(Capability):
    async def compact(self, ctx: AgentContext) -> None:
        raise ValueError("cannot compact today")


async def test_compact_runs_the_capabilities_compact_hooks() -> None:
    keep = KeepLastAnswer()
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=ScriptedModel([reply("1"), reply("2"), reply("3")]), capabilities=[keep]
        )
        for prompt in ["a", "b", "c"]:
            await agent.run(prompt)
        assert await agent.compact() == 4
        assert [m.text for m in await agent.history()] == ["c", "3"]
        assert keep.compactions == 1
        broken = await node.spawn(condukt.Agent, model=ScriptedModel([reply("x")]), capabilities=[BrokenCompaction()])
        await broken.run("a")
        with pytest.raises(ValueError, match="cannot compact today"):
            await broken.compact()
        assert len(await broken.history()) == 2 and broken.alive


# --------------------------------------------------------------------------- checkpoint


class Notes(Capability):
    """Keeps a note per run, and puts it in the run's checkpoint (here: in the run id it resumes under)."""

    def checkpoint(self, run: Run, checkpoint: RunCheckpoint) -> RunCheckpoint | None:
        if "secret" in run.prompt:
            return None  # this run must not be resumed from a snapshot
        return attrs.evolve(checkpoint, run_id=f"{checkpoint.run_id}+noted")


async def test_capabilities_complete_or_refuse_the_checkpoint_of_a_run() -> None:
    store = MemoryStore()
    gate = trio.Event()
    seen: list[RunCheckpoint | None] = []

    class Peek(Capability):
        async def history_changed(self, ctx: AgentContext) -> None:
            seen.append(ctx.checkpoint())

    @condukt.tool
    async def wait() -> str:
        """Waits for the test."""
        await gate.wait()
        return "waited"

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=ScriptedModel([call("wait"), reply("done"), call("wait"), reply("done")]),
            tools=[wait],
            session_store=store,
            id="noted",
            capabilities=[Notes(), Peek()],
        )
        gate.set()
        await agent.run("an ordinary task")
        await agent.run("a secret task")
    ordinary, secret = seen[0], seen[3]
    assert ordinary is not None and ordinary.run_id.endswith("+noted") and ordinary.turn == 1
    assert secret is None


# --------------------------------------------------------------------------- a failed start


class Opens(Capability):
    """Opens something in ``setup``; must close it whatever happens after."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name

    async def setup(self, ctx: AgentContext) -> None:
        self.log.append(f"open {self.name}")

    async def stop(self, ctx: AgentContext, reason: ExitReason) -> None:
        self.log.append(f"close {self.name}: {type(reason).__name__}")


class FailsSetup(Capability):
    async def setup(self, ctx: AgentContext) -> None:
        raise RuntimeError("no database")


async def test_a_failed_start_stops_the_capabilities_already_set_up() -> None:
    log: list[str] = []
    async with condukt.open_node() as node:
        with pytest.raises(RuntimeError, match="no database"):
            await node.spawn(
                condukt.Agent,
                model=ScriptedModel([]),
                capabilities=[Opens(log, "a"), Opens(log, "b"), FailsSetup(), Opens(log, "c")],
            )
        assert log == ["open a", "open b", "close b: RuntimeError", "close a: RuntimeError"]
        log.clear()
        with pytest.raises(ValueError, match="has no model"):  # a failure after every setup: all stop
            await node.spawn(condukt.Agent, capabilities=[Opens(log, "a")])
        assert log == ["open a", "close a: ValueError"]


# --------------------------------------------------------------------------- per-run state and order


async def test_run_hooks_get_the_run_and_its_context_in_order(autojump_clock: trio.testing.MockClock) -> None:
    order: list[str] = []

    class Tag(Capability):
        def __init__(self, name: str) -> None:
            self.name = name

        def prepare_request(self, run: Run, request: condukt.ModelRequest) -> condukt.ModelRequest:
            order.append(self.name)
            messages: tuple[Message, ...] = (*request.messages, UserMessage((TextBlock(f"[{self.name}]"),)))
            return attrs.evolve(request, messages=messages)

    model = ScriptedModel([call("sleep", {"seconds": 1}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Sleep], capabilities=[Tag("first"), Tag("second")])
        assert await agent.run("go") == "ok"
        history = await agent.history()
    assert order == ["first", "second", "first", "second"]
    assert [m.text for m in model.requests[1].messages][-2:] == ["[first]", "[second]"]
    assert "[first]" not in [m.text for m in history]  # what a request carries is not the history
