"""Delegation: concurrency, the task and input a child sees, roles, inheritance, cleanup, events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

import condukt
from condukt.events import AgentStart, Done, SubagentEvent, TextDelta, ToolCallEnd, ToolCallStart
from condukt.testing import FunctionModel, ScriptedModel, call, reply

from ...helpers import tool_results
from .helpers import Probe, Timeline, delegate, spawn_parent

PR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"repo": {"type": "string"}, "number": {"type": "integer"}},
    "required": ["repo", "number"],
}
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"enum": ["approve", "reject"]}},
    "required": ["verdict"],
}


def two_roles(timeline: Timeline) -> dict[str, Any]:
    return {
        "researcher": condukt.Subagent(system_prompt="You research.", model=timeline.model("researcher")),
        "writer": condukt.Subagent(system_prompt="You write.", model=timeline.model("writer")),
    }


async def test_two_roles_in_one_turn_run_concurrently_each_on_its_task(
    autojump_clock: trio.abc.Clock,
) -> None:
    timeline = Timeline()
    roles = two_roles(timeline)
    model = delegate(("researcher", "Find the papers on OTP."), ("writer", "Draft the intro."))
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, model, roles)
        started = trio.current_time()
        assert await parent.run("Write a survey") == "all done"
        elapsed = trio.current_time() - started
    assert 1.0 <= elapsed < 1.5, elapsed
    assert timeline.overlap("researcher", "writer")
    results = tool_results(model.requests[1])
    assert [(r.text, r.is_error) for r in results] == [("researcher done", False), ("writer done", False)]
    # Each child's request holds its task, under its role's system prompt.
    for role, task, prompt in (
        ("researcher", "Find the papers on OTP.", "You research."),
        ("writer", "Draft the intro.", "You write."),
    ):
        (request,) = roles[role].model.requests
        assert request.messages[0].text == task
        assert request.system_prompt == prompt


async def test_a_role_with_input_and_output_schemas() -> None:
    child = ScriptedModel([call("submit_result", {"verdict": "approve"})])
    roles = {
        "reviewer": condukt.Subagent(
            system_prompt="You review.",
            model=child,
            input=PR_SCHEMA,
            output=VERDICT_SCHEMA,
            description="Reviews one pull request.",
        ),
        "chat": condukt.Subagent(model=ScriptedModel([])),
    }
    task = {"role": "reviewer", "task": "Review this PR.", "input": {"repo": "tuist/condukt", "number": 7}}
    model = delegate(task)
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, model, roles)
        await parent.run("Review PR 7")
    # The tool lists the roles, and requires input for the role that takes one.
    (definition,) = model.requests[0].tools
    assert definition.name == "subagent"
    assert "reviewer: Reviews one pull request." in definition.description
    assert definition.parameters["properties"]["role"]["enum"] == ["reviewer", "chat"]
    branches = {b["properties"]["role"]["const"]: b for b in definition.parameters["oneOf"]}
    assert branches["reviewer"]["required"] == ["input"]
    assert branches["reviewer"]["properties"]["input"] == PR_SCHEMA
    assert "required" not in branches["chat"]
    # The child sees the task and the rendered input; the parent gets the result as JSON.
    text = child.requests[0].messages[0].text
    assert text.startswith("Review this PR.\n\n")
    assert '"repo": "tuist/condukt"' in text and '"number": 7' in text
    (result,) = tool_results(model.requests[1])
    assert not result.is_error and json.loads(result.text) == {"verdict": "approve"}


async def test_invalid_input_for_a_role_is_an_error_result_and_starts_no_child() -> None:
    child = ScriptedModel([reply("never")])
    roles = {"reviewer": condukt.Subagent(model=child, input=PR_SCHEMA)}
    model = delegate({"role": "reviewer", "task": "Review.", "input": {"repo": "a/b", "number": "seven"}})
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, model, roles)
        assert await parent.run("Review") == "all done"
        assert node.process_count == 1  # no child, not even a sub-agent supervisor
    (result,) = tool_results(model.requests[1])
    assert result.is_error and "seven" in result.text
    assert child.requests == []


async def test_unknown_role_is_an_error_result_naming_the_known_roles(autojump_clock: trio.abc.Clock) -> None:
    timeline = Timeline()
    model = delegate(("poet", "Write a sonnet."), ("writer", "Draft the intro."))
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, model, two_roles(timeline))
        assert await parent.run("Go") == "all done"
    unknown, known = tool_results(model.requests[1])
    assert unknown.is_error
    assert "'poet'" in unknown.text and "researcher" in unknown.text and "writer" in unknown.text
    assert not known.is_error and known.text == "writer done"


async def test_the_concurrency_cap_serialises_delegations(autojump_clock: trio.abc.Clock) -> None:
    timeline = Timeline()
    model = delegate(("researcher", "A"), ("writer", "B"))
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, model, two_roles(timeline), max_concurrent_subagents=1)
        started = trio.current_time()
        await parent.run("Go")
        elapsed = trio.current_time() - started
    assert 2.0 <= elapsed < 2.5, elapsed
    assert not timeline.overlap("researcher", "writer")


async def test_the_cap_is_per_parent(autojump_clock: trio.abc.Clock) -> None:
    timeline = Timeline()

    class Lead(condukt.Agent):
        max_concurrent_subagents = 1
        load_project_instructions = False

        def subagents(self) -> dict[str, Any]:
            return {"worker": condukt.Subagent(model=timeline.model(f"w{id(self)}"))}

    async with condukt.open_node() as node:
        parents = [await node.spawn(Lead, model=delegate(("worker", "job"))) for _ in range(2)]
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for parent in parents:
                nursery.start_soon(parent.run, "Go")
        elapsed = trio.current_time() - started
    assert 1.0 <= elapsed < 1.5, elapsed  # two parents, one child each: in parallel


async def test_children_inherit_cwd_model_key_and_secrets(tmp_path: Path) -> None:
    tmp_path = tmp_path.resolve()
    other = tmp_path / "other"
    other.mkdir()
    probe: list[Any] = []
    own = ScriptedModel([reply("own model")])

    def respond(request: condukt.ModelRequest) -> Any:
        if any(t.name == "subagent" for t in request.tools):  # the parent
            if len(request.messages) == 1:
                return [
                    call("subagent", {"role": r, "task": f"task for {r}"}) for r in ("near", "far", "own")
                ]
            return reply("parent done")
        return reply(f"child answered {request.messages[0].text}")

    model = FunctionModel(respond)
    roles = {
        "near": (Probe, {"probe": probe}),
        "far": (Probe, {"probe": probe, "cwd": str(other)}),
        "own": condukt.Subagent(model=own),
    }
    async with condukt.open_node() as node:
        parent = await spawn_parent(
            node,
            model,
            roles,
            cwd=str(tmp_path),
            api_key="sk-parent-key-123",
            secrets={"DEPLOY_TOKEN": "tok-abc-123"},
        )
        assert await parent.run("Go") == "parent done"
    by_cwd = {options["cwd"]: options for _, options in probe}
    near, far = by_cwd[str(tmp_path)], by_cwd[str(other)]
    assert near["cwd"] == str(tmp_path)
    assert far["cwd"] == str(other)
    for options in (near, far):
        assert options["model"] is model
        assert options["api_key"] == "sk-parent-key-123"
        assert options["inherited_secrets"] == {"DEPLOY_TOKEN": "tok-abc-123"}  # the API key is not a tool secret
        assert "secrets" not in options  # the child keeps its own secrets() (none here)
    results = {r.tool_call_id: r.text for r in tool_results(model.requests[-1])}
    assert sorted(results.values()) == [
        "child answered task for far",
        "child answered task for near",
        "own model",
    ]
    assert own.requests[0].messages[0].text == "task for own"


async def test_children_are_stopped_after_their_task(autojump_clock: trio.abc.Clock) -> None:
    probe: list[Any] = []
    child_model = ScriptedModel([reply("one"), reply("two"), reply("three")])
    roles = {"worker": (Probe, {"probe": probe, "model": child_model})}
    model = ScriptedModel(
        [
            [
                call("subagent", {"role": "worker", "task": "a"}),
                call("subagent", {"role": "worker", "task": "b"}),
            ],
            reply("first run done"),
            call("subagent", {"role": "worker", "task": "c"}),
            reply("second run done"),
        ]
    )
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, model, roles)
        await parent.run("Go")
        assert len(probe) == 2
        assert not any(handle.alive for handle, _ in probe)
        assert node.process_count == 2  # the parent and its sub-agent supervisor
        await parent.run("Again")
        assert len(probe) == 3 and not probe[2][0].alive
        assert node.process_count == 2  # the supervisor is reused
        await parent.stop()
        assert node.process_count == 0  # the supervisor went with its parent


async def test_child_events_are_forwarded_tagged_with_role_and_child_id(
    autojump_clock: trio.abc.Clock,
) -> None:
    timeline = Timeline()
    model = delegate(("researcher", "A"), ("writer", "B"))
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, model, two_roles(timeline))
        parent_id = parent.session_id
        async with parent.stream("Go") as events:
            seen = [event async for event in events]
    assert seen[-1] == Done("completed")
    forwarded = [(i, e) for i, e in enumerate(seen) if type(e) is SubagentEvent]
    starts = {e.id: i for i, e in enumerate(seen) if type(e) is ToolCallStart}
    ends = {e.id: i for i, e in enumerate(seen) if type(e) is ToolCallEnd}
    window = (min(starts.values()), max(ends.values()))
    ids: dict[str, str] = {}
    for role in ("researcher", "writer"):
        mine = [(i, e) for i, e in forwarded if e.role == role]
        kinds = [type(e.event) for _, e in mine]
        assert kinds[0] is AgentStart and kinds[-1] is Done and TextDelta in kinds
        (agent_id,) = {e.agent_id for _, e in mine}
        assert mine[0][1].event.session_id == agent_id
        assert mine[-1][1].event == Done("completed")
        assert all(window[0] < i < window[1] for i, _ in mine)
        ids[role] = agent_id
    assert len({*ids.values(), parent_id}) == 3


async def test_roles_from_the_subagents_method(autojump_clock: trio.abc.Clock) -> None:
    class Summariser(condukt.Agent):
        """Summarises long texts.

        More details that are not part of the role description.
        """

        model = ScriptedModel([reply("short")])

    class Lead(condukt.Agent):
        load_project_instructions = False

        def subagents(self) -> dict[str, Any]:
            return {"summariser": Summariser}

    model = delegate(("summariser", "Summarise the RFC."))
    async with condukt.open_node() as node:
        parent = await node.spawn(Lead, model=model)
        await parent.run("Go")
    assert "- summariser: Summarises long texts." in model.requests[0].tools[0].description
    assert "More details" not in model.requests[0].tools[0].description
    assert tool_results(model.requests[1])[0].text == "short"
    assert Summariser.model.requests[0].messages[0].text == "Summarise the RFC."


class StartOnly(Probe):
    """Records its start options, then refuses to start (so no real provider is called)."""

    async def init(self, options: Any) -> None:
        await super().init(options)
        raise RuntimeError("probe only")


async def test_provider_settings_are_inherited_only_by_children_of_the_same_provider() -> None:
    probe: list[Any] = []
    roles = {
        "same": (StartOnly, {"probe": probe, "model": "anthropic:claude-haiku-test"}),
        "other": (StartOnly, {"probe": probe, "model": "openai:gpt-test"}),
        "inherited": (StartOnly, {"probe": probe}),
    }
    model = delegate(("same", "a"), ("other", "b"), ("inherited", "c"))
    model.name = "anthropic:claude-parent-test"
    async with condukt.open_node() as node:
        parent = await spawn_parent(
            node,
            model,
            roles,
            api_key="sk-ant-parent-123",
            base_url="https://anthropic.example",
        )
        assert await parent.run("Go") == "all done"
    started = {
        options["model"] if isinstance(options["model"], str) else "inherited": options
        for _, options in probe
    }
    assert started["inherited"]["model"] is model
    for name in ("inherited", "anthropic:claude-haiku-test"):
        assert started[name]["api_key"] == "sk-ant-parent-123"
        assert started[name]["base_url"] == "https://anthropic.example"
    # A key must never be sent to another provider.
    assert "api_key" not in started["openai:gpt-test"]
    assert "base_url" not in started["openai:gpt-test"]
    assert all(r.is_error and "probe only" in r.text for r in tool_results(model.requests[1]))


async def test_a_child_keeps_its_own_secrets_and_inherits_the_parents() -> None:
    seen: list[dict[str, str]] = []

    class ShowSecrets(condukt.Tool):
        name = "show"
        description = "Returns the secrets its subprocesses would get."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
            seen.append(dict(context.secrets))
            return f"{context.secrets.get('CHILD_TOKEN')} {context.secrets.get('PARENT_TOKEN')}"

    class Child(condukt.Agent):
        """Has a secret of its own."""

        def secrets(self) -> dict[str, Any]:
            return {"CHILD_TOKEN": condukt.secrets.static("child-secret-1234")}

        def tools(self) -> list[Any]:
            return [ShowSecrets]

    child_model = ScriptedModel([call("show"), reply("shown")])
    model = delegate(("child", "show your secrets"))
    async with condukt.open_node() as node:
        parent = await spawn_parent(
            node, model, {"child": (Child, {"model": child_model})}, secrets={"PARENT_TOKEN": "parent-secret-5678"}
        )
        assert await parent.run("go") == "all done"
    assert seen == [{"CHILD_TOKEN": "child-secret-1234", "PARENT_TOKEN": "parent-secret-5678"}]
    # Both are redacted from what the child's model sees.
    [result] = tool_results(child_model.requests[1])
    assert result.text == "[REDACTED:CHILD_TOKEN] [REDACTED:PARENT_TOKEN]"


async def test_a_child_is_never_less_careful_than_its_parent_nor_itself(tmp_path: Path) -> None:
    from condukt.redaction import RegexRedactor

    seen: list[Any] = []

    class Careful(condukt.Agent):
        """Confined, with a redactor of its own."""

        confine_to_cwd = True
        redactor = RegexRedactor(patterns={"child_code": r"CHILD-\d+"})

        def tools(self) -> list[Any]:
            return [Leak]

    class Leak(condukt.Tool):
        name = "leak"
        description = "Shows what it knows."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
            seen.append(context.confine)
            return "CHILD-42 and PARENT-7"

    child_model = ScriptedModel([call("leak"), reply("done")])
    model = delegate(("careful", "look"))
    async with condukt.open_node() as node:
        parent = await spawn_parent(
            node,
            model,
            {"careful": (Careful, {"model": child_model})},
            cwd=str(tmp_path),
            confine_to_cwd=False,  # the parent's explicit False does not loosen the child
            redactor=RegexRedactor(patterns={"parent_code": r"PARENT-\d+"}),
        )
        assert await parent.run("go") == "all done"
    assert seen == [True]
    [result] = tool_results(child_model.requests[1])
    assert result.text == "[REDACTED:child_code] and [REDACTED:parent_code]"
