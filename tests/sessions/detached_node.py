"""Child process of test_detached_failover: a node with an agent on a PostgresStore key, running a detached run.

``python detached_node.py DSN SCHEMA KEY LEASE_TTL submit``: submits a run whose
tool blocks for good, prints ``run <id>``, then ``logged <index>`` once the
tool call's start is in the run's log (read through ``attach``, which shows
only what the store holds), and waits to be killed.

``python detached_node.py DSN SCHEMA KEY LEASE_TTL resume RUN_ID``: starts the
agent on the key with ``resume=True`` (retrying while the dead node's lease
has not expired), attaches to ``RUN_ID`` from the start, prints each event as
``event <index> <json>``, then ``result <json>``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

import condukt
from condukt.events import ToolCallStart, to_json
from condukt.messages import ToolResultMessage
from condukt.sessions import PostgresStore, SessionOwned
from condukt.testing import FunctionModel, call, reply

BLOCK = sys.argv[5] == "submit"


@condukt.tool
async def deploy() -> str:
    """Deploys (in the first node: forever)."""
    if BLOCK:
        await trio.sleep_forever()
    return "deployed"


def answer(request: condukt.ModelRequest) -> Any:
    last = request.messages[-1]
    if type(last) is ToolResultMessage:
        return reply("after: " + last.text)
    return [reply("deploying"), call("deploy", {})]


class Deployer(condukt.Agent):
    model = FunctionModel(answer)

    def tools(self) -> list[Any]:
        return [deploy]


async def main(dsn: str, schema: str, key: str, ttl: str, mode: str, run_id: str = "") -> None:
    store = PostgresStore(dsn, schema=schema, lease_ttl=float(ttl))
    async with condukt.open_node() as node:
        options = {"session_store": store, "id": key, "resume": True, "load_project_instructions": False}
        if mode == "submit":
            agent = await node.spawn(Deployer, **options)
            run_id = await agent.submit("deploy it")
            print("run", run_id, flush=True)
            async with agent.attach(run_id) as events:
                async for event in events:
                    if type(event) is ToolCallStart:
                        print("logged", events.index, flush=True)
                        break
            await trio.sleep_forever()
        while True:
            try:
                agent = await node.spawn(Deployer, **options)
                break
            except SessionOwned:
                await trio.sleep(0.1)  # the dead node's lease expires after lease_ttl
        print("started", flush=True)
        async with agent.attach(run_id) as events:
            async for event in events:
                print("event", events.index, json.dumps(to_json(event)), flush=True)
        print("result", json.dumps(await agent.result(run_id)), flush=True)
        await agent.stop()
    await store.aclose()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
