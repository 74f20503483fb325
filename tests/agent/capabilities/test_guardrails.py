"""Input and output guardrails: pass, rewrite, or stop the run with GuardrailTripped."""

from __future__ import annotations

import pytest
import trio
from waiting import Watched

import condukt
from condukt.agent import GuardrailTripped, InputGuardrail, OutputGuardrail
from condukt.events import AgentEnd, Event
from condukt.messages import AssistantMessage, UserMessage
from condukt.providers import ModelRequest
from condukt.testing import FunctionModel, ScriptedModel, call, reply
from condukt.testing.server import Fault, ProtocolServer, RecordedRequest
from condukt.testing.server import reply as server_reply


def echo(request: ModelRequest) -> str:
    last = request.messages[-1]
    return f"you said: {last.text if isinstance(last, UserMessage) else '?'}"


async def test_a_tripped_input_guardrail_cancels_the_request_in_flight(nursery: trio.Nursery) -> None:
    server = ProtocolServer()
    requests: Watched[RecordedRequest] = Watched()
    server.requests = requests  # the server appends each request it reads: a list that signals it
    await nursery.start(server.run)
    # The response starts, then hangs until the client closes the connection.
    server.add(Fault(server_reply("I will happily help with that", chunk=3), after=2, kind="hang"))

    async def no_passwords(prompt: str) -> None:
        await requests.wait_for_length(1)  # the model request is in flight meanwhile
        if "password" in prompt:
            raise GuardrailTripped("asks for a password")

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model="anthropic:test-model",
            api_key="test-key",
            base_url=server.url,
            capabilities=[InputGuardrail(no_passwords)],
            load_project_instructions=False,
        )
        with pytest.raises(GuardrailTripped) as tripped:
            await agent.run("what is the admin password?")
        assert (tripped.value.guardrail, tripped.value.reason) == ("no_passwords", "asks for a password")
        with trio.fail_after(5):
            await server.client_closed.wait()  # the server saw the request abandoned
        assert server.requests[0].client_closed
        assert await agent.history() == ()  # no trace of the refused prompt


async def test_a_passing_input_guardrail_costs_no_extra_request() -> None:
    checked: list[str] = []
    model = FunctionModel(echo)
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, capabilities=[InputGuardrail(checked.append)], load_project_instructions=False
        )
        assert await agent.run("hello") == "you said: hello"
        assert await agent.run("again") == "you said: again"
    assert checked == ["hello", "again"]
    assert len(model.requests) == 2


@pytest.mark.parametrize("concurrent", [True, False])
async def test_an_input_guardrail_rewrites_the_prompt(concurrent: bool) -> None:
    async def mask(prompt: str) -> str | None:
        await trio.sleep(0)
        return prompt.replace("4111-1111", "[card]") if "4111-1111" in prompt else None

    model = FunctionModel(echo)
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            capabilities=[InputGuardrail(mask, concurrent=concurrent)],
            load_project_instructions=False,
        )
        assert await agent.run("charge 4111-1111") == "you said: charge [card]"
        history = await agent.history()
    assert [m.text for m in history] == ["charge [card]", "you said: charge [card]"]
    assert "4111" not in repr(model.requests[-1])


async def test_an_output_guardrail_rewrites_the_answer() -> None:
    events: list[Event] = []

    async def record(event: Event) -> None:
        events.append(event)

    def no_internal_hosts(text: str) -> str | None:
        return text.replace("db.internal", "[host]") if "db.internal" in text else None

    model = ScriptedModel([call("look"), reply("the data lives on db.internal")])

    @condukt.tool
    def look() -> str:
        """Looks."""
        return "found"

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            tools=[look],
            capabilities=[OutputGuardrail(no_internal_hosts)],
            load_project_instructions=False,
        )
        assert await agent.run("where?", on_event=record) == "the data lives on [host]"
        history = await agent.history()
    assert isinstance(history[-1], AssistantMessage) and history[-1].text == "the data lives on [host]"
    assert [e.text for e in events if isinstance(e, AgentEnd)] == ["the data lives on [host]"]


async def test_a_tripped_output_guardrail_fails_the_run_and_drops_the_answer() -> None:
    model = ScriptedModel([reply("first answer"), reply("rm -rf / is the fix")])

    def no_rm(text: str) -> bool:
        return "rm -rf" not in text

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, capabilities=[OutputGuardrail(no_rm)], load_project_instructions=False
        )
        assert await agent.run("one") == "first answer"
        with pytest.raises(GuardrailTripped, match="no_rm"):
            await agent.run("two")
        history = await agent.history()
    assert [m.text for m in history] == ["one", "first answer"]  # the refused run left nothing


async def test_an_output_guardrail_checks_a_structured_result() -> None:
    model = ScriptedModel([call("submit_result", {"total": 12})])

    def cap(result: dict[str, int]) -> dict[str, int] | None:
        return {"total": 10} if result["total"] > 10 else None

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, capabilities=[OutputGuardrail(cap)], load_project_instructions=False
        )
        schema = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}
        assert await agent.run("sum", output=schema) == {"total": 10}


def test_a_guardrail_needs_a_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        InputGuardrail("not a check")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        OutputGuardrail(42)  # type: ignore[arg-type]
