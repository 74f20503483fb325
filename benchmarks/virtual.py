"""Virtual agents (condukt.virtual): a call to an active key against a plain handle, and activation from a store.

Baselines, measured in the same run on one node:

1. **Active call.** ``await virtual.call(payload)`` through the
   :class:`~condukt.virtual.VirtualHandle` of a key already active, against
   ``await handle.call(payload)`` on the plain handle of the same process.
   Interleaved rounds, best of each.
2. **Activation from the store.** A passivated ``condukt.Agent`` whose
   session (10 messages) is in a ``MemoryStore``: the first call
   (``history()``) activates it (lease, spawn, load) and answers; against
   ``history()`` of the same agent once active.

    python benchmarks/virtual.py
"""

from __future__ import annotations

import sys
import time
from typing import Any

import trio

import condukt
from condukt.sessions import MemoryStore
from condukt.testing import FunctionModel

CALLS = 20_000
ACTIVATIONS = 300
PAYLOAD = {"text": "x" * 200, "n": 1}


class Echo(condukt.Server):
    async def init(self, id: str = "") -> None:  # noqa: A002 - the virtual key
        self.key = id

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return request


def echo_last(request: condukt.ModelRequest) -> str:
    return "echo: " + request.messages[-1].text


async def main() -> None:
    print(f"condukt {condukt.__version__}, trio {trio.__version__}, Python {sys.version.split()[0]}")
    async with condukt.open_node() as node:
        virtual = await node.agent(Echo, "echo")
        await virtual.call(PAYLOAD)
        plain = virtual.active
        assert plain is not None
        best = {"virtual": float("inf"), "plain": float("inf")}
        for _ in range(7):
            for label, target in (("virtual", virtual), ("plain", plain)):
                start = time.perf_counter()
                for _ in range(CALLS):
                    await target.call(PAYLOAD)
                best[label] = min(best[label], time.perf_counter() - start)
        virtual_us, plain_us = (best[label] / CALLS * 1e6 for label in ("virtual", "plain"))
        print("  call to an active key (one node):")
        print(f"    VirtualHandle.call              {virtual_us:9.2f} us")
        print(f"    plain Handle.call               {plain_us:9.2f} us")
        print(f"    ratio                           {virtual_us / plain_us:9.2f}x  (target <= 1.2x)")

        store = MemoryStore()
        model = FunctionModel(echo_last)
        activation = active = float("inf")
        for i in range(ACTIVATIONS):
            agent = await node.agent(condukt.Agent, f"user-{i}", model=model, session_store=store)
            for turn in range(5):
                await agent.run(f"turn {turn}")  # 10 messages in the store
            await agent.stop("passivated")
            start = time.perf_counter()
            history = await agent.history()  # activates: lease, spawn, load
            activation = min(activation, time.perf_counter() - start)
            assert len(history) == 10
            start = time.perf_counter()
            await agent.history()
            active = min(active, time.perf_counter() - start)
            await agent.stop()
        print(f"  activation from a MemoryStore, 10-message history (best of {ACTIVATIONS}):")
        print(f"    first call (activates)          {activation * 1e3:9.3f} ms  (target <= 5 ms)")
        print(f"    the same call once active       {active * 1e3:9.3f} ms")


if __name__ == "__main__":
    trio.run(main)
