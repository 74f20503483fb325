"""A base URL whose scheme no HTTP client speaks fails at once with a typed error: sending again cannot help."""

from __future__ import annotations

import httpx
import pytest

import condukt
from condukt import events as ev
from condukt.providers import InvalidRequest, resolve_model


@pytest.mark.parametrize("base_url", ["ftp://models.example/v1", "localhost:8000/v1"])
async def test_an_unusable_scheme_is_not_retried(base_url: str, autojump_clock: object) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model="openai:m", api_key="k", base_url=base_url)
        async with agent.stream("hi") as events:
            seen = [event async for event in events]
    assert not [event for event in seen if isinstance(event, ev.Retry)]
    assert events.error is not None and events.error.error_type == "InvalidRequest"
    assert "unsupported URL scheme" in events.error.message and "http:// or https://" in events.error.message


async def test_an_unusable_scheme_through_your_own_httpx_client_is_not_retried(autojump_clock: object) -> None:
    async with httpx.AsyncClient() as client, condukt.open_node() as node:
        model = resolve_model("openai:m", api_key="k", base_url="ftp://models.example/v1", http_client=client, node=node)
        with pytest.raises(InvalidRequest, match="unsupported protocol 'ftp://': base_url must be"):
            await condukt.run("hi", model=model, node=node)
