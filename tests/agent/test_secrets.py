"""A Command's env values never reach the model, the events or the history."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import condukt
from condukt import serialization
from condukt.events import Event, ToolCallEnd
from condukt.messages import Message
from condukt.testing import ScriptedModel, call, reply

from .helpers import Recorder, of_type

SECRET = "tok-5f3a9c1e-very-secret"

PRINT_TOKEN = "import os; print('token is', os.environ['DEPLOY_TOKEN'])"
PRINT_REVERSED = "import os; print('reversed', os.environ['DEPLOY_TOKEN'][::-1])"
PRINT_ENVIRON = "import os, json; print(json.dumps(dict(os.environ)))"
FAIL_LOUDLY = "import os, sys; sys.exit('failed with ' + os.environ['DEPLOY_TOKEN'])"
HANG_AFTER_PRINT = "import os, time; print(os.environ['DEPLOY_TOKEN'], flush=True); time.sleep(60)"


def py(code: str, **extra: Any) -> Any:
    return call("py", {"args": ["-c", code], **extra})


async def test_command_env_never_appears_anywhere(tmp_path: Path) -> None:
    command = condukt.tools.Command(
        command=sys.executable, name="py", description="Run Python.", env={"DEPLOY_TOKEN": SECRET}
    )
    model = ScriptedModel(
        [
            [py(PRINT_TOKEN), py(PRINT_REVERSED), py(PRINT_ENVIRON)],
            [py(FAIL_LOUDLY), py(HANG_AFTER_PRINT, timeout=1)],
            call("bash", {"command": 'echo "bash sees ${DEPLOY_TOKEN:-nothing}"'}),
            reply("done"),
        ]
    )
    log: list[Any] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(
            Recorder, model=model, tools=[command, condukt.tools.Bash], cwd=tmp_path, log=log
        )
        async with agent.stream("use the tools") as events:
            streamed = [event async for event in events]
        assert events.result == "done"
        history = await agent.history()
        agent_repr = repr(agent)
    results = {e.id: e for e in of_type(log, ToolCallEnd)}
    texts = [e.result for e in results.values()]
    # The variable reached the subprocesses, and the output is redacted.
    assert any(f"reversed {SECRET[::-1]}" in t for t in texts)
    assert any("token is [REDACTED:DEPLOY_TOKEN]" in t for t in texts)
    assert any("failed with [REDACTED:DEPLOY_TOKEN]" in t and "(exit code: 1)" in t for t in texts)
    assert any("timed out" in t and "[REDACTED:DEPLOY_TOKEN]" in t for t in texts)
    # Bash in the same agent does not get a Command's env.
    assert any("bash sees nothing" in t for t in texts)

    captured: list[str] = [agent_repr, repr(command), repr(command.definition())]
    for event in [*log, *streamed]:
        captured += [repr(event), serialization.dumps(event, Event)]
    for message in history:
        captured += [repr(message), serialization.dumps(message, Message)]
    for request in model.requests:
        captured += [repr(request), serialization.dumps(request)]
    leaks = [text for text in captured if SECRET in text]
    assert leaks == []
    assert len(model.requests) == 4
