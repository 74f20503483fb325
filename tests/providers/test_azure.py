"""Azure OpenAI end to end against the local server: ``azure:<deployment>``, Chat Completions and Responses.

Wire shapes from the Azure OpenAI REST reference: the v1 API
(``POST {endpoint}/openai/v1/chat/completions``, ``/openai/v1/responses``,
https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference-preview-latest), dated versions
(``POST {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=2024-10-21``,
https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference), the ``api-key`` header or an
Entra ID bearer token for the scope ``https://cognitiveservices.azure.com/.default``
(https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/managed-identity).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import condukt
from condukt.events import Retry, TextDelta
from condukt.providers import (
    AuthenticationFailed,
    AzureOpenAIModel,
    AzureResponsesModel,
    InvalidRequest,
    MissingCredentials,
    RateLimited,
    resolve_model,
)
from condukt.testing.server import Fault, ProtocolServer, Status, reply, tool_use

from .helpers import Weather, collect

KEY = "azure-key-0123456789"
APIS = ("chat", "responses")
streaming = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


async def spawn(
    node: condukt.Node,
    server: ProtocolServer,
    *,
    api: str = "chat",
    stream: bool = True,
    api_key: str | None = KEY,
    **model_options: Any,
) -> condukt.AgentHandle:
    agent: condukt.AgentHandle = await node.spawn(
        condukt.Agent,
        model="azure:my-gpt",
        api_key=api_key,
        base_url=server.url,
        tools=[Weather],
        model_options={"api": api, "stream": stream, **model_options},
    )
    return agent


@pytest.mark.parametrize("api", APIS)
@streaming
async def test_plain_and_streamed_answers_on_the_v1_api(node: condukt.Node, server: ProtocolServer, api: str, stream: bool) -> None:
    server.add(reply("Hello from Azure."))
    agent = await spawn(node, server, api=api, stream=stream)
    events, result = await collect(agent, "hi")
    assert result.result == "Hello from Azure."
    if stream:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello from Azure."
    [request] = server.requests
    assert request.path == ("/openai/v1/chat/completions" if api == "chat" else "/openai/v1/responses")
    assert request.headers["api-key"] == KEY and "authorization" not in request.headers
    assert request.body["model"] == "my-gpt"


@pytest.mark.parametrize("api", APIS)
async def test_a_dated_api_version_uses_the_deployment_path(node: condukt.Node, server: ProtocolServer, api: str) -> None:
    server.add(reply("ok"))
    agent = await spawn(node, server, api=api, api_version="2024-10-21")
    assert await agent.run("hi") == "ok"
    [request] = server.requests
    if api == "chat":
        assert request.path == "/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21"
        assert request.protocol == "azure"
    else:
        assert request.path == "/openai/responses?api-version=2024-10-21"


@pytest.mark.parametrize("api", APIS)
@streaming
async def test_tool_round_trip(node: condukt.Node, server: ProtocolServer, api: str, stream: bool) -> None:
    server.add(reply(tools=tool_use("get_weather", {"location": "Oslo"}, id="call_9")), reply("Cold."))
    agent = await spawn(node, server, api=api, stream=stream)
    assert await agent.run("Weather?") == "Cold."
    first, second = server.requests
    if api == "chat":
        assert first.body["tools"][0]["function"]["name"] == "get_weather"
        assert second.body["messages"][-1] == {"role": "tool", "tool_call_id": "call_9", "content": "Temperature: 70F in Oslo"}
    else:
        assert second.body["input"][-1] == {"type": "function_call_output", "call_id": "call_9", "output": "Temperature: 70F in Oslo"}


@pytest.mark.parametrize("api", APIS)
async def test_a_429_is_retried(node: condukt.Node, server: ProtocolServer, api: str, autojump_clock: Any) -> None:
    server.add(Status(429, "Rate limit is exceeded. Try again in 1 seconds.", headers=(("retry-after", "1"),)), reply("ok"))
    agent = await spawn(node, server, api=api)
    events, result = await collect(agent, "hi")
    assert result.result == "ok" and sum(isinstance(e, Retry) for e in events) == 1


async def test_errors_are_typed(node: condukt.Node, server: ProtocolServer) -> None:
    agent = await spawn(node, server, api_version="2024-10-21")
    server.add(Status(404, "The API deployment for this resource does not exist.", error_type="DeploymentNotFound"))
    with pytest.raises(InvalidRequest) as caught:
        await agent.run("hi")
    assert caught.value.status_code == 404 and caught.value.error_type == "DeploymentNotFound"
    server.add(Status(401, "Access denied due to invalid subscription key.", error_type="401"))
    with pytest.raises(AuthenticationFailed) as denied:
        await agent.run("hi")
    assert KEY not in str(denied.value)


async def test_a_stream_throttled_mid_way_fails(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Fault(reply("a long answer that is cut"), after=3, kind="error", error_type="rate_limit_exceeded", message="throttled"))
    agent = await spawn(node, server)
    with pytest.raises(RateLimited):
        await agent.run("hi")
    assert len(server.requests) == 1


async def test_an_entra_id_token_callable_instead_of_a_key(node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    calls = 0

    def provider() -> tuple[str, float]:  # what get_bearer_token_provider-style callables give (cached by them)
        nonlocal calls
        calls += 1
        return f"entra-{calls}", time.time() + 3600

    server.add(reply("a"), reply("b"))
    agent = await spawn(node, server, api_key=None, token=provider)
    await agent.run("1")
    await agent.run("2")
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer entra-1", "Bearer entra-1"]
    assert all("api-key" not in r.headers for r in server.requests)


async def test_an_azure_identity_credential(node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A credential with get_token(scope), as azure-identity's: asked for the Azure OpenAI scope, in a thread."""
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    asked: list[str] = []

    class Credential:
        def get_token(self, *scopes: str) -> Any:
            asked.extend(scopes)
            return type("AccessToken", (), {"token": "from-credential", "expires_on": int(time.time()) + 3600})()

    server.add(reply("ok"))
    agent = await spawn(node, server, api_key=None, credential=Credential())
    assert await agent.run("hi") == "ok"
    assert asked == ["https://cognitiveservices.azure.com/.default"]
    assert server.requests[0].headers["authorization"] == "Bearer from-credential"


