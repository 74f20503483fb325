"""A confined (or sandboxed) agent cannot read or rewrite the session files in its working directory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply


async def tool_results(tmp_path: Path, calls: list[Any], **options: Any) -> list[str]:
    model = ScriptedModel([calls, reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=condukt.tools.coding_tools() + [condukt.tools.Grep], cwd=tmp_path,
            **options,
        )
        await agent.run("go")
        return [m.text for m in (await agent.history())[2:-1]]


async def test_a_confined_agent_cannot_touch_another_agents_snapshot(tmp_path: Path) -> None:
    store = condukt.sessions.DiskStore()
    model = ScriptedModel([reply("hello")])
    async with condukt.open_node() as node:
        victim = await node.spawn(condukt.Agent, model=model, cwd=tmp_path, session_store=store, id="victim")
        await victim.run("hi")
    snapshot = store.bind(tmp_path).path("victim")
    relative = str(snapshot.relative_to(tmp_path))
    before = snapshot.read_bytes()
    texts = await tool_results(
        tmp_path,
        [
            call("read", {"path": relative}),
            call("write", {"path": relative, "content": "{}"}),
            call("edit", {"path": relative, "old_text": "hi", "new_text": "pwned"}),
            call("grep", {"pattern": "hi", "path": ".condukt"}),
            call("read", {"path": "sub/../.condukt/sessions"}),
        ],
        confine_to_cwd=True,
    )
    for text in texts:
        assert "is session storage; confined tools may not touch it" in text
    assert snapshot.read_bytes() == before


@pytest.mark.skipif(
    shutil.which("bwrap") is None or not condukt.sandbox.Bubblewrap.available(), reason="bwrap is not installed or cannot make namespaces (Debian: apt-get install bubblewrap)"
)
async def test_in_bubblewrap_bash_sees_an_empty_session_directory(tmp_path: Path) -> None:
    (tmp_path / ".condukt" / "sessions").mkdir(parents=True)
    (tmp_path / ".condukt" / "sessions" / "s.json").write_text("secret history")
    texts = await tool_results(
        tmp_path,
        [call("bash", {"command": "ls -A .condukt; echo x > .condukt/y 2>&1 || echo refused"})],
        sandbox=condukt.sandbox.Bubblewrap(),
    )
    assert texts == ["refused"] or texts[0].endswith("refused")
    assert (tmp_path / ".condukt" / "sessions" / "s.json").read_text() == "secret history"
