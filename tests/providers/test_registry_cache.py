"""A model string resolves once per node and settings (``resolve_model`` with a node and a key)."""

from __future__ import annotations

import pytest

import condukt
from condukt.providers import resolve_model


async def test_same_settings_share_one_model_per_node() -> None:
    async with condukt.open_node() as node, condukt.open_node() as other:
        first = resolve_model("openai:m", api_key="k", base_url="http://127.0.0.1:1/v1", node=node)
        again = resolve_model("openai:m", api_key="k", base_url="http://127.0.0.1:1/v1", node=node)
        assert again is first
        assert resolve_model("openai:m", api_key="k2", base_url="http://127.0.0.1:1/v1", node=node) is not first
        assert resolve_model("openai:m2", api_key="k", base_url="http://127.0.0.1:1/v1", node=node) is not first
        assert resolve_model("openai:m", api_key="k", base_url="http://127.0.0.1:1/v1", node=other) is not first
        assert resolve_model("openai:m", api_key="k", base_url="http://127.0.0.1:1/v1", node=node, stream=False) is not first


async def test_a_key_from_the_environment_is_read_at_each_start(monkeypatch: pytest.MonkeyPatch) -> None:
    async with condukt.open_node() as node:
        monkeypatch.setenv("OPENAI_API_KEY", "one")
        first = resolve_model("openai:m", node=node)
        monkeypatch.setenv("OPENAI_API_KEY", "two")
        assert resolve_model("openai:m", node=node) is not first


async def test_agents_of_a_node_share_the_resolved_model() -> None:
    async with condukt.open_node() as node:
        options = {"model": "openai:m", "api_key": "k", "base_url": "http://127.0.0.1:1/v1"}
        a = await node.spawn(condukt.Agent, load_project_instructions=False, **options)
        b = await node.spawn(condukt.Agent, load_project_instructions=False, **options)
        assert a.alive and b.alive
        assert node.extensions["condukt.providers.models"]  # one entry for both
        assert len(node.extensions["condukt.providers.models"]) == 1
