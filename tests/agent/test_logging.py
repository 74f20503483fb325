"""Crash reports and tool failures go through ``logging`` (the ``condukt`` logger), once each."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply

from .helpers import Crash


class Buggy(condukt.Agent):
    async def handle_event(self, event: Any) -> None:
        if isinstance(event, condukt.events.TurnEnd) and event.turn == 2:
            raise RuntimeError("bug in handle_event")


async def test_a_crash_and_a_tool_failure_are_each_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="condukt")
    model = ScriptedModel([call("crash"), reply("answer")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Buggy, model=model, tools=[Crash])
        with pytest.raises(condukt.CallError):
            await agent.run("go")
    records = [r for r in caplog.records if r.name.startswith("condukt") and r.levelno >= logging.WARNING]
    assert [(r.name, r.levelname) for r in records] == [
        ("condukt.agent", "WARNING"),  # the tool failure: reported to the model, logged for you
        ("condukt.otp", "ERROR"),  # the crash of the agent process
    ]
    tool_failure, crash = records
    assert tool_failure.getMessage().count("Traceback") == 1 and "kaboom" in tool_failure.getMessage()
    assert crash.exc_info is not None and isinstance(crash.exc_info[1], RuntimeError)
    assert "crashed" in crash.getMessage()
