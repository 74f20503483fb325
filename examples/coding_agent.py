"""A coding agent with real tools fixes a bug in a small project, streaming what it does.

    python examples/coding_agent.py             # offline, on a scripted model
    CONDUKT_MODEL=anthropic:claude-sonnet-4-5 python examples/coding_agent.py

The tools are real: files are read and edited in a temporary directory and
the tests run in a subprocess. Only the model's decisions are scripted.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path

import trio

import condukt
from condukt import events as ev
from condukt.testing import ScriptedModel, call, reply

MODEL = os.environ.get("CONDUKT_MODEL")  # unset: the scripted model, offline
PYTHON = shlex.quote(sys.executable)

PROJECT = {
    "stats.py": "def mean(values):\n    return sum(values) / len(values)\n",
    "test_stats.py": (
        "from stats import mean\n"
        "assert mean([1, 2, 3]) == 2\n"
        "assert mean([]) == 0, 'mean([]) should be 0'\n"
        "print('all tests pass')\n"
    ),
}


def scripted_model() -> ScriptedModel:
    return ScriptedModel(
        [
            call("bash", {"command": f"{PYTHON} test_stats.py"}),
            call("read", {"path": "stats.py"}),
            call(
                "edit",
                {
                    "path": "stats.py",
                    "old_text": "    return sum(values) / len(values)",
                    "new_text": "    return sum(values) / len(values) if values else 0",
                },
            ),
            call("bash", {"command": f"{PYTHON} test_stats.py"}),
            reply("Fixed: `mean([])` now returns 0 instead of dividing by zero. The tests pass."),
        ]
    )


class Coder(condukt.Agent):
    system_prompt = f"You fix bugs. Run the tests with `{PYTHON} test_stats.py`, then make them pass."

    def tools(self) -> list[object]:
        return condukt.tools.coding_tools()  # Read, Bash, Edit, Write


async def main() -> None:
    with tempfile.TemporaryDirectory() as project:
        for name, text in PROJECT.items():
            Path(project, name).write_text(text)
        async with condukt.open_node() as node:
            agent = await node.spawn(Coder, model=MODEL or scripted_model(), cwd=project)
            async with agent.stream("Make the tests pass.") as events:
                async for event in events:
                    if isinstance(event, ev.ToolCallStart):
                        print(f"-> {event.name} {event.arguments}")
                    elif isinstance(event, ev.ToolCallEnd):
                        first = (event.result.strip().splitlines() or [""])[0]
                        print(f"<- {event.name}{' (error)' if event.is_error else ''}: {first}")
            print(events.result)
        print(Path(project, "stats.py").read_text(), end="")


if __name__ == "__main__":
    trio.run(main)
