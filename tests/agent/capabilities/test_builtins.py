"""``condukt.agent.capabilities``: the built-ins, one module each, in one list; the kernel names none of them."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import condukt
import condukt.agent.capabilities as wing
from condukt.agent import AgentContext, Capability, Run
from condukt.agent.capabilities import BUILTINS, ORDER, OWN, Builtin
from condukt.compaction import Sliding
from condukt.testing import ScriptedModel, reply

#: The kernel: the modules of condukt.agent that run any agent, whatever its features.
KERNEL = ["_capability", "_context", "_lifecycle", "_loop", "_run", "_state", "_tool_calls"]


def test_the_list_holds_every_built_in_once_and_the_place_of_the_agents_own() -> None:
    assert ORDER.count(OWN) == 1
    assert BUILTINS == tuple(entry for entry in ORDER if entry is not OWN)
    assert len(set(BUILTINS)) == len(BUILTINS)
    assert [cls.__name__ for cls in BUILTINS] == [
        "StructuredOutput", "Resumption", "Scrubbing", "Persistence", "ProjectInstructions", "Subagents",
        "Compaction", "ToolSources", "Approvals", "ToolJournal", "ResumeCheckpoints", "Telemetry",
    ]  # fmt: skip
    for cls in BUILTINS:
        assert issubclass(cls, Builtin)
        assert {"at_start", "once_resolved", "for_run"} & set(vars(cls)), f"{cls.__name__} never applies"
        assert cls.__module__.startswith("condukt.agent.capabilities.")
        assert inspect.getdoc(cls)


def test_every_built_in_of_the_wing_is_in_the_list() -> None:
    """A module that defines a built-in without its line in ORDER fails here (and would never run)."""
    defined = set()
    for module_info in pkgutil.iter_modules(wing.__path__):
        module = importlib.import_module(f"{wing.__name__}.{module_info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, Builtin) and value is not Builtin and value.__module__ == module.__name__:
                defined.add(value)
    assert defined == set(BUILTINS)


def _imports_of(module: str) -> list[tuple[str, list[str]]]:
    path = Path(importlib.import_module(f"condukt.agent.{module}").__file__ or "")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            found.append(("." * node.level + (node.module or ""), [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def test_the_kernel_names_no_feature() -> None:
    """Only ``_plan`` reads the wing, and only its list: the loop grows no branch per feature."""
    for module in KERNEL:
        wing_imports = [target for target, _ in _imports_of(module) if "capabilities" in target]
        assert wing_imports == [], module
    assert [(t, n) for t, n in _imports_of("_plan") if "capabilities" in t] == [(".capabilities", ["ORDER", "OWN"])]


async def test_the_agents_own_capabilities_run_where_own_is() -> None:
    """After compaction (before OWN): an own ``after_run`` sees the history compaction left."""
    seen: list[int] = []

    class Measure(Capability):
        async def after_run(self, run: Run, failure: BaseException | None) -> None:
            seen.append(len(run.context.messages))

        async def setup(self, ctx: AgentContext) -> None:
            seen.append(-1 if ctx.config.compactor is None else 0)

    model = ScriptedModel([reply("1"), reply("2"), reply("3")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, compactor=Sliding(keep=2), capabilities=[Measure()])
        for prompt in ["a", "b", "c"]:
            await agent.run(prompt)
    assert seen == [0, 2, 2, 2]
