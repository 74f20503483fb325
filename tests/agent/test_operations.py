"""Operations: typed one-shots declared on an Agent class."""

from __future__ import annotations

from typing import Any

import pytest

import condukt
from condukt.messages import UserMessage
from condukt.testing import ScriptedModel, call, reply

from .helpers import Add
from .structured import GOOD, PullRequest, Review, ReviewRecord, Ticket, Verdict, first_user_text, tool_names

LABEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1}},
    "required": ["text"],
}


class Reviewer(condukt.Agent):
    """Reviews pull requests."""

    system_prompt = "You review pull requests."

    def tools(self) -> list[Any]:
        return [Add]

    review_pr = condukt.operation(
        input=PullRequest,
        output=Review,
        instructions="Read the PR, decide a verdict, and write a summary.",
    )
    label = condukt.operation(input=LABEL_SCHEMA, output={"type": "string"}, instructions="Pick a label.")
    triage = condukt.operation(input=Ticket, output=ReviewRecord, instructions="Triage the ticket.")


class StrictReviewer(Reviewer):
    """Inherits the operations."""

    system_prompt = "You are strict."


async def test_operation_returns_the_typed_result_with_the_agents_tools_and_prompt() -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 1}), call("submit_result", GOOD)])
    async with condukt.open_node() as node:
        before = node.process_count
        review = await Reviewer.review_pr(PullRequest("tuist/condukt", 7), model=model)
        assert node.process_count == before
    assert review == Review(Verdict.APPROVE, "Looks fine.")
    first = model.requests[0]
    assert tool_names(first) == ["add", "submit_result"]
    assert first.system_prompt is not None and first.system_prompt.startswith("You review pull requests.")
    text = first_user_text(first)
    assert text.startswith("Read the PR, decide a verdict, and write a summary.")
    assert '"repo": "tuist/condukt"' in text and '"number": 7' in text


async def test_json_schema_and_dataclass_operations() -> None:
    model = ScriptedModel(
        [
            call("submit_result", {"result": "bug"}),
            call("submit_result", {"verdict": "reject", "summary": "dup"}),
        ]
    )
    async with condukt.open_node():
        assert await Reviewer.label({"text": "It crashes"}, model=model) == "bug"
        assert await Reviewer.triage(Ticket("Crash", 1), model=model) == ReviewRecord("reject", "dup", 0)


async def test_no_history_between_calls() -> None:
    model = ScriptedModel([call("submit_result", {"result": "a"}), call("submit_result", {"result": "b"})])
    async with condukt.open_node():
        assert await Reviewer.label({"text": "one"}, model=model) == "a"
        assert await Reviewer.label({"text": "two"}, model=model) == "b"
    second = model.requests[1]
    assert len(second.messages) == 1
    assert isinstance(second.messages[0], UserMessage)
    assert '"two"' in second.messages[0].text and '"one"' not in second.messages[0].text


@pytest.mark.parametrize("value", [{"text": ""}, {}, None, "just text"])
async def test_invalid_input_raises_with_zero_requests(value: Any) -> None:
    model = ScriptedModel([reply("never")])
    async with condukt.open_node() as node:
        before = node.process_count
        with pytest.raises(condukt.InvalidInput):
            await Reviewer.label(value, model=model)
        assert node.process_count == before
    assert model.requests == []


async def test_run_operation_by_name_and_unknown_operation() -> None:
    model = ScriptedModel([call("submit_result", {"result": "docs"})])
    async with condukt.open_node():
        assert await condukt.run_operation(Reviewer, "label", {"text": "typo"}, model=model) == "docs"
        with pytest.raises(condukt.UnknownOperation) as info:
            await condukt.run_operation(Reviewer, "merge", {"text": "x"}, model=model)
    message = str(info.value)
    assert "merge" in message
    for known in ("label", "review_pr", "triage"):
        assert known in message
    assert isinstance(info.value, LookupError)
    assert len(model.requests) == 1


async def test_operations_are_inherited_and_use_the_subclass() -> None:
    model = ScriptedModel([call("submit_result", GOOD)])
    async with condukt.open_node():
        await StrictReviewer.review_pr(PullRequest("a/b", 1), model=model)
        with pytest.raises(condukt.UnknownOperation, match="label"):
            await condukt.run_operation(condukt.Agent, "label")
    assert (model.requests[0].system_prompt or "").startswith("You are strict.")
    assert sorted(condukt.agent.operations_of(StrictReviewer)) == ["label", "review_pr", "triage"]


async def test_handle_operation_uses_the_live_agents_options_and_leaves_its_history() -> None:
    model = ScriptedModel([reply("hello"), call("submit_result", GOOD), reply("still here")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            Reviewer, model=model, system_prompt="Live prompt.", load_project_instructions=False
        )
        await agent.run("hi")
        history = await agent.history()
        before = node.process_count
        review = await agent.operation("review_pr", PullRequest("a/b", 2))
        assert review == Review(Verdict.APPROVE, "Looks fine.")
        assert node.process_count == before
        assert await agent.history() == history
        with pytest.raises(condukt.UnknownOperation):
            await agent.operation("nope")
        assert await agent.run("and now?") == "still here"
    operation_request = model.requests[1]
    assert len(operation_request.messages) == 1  # the live conversation is not used
    assert (operation_request.system_prompt or "").startswith("Live prompt.")
    assert len(model.requests[2].messages) == 3  # hi, hello, and now?


class RecordingStore:
    """A minimal session store: snapshots by key, and every save recorded."""

    def __init__(self) -> None:
        self.snapshots: dict[str, Any] = {}
        self.saves: list[str] = []

    def bind(self, cwd: Any) -> RecordingStore:
        return self

    async def load(self, key: str) -> Any:
        return self.snapshots.get(key)

    async def save(self, key: str, snapshot: Any) -> None:
        self.saves.append(key)
        self.snapshots[key] = snapshot

    async def delete(self, key: str) -> None:
        self.snapshots.pop(key, None)


async def test_handle_operation_neither_reads_nor_writes_the_live_agents_session() -> None:
    store = RecordingStore()
    model = ScriptedModel([reply("hello"), call("submit_result", GOOD)])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            Reviewer,
            model=model,
            session_store=store,
            session_store_key="live",
            load_project_instructions=False,
        )
        await agent.run("hi")
        saved = store.snapshots["live"]
        saves = len(store.saves)
        await agent.operation("review_pr", PullRequest("a/b", 3))
        assert await agent.history() == saved.messages
    assert len(model.requests[1].messages) == 1  # the operation did not load the live conversation
    assert store.snapshots["live"] is saved  # nor overwrite it
    assert store.saves[saves:] == []


async def test_one_shots_do_not_persist_into_a_class_level_store() -> None:
    store = RecordingStore()

    class Persistent(Reviewer):
        session_store = store

    model = ScriptedModel([call("submit_result", GOOD), reply("one-shot"), reply("kept")])
    async with condukt.open_node() as node:
        await Persistent.review_pr(PullRequest("a/b", 4), model=model)
        await condukt.run(Persistent, "hello", model=model)
        assert store.saves == []
        # A long-lived agent of the same class does persist.
        agent = await node.spawn(Persistent, model=model, load_project_instructions=False)
        await agent.run("hi")
        assert store.saves
