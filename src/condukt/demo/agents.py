"""``python -m condukt.demo``: supervised agents using real tools on a temporary project.

Offline by default: the agents run on scripted models (no API key), but
everything else is real — the OTP supervisor, the agent processes, the tool
calls (files are globbed, grepped, read and edited, commands run in real
subprocesses), concurrency, streaming, a crash and its restart, and a
delegation to two sub-agents running in parallel.

Always offline unless asked: with ``--live`` (``python -m condukt.demo
--live``) and ``ANTHROPIC_API_KEY`` or ``OPENAI_API_KEY`` set, the explorer
and fixer talk to the real (paid) provider instead. A key in the
environment alone never switches it.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import trio

import condukt
from condukt import events as ev
from condukt.testing import FunctionModel, ScriptedModel, call, reply

from . import run_demo

PROJECT = {
    "calc/__init__.py": "",
    "calc/ops.py": textwrap.dedent(
        '''\
        def add(a, b):
            return a + b


        def mean(values):
            # BUG: an empty list crashes with ZeroDivisionError
            return sum(values) / len(values)
        '''
    ),
    "calc/report.py": textwrap.dedent(
        '''\
        from calc.ops import mean


        def summary(values):
            return f"mean={mean(values)}"
        '''
    ),
    "check.py": textwrap.dedent(
        '''\
        from calc.ops import mean
        assert mean([1, 2, 3]) == 2
        assert mean([]) == 0, "mean([]) should be 0"
        print("all checks passed")
        '''
    ),
}

# The interpreter running the demo: ``python`` may not be on PATH.
PYTHON = shlex.quote(sys.executable)

COLORS = {"explorer": "36", "fixer": "33", "flaky": "35", "lead": "32"}


def color(name: str, text: str) -> str:
    if not sys.stdout.isatty():
        return text
    return f"\033[{COLORS.get(name, '0')}m{text}\033[0m"


def say(name: str, text: str) -> None:
    for line in text.splitlines() or [""]:
        print(color(name, f"[{name:>8}] ") + line, flush=True)


def short(value: Any, width: int = 90) -> str:
    text = str(value).replace("\n", " | ")
    return text if len(text) <= width else text[: width - 3] + "..."


async def narrate(name: str, events: condukt.EventStream) -> None:
    """Print a run's events as they arrive."""
    text: list[str] = []
    async for event in events:
        match event:
            case ev.AgentStart(prompt=prompt):
                say(name, f"▶ {short(prompt)}")
            case ev.TextDelta(text=piece):
                text.append(piece)
            case ev.ToolCallStart(name=tool, arguments=args):
                say(name, f"  → {tool}({short(args, 70)})")
            case ev.ToolCallEnd(name=tool, result=result, is_error=is_error):
                mark = "✗" if is_error else "←"
                say(name, f"  {mark} {tool}: {short(result, 78)}")
            case ev.SubagentEvent(role=role, event=ev.ToolCallStart(name=tool, arguments=args)):
                say(name, f"    ({role}) → {tool}({short(args, 60)})")
            case ev.SubagentEvent(role=role, event=ev.AgentEnd(text=answer)):
                say(name, f"    ({role}) answered: {short(answer, 70)}")
            case ev.TurnEnd():
                if text:
                    say(name, "  " + short("".join(text), 100))
                    text.clear()
            case ev.Error(error_type=kind, message=message):
                say(name, f"  ! {kind}: {message}")
            case ev.Done(status=status):
                say(name, f"■ {status}")


def lookup(node: condukt.Node, name: str) -> Any:
    """The agent registered under ``name``, or ``None`` between incarnations."""
    handle = node.whereis(name)
    assert handle is None or isinstance(handle, condukt.AgentHandle)
    return handle


def live_model(live: bool | None = None) -> str | None:
    """The provider model ``--live`` asks for (``None``: offline); ``live`` overrides the command line."""
    if not (("--live" in sys.argv[1:]) if live is None else live):
        return None
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4o-mini"
    return None


def scripted_explorer() -> ScriptedModel:
    return ScriptedModel(
        [
            call("glob", {"pattern": "**/*.py"}),
            [call("grep", {"pattern": "BUG"}), call("read", {"path": "check.py"})],
            reply("`calc.ops.mean` divides by zero on an empty list; check.py expects mean([]) == 0."),
        ]
    )


def scripted_fixer() -> ScriptedModel:
    return ScriptedModel(
        [
            call("bash", {"command": f"{PYTHON} check.py"}),
            call("read", {"path": "calc/ops.py", "offset": 5}),
            call(
                "edit",
                {
                    "path": "calc/ops.py",
                    "old_text": "    # BUG: an empty list crashes with ZeroDivisionError\n"
                    "    return sum(values) / len(values)",
                    "new_text": "    if not values:\n        return 0\n    return sum(values) / len(values)",
                },
            ),
            call("bash", {"command": f"{PYTHON} check.py"}),
            reply("Fixed `mean` to return 0 for an empty list; check.py passes."),
        ]
    )


