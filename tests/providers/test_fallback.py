"""Model fallback: the next model answers when one is down, rate limited or broken, after its own retries."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt
from condukt.events import Retry, TextDelta
from condukt.providers import AnthropicModel, Fallback, InvalidRequest, OpenAIModel, ProviderUnavailable
from condukt.testing import FunctionModel, ScriptedModel, reply
from condukt.testing.server import ProtocolServer, Status
from condukt.testing.server import reply as server_reply

from .helpers import API_KEY, base_url


def http_model(server: ProtocolServer, protocol: str, **options: Any) -> Any:
    cls = AnthropicModel if protocol == "anthropic" else OpenAIModel
    return cls("test-model", api_key=API_KEY, base_url=base_url(server, protocol), **options)


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
async def test_a_down_provider_falls_back_after_its_own_retries(
    server: ProtocolServer, node: condukt.Node, protocol: str, autojump_clock: trio.abc.Clock
) -> None:
    server.add(Status(529, "Overloaded"), Status(503, "down"))
    primary = http_model(server, protocol, retry=2, node=node)
    model = Fallback(primary, ScriptedModel([reply("from the backup")]))
    agent = await node.spawn(condukt.Agent, model=model)
    events = []
    async with agent.stream("hi") as stream:
        async for event in stream:
            events.append(event)
    assert stream.result == "from the backup"
    assert len(server.requests) == 2  # the primary's own retry first
    retries = [e for e in events if isinstance(e, Retry)]
    assert [r.provider for r in retries] == [protocol, "scripted"]
    assert retries[1].reason.startswith(f"{protocol}:test-model: HTTP 503")


async def test_the_primary_answers_when_it_can(server: ProtocolServer, node: condukt.Node) -> None:
    server.add(server_reply("primary"))
    backup = ScriptedModel([reply("never")])
    model = Fallback(http_model(server, "openai", node=node), backup)
    agent = await node.spawn(condukt.Agent, model=model)
    assert await agent.run("hi") == "primary"
    assert backup.requests == []


async def test_a_rejected_request_does_not_fall_back() -> None:
    def rejected(request: Any) -> Any:
        raise InvalidRequest("anthropic", "prompt is too long", status_code=400)

    backup = ScriptedModel([reply("never")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=Fallback(FunctionModel(rejected), backup))
        with pytest.raises(InvalidRequest, match="prompt is too long"):
            await agent.run("hi")
    assert backup.requests == []


async def test_on_chooses_what_falls_back() -> None:
    def rejected(request: Any) -> Any:
        raise InvalidRequest("anthropic", "prompt is too long", status_code=400)

    async with condukt.open_node() as node:
        model = Fallback(FunctionModel(rejected), ScriptedModel([reply("bigger context")]), on=[InvalidRequest])
        agent = await node.spawn(condukt.Agent, model=model)
        assert await agent.run("hi") == "bigger context"
        by_predicate = Fallback(
            FunctionModel(rejected), ScriptedModel([reply("ok")]), on=lambda exc: "too long" in str(exc)
        )
        agent = await node.spawn(condukt.Agent, model=by_predicate)
        assert await agent.run("hi") == "ok"


async def test_the_last_failure_is_raised_when_every_model_fails() -> None:
    def down(request: Any) -> Any:
        raise ProviderUnavailable("x", "down", status_code=503)

    async with condukt.open_node() as node:
        model = Fallback(FunctionModel(down, name="a"), FunctionModel(down, name="b"))
        agent = await node.spawn(condukt.Agent, model=model)
        with pytest.raises(ProviderUnavailable, match="down"):
            await agent.run("hi")
        assert agent.alive


async def test_a_model_that_already_streamed_is_not_replaced() -> None:
    class HalfThenDown:
        name = "half"

        async def complete(self, request: Any, emit: Any) -> Any:
            await emit(TextDelta("partial "))
            raise ProviderUnavailable("half", "connection lost", status_code=None)

    backup = ScriptedModel([reply("never")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=Fallback(HalfThenDown(), backup))
        with pytest.raises(ProviderUnavailable, match="connection lost"):
            await agent.run("hi")
    assert backup.requests == []


def test_construction_is_checked() -> None:
    with pytest.raises(ValueError, match="at least two models"):
        Fallback(ScriptedModel([]))
    with pytest.raises(TypeError, match="Model objects or 'provider:model' strings"):
        Fallback(ScriptedModel([]), 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not one class"):
        Fallback(ScriptedModel([]), ScriptedModel([]), on=InvalidRequest)  # type: ignore[arg-type]
    assert Fallback(ScriptedModel([]), ScriptedModel([]), name="pair").name == "pair"
