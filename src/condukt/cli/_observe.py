"""``condukt observe``: the observer page of a running app, or of a live offline demo node."""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator
from typing import Any

import trio

import condukt
from condukt.testing import FunctionModel, call, reply

__all__ = ["DemoCrash", "demo_crashes_quiet", "demo_workload"]


class DemoCrash(RuntimeError):
    """The demo's flaky agent's deliberate bug (``condukt observe`` keeps its crash reports off the terminal)."""


@condukt.tool
async def inspect_file(path: str) -> str:
    """Pretends to read a file for a while (the tool call in flight on the page)."""
    await trio.sleep(1.5)
    return f"{path}: 120 lines, no findings"


def _reviewer(request: condukt.ModelRequest) -> Any:
    last = request.messages[-1]
    if type(last).__name__ == "ToolResultMessage":
        return reply(f"Reviewed. {last.text}")
    return call("inspect_file", {"path": last.text})


def _flaky(request: condukt.ModelRequest) -> Any:
    if "crash" in request.messages[-1].text:
        raise DemoCrash("a bug in the agent: the supervisor restarts it")
    return reply("ok")


class Reviewer(condukt.Agent):
    """Reviews one file per run, with a slow tool."""

    model = FunctionModel(_reviewer)
    system_prompt = "You review files."

    def tools(self) -> list[Any]:
        return [inspect_file]


class Flaky(condukt.Agent):
    """Crashes on every prompt containing 'crash' (a bug), so its supervisor restarts it."""

    model = FunctionModel(_flaky)


class _QuietDemo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        return not (info and isinstance(info[1], DemoCrash))


@contextlib.contextmanager
def demo_crashes_quiet() -> Iterator[None]:
    """Within: the crash reports of the demo's flaky agent are not logged (its other logs are)."""
    quiet = _QuietDemo()
    logger = logging.getLogger("condukt.otp")
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


async def demo_workload(
    node: condukt.Node, *, crash_every: float = 12.0, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    """A supervisor of three reviewers and a flaky agent crashing every ``crash_every`` s, busy until cancelled."""
    children = [condukt.ChildSpec(f"reviewer-{i}", Reviewer, name=f"reviewer-{i}") for i in (1, 2, 3)]
    children.append(condukt.ChildSpec("flaky", Flaky, name="flaky"))
    await node.start_supervisor(children, strategy="one_for_one", max_restarts=100, max_seconds=60.0, name="demo")
    task_status.started()
    async with trio.open_nursery() as nursery:
        for i in (1, 2, 3):
            nursery.start_soon(_keep_reviewing, node, f"reviewer-{i}", i)
        nursery.start_soon(_crash_now_and_then, node, crash_every)


async def _keep_reviewing(node: condukt.Node, name: str, offset: int) -> None:
    await trio.sleep(offset * 0.7)
    for n in itertools.count(1):
        agent = node.whereis(name, condukt.AgentHandle)
        if isinstance(agent, condukt.AgentHandle):
            try:
                await agent.run(f"src/module_{offset}_{n}.py")
            except condukt.ConduktError:
                pass  # aborted from the page, or restarting: carry on
        await trio.sleep(1.0)


async def _crash_now_and_then(node: condukt.Node, every: float) -> None:
    while True:
        await trio.sleep(every)
        agent = node.whereis("flaky", condukt.AgentHandle)
        if isinstance(agent, condukt.AgentHandle):
            try:
                await agent.run("please crash")
            except condukt.ConduktError:  # the crash, as the caller sees it
                pass