async def test_expired_and_missing_credentials_send_nothing(node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    agent = await spawn(node, server, api_key=None, token=lambda: ("stale", time.time() - 10))
    with pytest.raises(MissingCredentials, match="AZURE_OPENAI_API_KEY") as caught:
        await agent.run("hi")
    assert "expired" in str(caught.value) and "stale" not in str(caught.value)

    class Failing:
        def get_token(self, *scopes: str) -> Any:
            raise RuntimeError("ClientAuthenticationError: no account signed in")

    agent = await spawn(node, server, api_key=None, credential=Failing())
    with pytest.raises(MissingCredentials, match="az login"):
        await agent.run("hi")
    assert server.requests == []


async def test_endpoint_version_and_key_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "OPENAI_API_VERSION", "AZURE_OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(MissingCredentials, match="AZURE_OPENAI_ENDPOINT"):
        resolve_model("azure:dep", api_key=KEY)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com/")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2025-04-01-preview")
    model = resolve_model("azure:dep")
    assert isinstance(model, AzureOpenAIModel)
    assert str(model._url) == "https://res.openai.azure.com/openai/deployments/dep/chat/completions?api-version=2025-04-01-preview"
    model = resolve_model("azure:dep", api="responses", api_version="v1")
    assert isinstance(model, AzureResponsesModel) and str(model._url) == "https://res.openai.azure.com/openai/v1/responses"
    with pytest.raises(ValueError, match="api_version"):
        resolve_model("azure:dep", api_version="latest")
    with pytest.raises(ValueError, match="not both"):
        resolve_model("azure:dep", token="t")
