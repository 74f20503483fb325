"""Bash does not hand host credentials to the model; declared secrets are redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply


async def test_bash_drops_credential_like_host_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-host-key-123456")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_hosttoken")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Ada")
    model = ScriptedModel(
        [call("bash", {"command": "echo k=$ANTHROPIC_API_KEY t=$GITHUB_TOKEN a=$GIT_AUTHOR_NAME"}), reply("done")]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[condukt.tools.Bash], cwd=tmp_path)
        await agent.run("go")
        result = (await agent.history())[2]
    assert result.text.strip() == "k= t= a=Ada"


async def test_the_agents_own_api_key_is_redacted_from_tool_results(tmp_path: Path) -> None:
    (tmp_path / "leak.txt").write_text("key: sk-test-agent-key-abcdef")
    model = ScriptedModel([call("read", {"path": "leak.txt"}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[condukt.tools.Read], cwd=tmp_path, api_key="sk-test-agent-key-abcdef"
        )
        await agent.run("go")
        history = await agent.history()
    assert history[2].text == "key: [REDACTED:API_KEY]"
    assert "sk-test-agent-key-abcdef" not in repr(model.requests)
