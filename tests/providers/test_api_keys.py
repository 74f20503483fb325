"""A key that cannot go into an HTTP header fails the agent's start, not every request."""

from __future__ import annotations

import pytest

import condukt


@pytest.mark.parametrize("key", ["sk-abc\n", "sk-abc\r\nX-Injected: 1", "sk-\x00abc", "sk-ab c ", "sk-é"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_malformed_key_fails_spawn(key: str, provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(ValueError, match="API key from api_key") as caught:
            await node.spawn(condukt.Agent, model=f"{provider}:m", api_key=key)
        assert key.strip() not in str(caught.value)
        if "\x00" not in key:  # an environment variable cannot hold a NUL
            monkeypatch.setenv("ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY", key)
            with pytest.raises(ValueError, match="API_KEY contains|API_KEY has"):
                await node.spawn(condukt.Agent, model=f"{provider}:m")
