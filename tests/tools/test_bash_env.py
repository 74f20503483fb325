"""Bash does not hand host credentials to the model; declared secrets are redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply


async def test_bash_gets_no_host_variables_beyond_the_allowlist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    assert result.text.strip() == "k= t= a="


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


async def test_the_models_timeout_is_capped_by_max_timeout(tmp_path: Path) -> None:
    model = ScriptedModel([call("bash", {"command": "sleep 30", "timeout": 100000}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[condukt.tools.Bash(max_timeout=0.5)], cwd=tmp_path
        )
        await agent.run("go")
        result = (await agent.history())[2]
    assert result.is_error
    assert "timed out after 0.5 seconds" in result.text


async def test_command_timeouts_are_capped_too(tmp_path: Path) -> None:
    tool = condukt.tools.Command(command="sleep", max_timeout=0.5)
    model = ScriptedModel([call("sleep", {"args": ["30"], "timeout": 9999}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[tool], cwd=tmp_path)
        await agent.run("go")
        result = (await agent.history())[2]
    assert "timed out after 0.5 seconds" in result.text
