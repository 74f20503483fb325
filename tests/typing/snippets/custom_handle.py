"""A behaviour with its own handle class: spawn and start_child are typed as that class."""

from __future__ import annotations

from typing import Any, ClassVar, assert_type

import condukt


class RunnerHandle(condukt.Handle):
    """The client API of a Runner, as a behaviour adds it."""

    __slots__ = ()

    async def run(self, prompt: str) -> str:
        reply: str = await self.call(("run", prompt))
        return reply


class Runner(condukt.Server):
    """A behaviour: sets handle_class without annotating it, as condukt.Agent does."""

    handle_class = RunnerHandle

    async def init(self, model: str = "m") -> None:
        self.model = model

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return f"{self.model}: {request[1]}"


class AnnotatedRunner(condukt.Server):
    """The same with the class variable annotated: also inferred."""

    handle_class: ClassVar[type[RunnerHandle]] = RunnerHandle


class MyRunner(Runner):
    """A user's subclass of the behaviour, with no type parameters written."""

    async def init(self, model: str = "m", *, style: str = "terse") -> None:
        await super().init(model)
        self.style = style


async def main() -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(MyRunner, model="m", style="long")
        assert_type(h, RunnerHandle)
        text = await h.run("x")
        assert_type(text, str)

        assert_type(await node.spawn(Runner), RunnerHandle)
        assert_type(await node.spawn(AnnotatedRunner), RunnerHandle)

        spec = condukt.ChildSpec(None, MyRunner, kwargs={"model": "m"})
        assert_type(spec, condukt.ChildSpec[RunnerHandle])
        dyn = await node.start_dynamic_supervisor()
        child = await dyn.start_child(spec)
        assert_type(child, RunnerHandle)
        await child.run("y")

        sup = await node.start_supervisor([condukt.ChildSpec("a", Runner)])
        assert_type(sup, condukt.SupervisorHandle)
        other = await sup.start_child(condukt.ChildSpec("b", MyRunner))
        assert_type(other, RunnerHandle)

        found = node.whereis("runner", RunnerHandle)
        assert_type(found, RunnerHandle | None)
        if found is not None:
            await found.run("z")
