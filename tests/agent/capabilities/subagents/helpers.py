"""Models and agents shared by the sub-agent tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

import condukt
from condukt.testing import FunctionModel, ScriptedModel, call, reply


def delegate(*tasks: tuple[str, str] | dict[str, Any], then: str = "all done") -> ScriptedModel:
    """A parent model: one turn delegating every task (``(role, task)`` or full arguments), then ``then``."""
    calls = [call("subagent", t if isinstance(t, dict) else {"role": t[0], "task": t[1]}) for t in tasks]
    return ScriptedModel([calls, reply(then)])


class Timeline:
    """Start and end times (virtual clock) of each child's model turn, by name."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}

    def model(self, name: str, seconds: float = 1.0) -> FunctionModel:
        """A child model that takes ``seconds`` and answers ``"<name> done"``."""

        async def respond(request: condukt.ModelRequest) -> Any:
            start = trio.current_time()
            await trio.sleep(seconds)
            self.spans[name] = (start, trio.current_time())
            return reply(f"{name} done")

        return FunctionModel(respond, name=name)

    def overlap(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.spans[a], self.spans[b]
        return a0 < b1 and b0 < a1


class Probe(condukt.Agent):
    """A child that records its handle and start options in ``options["probe"]``."""
    extra_options = frozenset({"probe"})

    async def init(self, options: Mapping[str, Any]) -> None:
        probe = options.get("probe")
        if probe is not None:
            probe.append((self.handle, dict(options)))


async def spawn_parent(node: condukt.Node, model: Any, roles: Mapping[str, Any], **options: Any) -> Any:
    return await node.spawn(
        condukt.Agent, model=model, subagents=roles, load_project_instructions=False, **options
    )


def stuck_roles(probe: list[Any], *names: str) -> dict[str, Any]:
    """Roles of :class:`Probe` children whose model answers only after 1000 s."""

    async def slow(request: condukt.ModelRequest) -> Any:
        await trio.sleep(1000)
        return reply("too late")

    return {name: (Probe, {"probe": probe, "model": FunctionModel(slow)}) for name in names}


async def run_failing(agent: Any, error: type[BaseException], failures: list[BaseException]) -> None:
    """Run ``"Go"`` on ``agent``, which must fail with ``error``; the error goes to ``failures``."""
    try:
        await agent.run("Go")
    except error as exc:
        failures.append(exc)
