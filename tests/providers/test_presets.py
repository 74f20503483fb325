"""The presets mistral:, xai:, deepseek: end to end against the local server (Chat Completions).

Each provider documents an OpenAI-compatible chat completions endpoint: Mistral
(https://docs.mistral.ai/api/#tag/chat), xAI (https://docs.x.ai/docs/api-reference#chat-completions),
DeepSeek (https://api-docs.deepseek.com/api/create-chat-completion); their quirks are in docs/providers.md.
"""

from __future__ import annotations

from typing import Any

import pytest

import condukt
from condukt.events import Retry, TextDelta
from condukt.providers import AuthenticationFailed, InvalidRequest, MissingApiKey, resolve_model
from condukt.testing.server import ProtocolServer, Status, reply, tool_use

from .helpers import API_KEY, Weather, collect, spawn

PRESETS = ("mistral", "xai", "deepseek")
streaming = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


@pytest.mark.parametrize("prefix", PRESETS)
@streaming
async def test_answers_and_a_tool_round_trip(node: condukt.Node, server: ProtocolServer, prefix: str, stream: bool) -> None:
    server.add(reply(tools=tool_use("get_weather", {"location": "Nice"}, id="abcdefghi")), reply("Mild."))
    agent = await spawn(node, server, prefix, stream=stream, tools=[Weather])
    events, result = await collect(agent, "Weather?")
    assert result.result == "Mild."
    if stream:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Mild."
    first, second = server.requests
    assert first.path == "/chat/completions" and first.headers["authorization"] == f"Bearer {API_KEY}"
    assert second.body["messages"][-1] == {"role": "tool", "tool_call_id": "abcdefghi", "content": "Temperature: 70F in Nice"}
    # Mistral takes no stream_options (its usage comes in the last chunk); the others ask for usage.
    assert ("stream_options" in first.body) is (stream and prefix != "mistral")


@pytest.mark.parametrize("prefix", PRESETS)
async def test_a_429_is_retried_and_4xx_are_typed(node: condukt.Node, server: ProtocolServer, prefix: str, autojump_clock: Any) -> None:
    server.add(Status(429, "Rate limit exceeded", headers=(("retry-after", "1"),)), reply("ok"))
    agent = await spawn(node, server, prefix)
    events, result = await collect(agent, "hi")
    assert result.result == "ok" and sum(isinstance(e, Retry) for e in events) == 1
    server.add(Status(400, "Invalid model: nope"))
    with pytest.raises(InvalidRequest):
        await agent.run("hi")
    server.add(Status(401, "Unauthorized"))
    with pytest.raises(AuthenticationFailed):
        await agent.run("hi")


@pytest.mark.parametrize("prefix", PRESETS)
def test_a_missing_key_names_its_variable(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(f"{prefix.upper()}_API_KEY", raising=False)
    with pytest.raises(MissingApiKey, match=f"{prefix.upper()}_API_KEY"):
        resolve_model(f"{prefix}:m")
