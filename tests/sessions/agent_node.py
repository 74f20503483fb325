"""Child process of the agent fault and acceptance tests: a node running one agent on a PostgresStore.

``python agent_node.py MODE DSN SCHEMA KEY LEASE_TTL [EFFECTS]``

``tools`` mode: an agent with ``resume=True`` whose run calls a
non-idempotent tool (``pay``) and an idempotent one (``look``) in each of
``TURNS`` turns; each call first appends ``<tool> <call id>`` to the
EFFECTS file (its effect), then takes a little while. Prints ``ready`` once
the agent owns its key (waiting, as a user would, while a killed
predecessor's lease runs out), then ``done <text>`` when the run finished
(started here, or resumed from the store after a kill).

``owner`` mode: an agent that runs one prompt after another; prints
``ready``, then ``ran <n>`` after each run, and ``lost`` (exit 0) when a run
fails because another owner took the key over (SessionLost), ``owned`` (exit
3) when its spawn finds the key owned.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import trio

import condukt
from condukt.agent import SessionLost
from condukt.events import Done, Event
from condukt.messages import AssistantMessage
from condukt.sessions import PostgresStore, SessionOwned
from condukt.testing import FunctionModel, call, reply

TURNS = 4


class Effect(condukt.Tool):
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    def __init__(self, name: str, path: str, **opts: Any) -> None:
        super().__init__(**opts)
        self.name = name
        self.description = f"{name}s"
        self.path = path

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{self.name} {context.tool_call_id}\n".encode())
        finally:
            os.close(fd)
        await trio.sleep(0.02)
        return f"{self.name} did {context.tool_call_id}"


def tools_model() -> FunctionModel:
    def respond(request: condukt.ModelRequest) -> Any:
        turn = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        if turn < TURNS:
            return [call("pay", {"n": turn}, id=f"pay-{turn}"), call("look", {"n": turn}, id=f"look-{turn}")]
        return reply(f"done after {turn} turns")

    return FunctionModel(respond)


class Watching(condukt.Agent):
    """Sets ``options["done"]`` when a run ends (a resumed one too: nobody else waits for it)."""

    extra_options = frozenset({"done"})

    async def init(self, options: Any) -> None:
        self.done: trio.Event = options["done"]

    async def handle_event(self, event: Event) -> None:
        if isinstance(event, Done):
            self.done.set()


async def spawn_when_free(node: condukt.Node, agent: type[condukt.Agent], **options: Any) -> condukt.AgentHandle:
    while True:
        try:
            return await node.spawn(agent, **options)
        except SessionOwned as exc:
            # A predecessor that died holding the key: its lease runs out after lease_ttl of silence.
            await trio.sleep((exc.retry_after or 0.1) + 0.05)


async def tools_mode(store: PostgresStore, key: str, effects: str) -> None:
    done = trio.Event()
    stored = await store.load(key)
    async with condukt.open_node() as node:
        agent = await spawn_when_free(
            node, Watching, model=tools_model(), cwd=os.getcwd(), session_store=store, id=key, resume=True,
            load_project_instructions=False, done=done,
            tools=[Effect("pay", effects), Effect("look", effects, idempotent=True)],
        )  # fmt: skip
        print("ready", flush=True)
        if stored is not None and stored.run is not None:
            await done.wait()  # resumed from the store by the agent itself
        elif stored is None or not stored.messages or not stored.messages[-1].text.startswith("done"):
            await agent.run("go")  # not started before the kill (or killed before its first save)
        history = await agent.history()
        print("done", history[-1].text, flush=True)
        await agent.stop()


async def owner_mode(store: PostgresStore, key: str) -> None:
    async with condukt.open_node() as node:
        try:
            agent = await node.spawn(
                condukt.Agent, model=FunctionModel(lambda r: reply(f"answer to {r.messages[-1].text}")),
                cwd=os.getcwd(), session_store=store, id=key, load_project_instructions=False,
            )  # fmt: skip
        except SessionOwned:
            print("owned", flush=True)
            sys.exit(3)
        print("ready", flush=True)
        n = 0
        while True:
            try:
                await agent.run(f"child {n}")
            except SessionLost:
                print("lost", flush=True)
                await agent.wait()
                return
            print("ran", n, flush=True)
            n += 1
            await trio.sleep(0.05)


async def main(mode: str, dsn: str, schema: str, key: str, ttl: str, effects: str = "") -> None:
    store = PostgresStore(dsn, schema=schema, lease_ttl=float(ttl))
    try:
        if mode == "tools":
            await tools_mode(store, key, effects)
        else:
            await owner_mode(store, key)
    finally:
        await store.aclose()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
