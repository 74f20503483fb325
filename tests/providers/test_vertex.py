"""Vertex AI end to end against the local server: ``vertex:`` (Gemini) and ``vertex-anthropic:`` (Claude).

Wire shapes from the Vertex AI REST reference: ``projects.locations.publishers.models.generateContent``
/ ``streamGenerateContent`` (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.publishers.models/generateContent)
and ``rawPredict`` / ``streamRawPredict`` for Claude with ``anthropic_version: "vertex-2023-10-16"``
(https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude); errors in
Google's shape (https://cloud.google.com/apis/design/errors).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

import condukt
from condukt.events import Retry, TextDelta
from condukt.providers import (
    AuthenticationFailed,
    InvalidRequest,
    MissingCredentials,
    RateLimited,
    VertexAnthropicModel,
    VertexGeminiModel,
    resolve_model,
)
from condukt.testing.server import Fault, ProtocolServer, Status, reply, tool_use

from .helpers import Weather, collect

TOKEN = "ya29.test-token"
PROTOCOLS = ("vertex", "vertex-anthropic")
streaming = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


async def spawn(
    node: condukt.Node, server: ProtocolServer, prefix: str, *, stream: bool = True, **model_options: Any
) -> condukt.AgentHandle:
    options: dict[str, Any] = {"project": "my-proj", "location": "us-east5", "token": TOKEN, "stream": stream}
    options.update(model_options)
    agent: condukt.AgentHandle = await node.spawn(
        condukt.Agent,
        model=f"{prefix}:{'gemini-2.5-flash' if prefix == 'vertex' else 'claude-sonnet-4-5@20250929'}",
        base_url=server.url,
        tools=[Weather],
        model_options=options,
    )
    return agent


def expected_path(prefix: str, stream: bool) -> str:
    base = "/v1/projects/my-proj/locations/us-east5/publishers"
    if prefix == "vertex":
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{base}/google/models/gemini-2.5-flash:{method}"
    return f"{base}/anthropic/models/claude-sonnet-4-5@20250929:{'streamRawPredict' if stream else 'rawPredict'}"


@pytest.mark.parametrize("prefix", PROTOCOLS)
@streaming
async def test_plain_and_streamed_answers(node: condukt.Node, server: ProtocolServer, prefix: str, stream: bool) -> None:
    server.add(reply("Hello from Vertex."))
    agent = await spawn(node, server, prefix, stream=stream)
    events, result = await collect(agent, "hi")
    assert result.result == "Hello from Vertex."
    if stream:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello from Vertex."
    [request] = server.requests
    assert request.path == expected_path(prefix, stream)
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "x-goog-api-key" not in request.headers and "x-api-key" not in request.headers
    if prefix == "vertex-anthropic":
        assert request.protocol == "vertex-anthropic"
        assert request.body["anthropic_version"] == "vertex-2023-10-16"
        assert "model" not in request.body and "anthropic-version" not in request.headers
        assert request.body.get("stream", False) is stream
    else:
        assert request.body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


@pytest.mark.parametrize("prefix", PROTOCOLS)
@streaming
async def test_tool_round_trip(node: condukt.Node, server: ProtocolServer, prefix: str, stream: bool) -> None:
    server.add(reply(tools=tool_use("get_weather", {"location": "Paris"}, id="call_1")), reply("70F."))
    agent = await spawn(node, server, prefix, stream=stream)
    assert await agent.run("Weather?") == "70F."
    first, second = server.requests
    if prefix == "vertex":
        assert first.body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
        parts = second.body["contents"][-1]["parts"]
        assert parts == [{"functionResponse": {"name": "get_weather", "response": {"output": "Temperature: 70F in Paris"}, "id": "call_1"}}]
    else:
        assert first.body["tools"][0]["name"] == "get_weather"
        [result] = second.body["messages"][-1]["content"]
        assert result["type"] == "tool_result" and result["tool_use_id"] == "call_1"


@pytest.mark.parametrize("prefix", PROTOCOLS)
async def test_a_429_is_retried(node: condukt.Node, server: ProtocolServer, prefix: str, autojump_clock: Any) -> None:
    server.add(Status(429, "Quota exceeded for aiplatform.googleapis.com", headers=(("retry-after", "1"),)), reply("ok"))
    agent = await spawn(node, server, prefix)
    events, result = await collect(agent, "hi")
    assert result.result == "ok"
    assert [type(e) for e in events if isinstance(e, Retry)] == [Retry]
    assert len(server.requests) == 2


@pytest.mark.parametrize("prefix", PROTOCOLS)
async def test_a_wrong_project_or_location_is_a_typed_4xx(node: condukt.Node, server: ProtocolServer, prefix: str) -> None:
    server.add(Status(404, "Publisher Model `projects/nope/locations/mars/...` was not found."))
    agent = await spawn(node, server, prefix, project="nope", location="mars")
    with pytest.raises(InvalidRequest) as caught:
        await agent.run("hi")
    assert caught.value.status_code == 404 and caught.value.error_type == "NOT_FOUND"
    assert "/projects/nope/locations/mars/" in server.requests[0].path
    server.add(Status(403, "Permission 'aiplatform.endpoints.predict' denied"))
    with pytest.raises(AuthenticationFailed):
        await agent.run("hi")


@pytest.mark.parametrize("prefix", PROTOCOLS)
async def test_a_stream_throttled_mid_way_fails_without_a_partial_answer(node: condukt.Node, server: ProtocolServer, prefix: str) -> None:
    server.add(Fault(reply("a long answer that is cut"), after=2 if prefix == "vertex" else 4, kind="error", error_type="RESOURCE_EXHAUSTED" if prefix == "vertex" else "rate_limit_error", message="throttled"))
    agent = await spawn(node, server, prefix)
    with pytest.raises(RateLimited):
        await agent.run("hi")
    assert len(server.requests) == 1  # text was streamed: not retried
    assert list(await agent.history()) == []


async def test_missing_project_names_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    with pytest.raises(MissingCredentials, match="GOOGLE_CLOUD_PROJECT"):
        resolve_model("vertex:gemini-2.5-flash", token=TOKEN)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    model = resolve_model("vertex-anthropic:claude-sonnet-4-5", token=TOKEN)
    assert isinstance(model, VertexAnthropicModel)
    assert model.base_url == "https://europe-west4-aiplatform.googleapis.com"
    assert "/projects/env-proj/locations/europe-west4/" in str(model._url)
    monkeypatch.delenv("GOOGLE_CLOUD_LOCATION")
    model = resolve_model("vertex:gemini-2.5-flash", token=TOKEN)
    assert isinstance(model, VertexGeminiModel) and model.base_url == "https://aiplatform.googleapis.com"


async def test_expired_credentials_fail_before_any_request(node: condukt.Node, server: ProtocolServer) -> None:
    """google-auth credentials whose token expired and that cannot renew it: MissingCredentials, nothing sent."""
    google_credentials = pytest.importorskip("google.oauth2.credentials", reason="google-auth ([vertex] extra) is not installed")
    expired = google_credentials.Credentials(token="old", expiry=datetime.datetime(2020, 1, 1))
    agent = await spawn(node, server, "vertex", token=None, credentials=expired)
    with pytest.raises(MissingCredentials, match="gcloud auth application-default login") as caught:
        await agent.run("hi")
    assert "old" not in str(caught.value)
    assert server.requests == []


async def test_application_default_credentials_missing(node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No token, no credentials, no ADC on this machine: a typed error naming what to set, nothing sent."""
    pytest.importorskip("google.auth", reason="google-auth ([vertex] extra) is not installed")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    agent = await spawn(node, server, "vertex", token=None)
    with pytest.raises(MissingCredentials, match="GOOGLE_APPLICATION_CREDENTIALS"):
        await agent.run("hi")
    assert server.requests == []


async def test_a_token_callable_is_asked_before_each_request(node: condukt.Node, server: ProtocolServer) -> None:
    tokens = iter(["t1", "t2"])

    async def token() -> tuple[str, float]:
        return next(tokens), 0.0 + 10**10  # far from expiring: asked once

    server.add(reply("a"), reply("b"))
    agent = await spawn(node, server, "vertex", token=token)
    await agent.run("1")
    await agent.run("2")
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer t1", "Bearer t1"]


async def test_an_api_key_is_refused() -> None:
    with pytest.raises(ValueError, match="OAuth token, not an API key"):
        resolve_model("vertex:gemini-2.5-flash", api_key="AIza...", project="p", token=TOKEN)


async def test_a_token_echoed_in_an_error_is_redacted(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Status(401, f"Request had invalid authentication credentials: Bearer {TOKEN}"))
    agent = await spawn(node, server, "vertex")
    with pytest.raises(AuthenticationFailed) as caught:
        await agent.run("hi")
    assert TOKEN not in str(caught.value) and "[redacted]" in str(caught.value)