def flaky_model() -> FunctionModel:
    calls = {"n": 0}

    def respond(request: condukt.ModelRequest) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            # Not a ModelError: a bug in the loop machinery crashes the agent process.
            raise RuntimeError("simulated bug in the agent loop")
        return reply(f"Second incarnation here, {len(request.messages)} message(s) in my fresh history.")

    return FunctionModel(respond, name="flaky")


class Lead(condukt.Agent):
    """Delegates to two sub-agents at once."""

    system_prompt = "You coordinate work by delegating."

    def subagents(self) -> dict[str, Any]:
        return {
            "counter": condukt.Subagent(
                system_prompt="Count Python files.",
                tools=[condukt.tools.Glob],
                model=ScriptedModel([call("glob", {"pattern": "**/*.py"}), reply("There are 4 Python files.")]),
                description="Counts files",
            ),
            "tester": condukt.Subagent(
                system_prompt="Run the checks.",
                tools=[condukt.tools.Bash],
                model=ScriptedModel([call("bash", {"command": f"{PYTHON} check.py"}), reply("Checks pass.")]),
                description="Runs checks",
            ),
        }


async def main(live_flag: bool | None = None) -> None:
    logging.getLogger("condukt").setLevel(logging.CRITICAL)
    live = live_model(live_flag)
    print("condukt demo: supervised agents with real tools on a temporary project")
    offline = "scripted (offline; --live with ANTHROPIC_API_KEY or OPENAI_API_KEY set uses a real one)"
    print(f"model: {live or offline}\n")
    with tempfile.TemporaryDirectory(prefix="condukt-demo-") as tmp:
        root = Path(tmp)
        for rel, content in PROJECT.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(content)
        print(f"project in {root}: {', '.join(PROJECT)}\n")

        async with condukt.open_node() as node:
            read_only = [condukt.tools.Glob, condukt.tools.Grep, condukt.tools.Read]
            sup = await node.start_supervisor(
                [
                    condukt.ChildSpec(
                        "explorer",
                        condukt.Agent,
                        kwargs={"model": live or scripted_explorer(), "cwd": tmp, "tools": read_only},
                        name="explorer",
                    ),
                    condukt.ChildSpec(
                        "fixer",
                        condukt.Agent,
                        kwargs={"model": live or scripted_fixer(), "cwd": tmp, "tools": condukt.tools.coding_tools()},
                        name="fixer",
                    ),
                    condukt.ChildSpec(
                        "flaky", condukt.Agent, kwargs={"model": flaky_model(), "cwd": tmp}, name="flaky"
                    ),
                ],
                strategy="one_for_one",
                name="agents",
            )
            print("1. a one_for_one supervisor runs three agents:")
            for child_id, handle in sup.which_children():
                print(f"   {child_id}: {handle!r}")

            print("\n2. explorer and fixer work concurrently, streaming their events\n")

            async def work(name: str, prompt: str) -> None:
                agent = lookup(node, name)
                async with agent.stream(prompt) as events:
                    await narrate(name, events)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(work, "explorer", "Find the bug marked BUG and explain it.")
                nursery.start_soon(work, "fixer", "Make check.py pass.")

            print("\n3. flaky's loop crashes; its supervisor restarts it\n")
            old = lookup(node, "flaky")
            try:
                await old.run("Say hello.")
            except condukt.CallError as error:
                say("flaky", f"run failed: the agent crashed ({error.reason!r})")
            with trio.fail_after(2):
                while lookup(node, "flaky") in (None, old):
                    await trio.sleep(0.01)
            new = lookup(node, "flaky")
            say("flaky", f"old handle alive? {old.alive}; whereis('flaky') -> {new!r}")
            say("flaky", await new.run("Say hello."))

            print("\n4. a lead agent delegates to two sub-agents at once (supervised, monitored)\n")
            lead = await node.spawn(
                Lead,
                cwd=tmp,
                model=ScriptedModel(
                    [
                        [
                            call("subagent", {"role": "counter", "task": "How many Python files?"}),
                            call("subagent", {"role": "tester", "task": "Do the checks pass?"}),
                        ],
                        reply("4 Python files, and the checks pass."),
                    ]
                ),
            )
            async with lead.stream("Report on the project.") as events:
                await narrate("lead", events)

            print(f"\n5. leaving the node: {node.process_count} processes are stopped in reverse order")
    print("\ndone.")


def run(live: bool | None = None) -> None:
    """Entry point of ``python -m condukt.demo`` (and ``condukt demo``); ``live`` overrides ``--live``."""
    run_demo(functools.partial(main, live))


if __name__ == "__main__":
    run()
