"""Handle.call round trip, many callers into one server, and cast throughput.

Baselines, run in the same process: a raw trio "actor" (a task reading an
``open_memory_channel`` mailbox) answering through a ``trio.Event`` and a
slot; and raw channel send/receive for one-way messages.

    python benchmarks/otp_call.py
"""

from __future__ import annotations

import time

import trio
from _common import best_of, report

import condukt

N = 50_000
CALLERS, PER_CALLER = 1_000, 100


class Echo(condukt.Server):
    async def handle_call(self, request, caller):
        return request

    async def handle_cast(self, message):
        pass


class _Slot:
    __slots__ = ("event", "value")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.value = None


async def raw_actor(receive: trio.MemoryReceiveChannel) -> None:
    async for request, slot in receive:
        slot.value = request
        slot.event.set()


async def raw_call(send: trio.MemorySendChannel, request: object) -> object:
    slot = _Slot()
    await send.send((request, slot))
    await slot.event.wait()
    return slot.value


async def main() -> None:
    rows = []
    async with trio.open_nursery() as nursery:
        send, receive = trio.open_memory_channel(1024)
        nursery.start_soon(raw_actor, receive)

        async def raw_seq() -> float:
            t = time.perf_counter()
            for i in range(N):
                await raw_call(send, i)
            return time.perf_counter() - t

        async def raw_many() -> float:
            async def caller():
                for i in range(PER_CALLER):
                    await raw_call(send, i)

            t = time.perf_counter()
            async with trio.open_nursery() as n:
                for _ in range(CALLERS):
                    n.start_soon(caller)
            return time.perf_counter() - t

        cast_send, cast_receive = trio.open_memory_channel(1024)

        async def sink(receive):
            async for _ in receive:
                pass

        nursery.start_soon(sink, cast_receive)

        async def raw_cast() -> float:
            t = time.perf_counter()
            for i in range(N):
                await cast_send.send(i)
            return time.perf_counter() - t

        async with condukt.open_node() as node:
            echo = await node.spawn(Echo)

            async def our_seq() -> float:
                t = time.perf_counter()
                for i in range(N):
                    await echo.call(i)
                return time.perf_counter() - t

            async def our_many() -> float:
                async def caller():
                    for i in range(PER_CALLER):
                        await echo.call(i)

                t = time.perf_counter()
                async with trio.open_nursery() as n:
                    for _ in range(CALLERS):
                        n.start_soon(caller)
                return time.perf_counter() - t

            async def our_cast() -> float:
                t = time.perf_counter()
                for i in range(N):
                    await echo.cast(i)
                await echo.call("sync")
                return time.perf_counter() - t

            raw_s = await best_of(5, raw_seq) / N * 1e6
            our_s = await best_of(5, our_seq) / N * 1e6
            raw_m = await best_of(3, raw_many) / (CALLERS * PER_CALLER) * 1e6
            our_m = await best_of(3, our_many) / (CALLERS * PER_CALLER) * 1e6
            raw_c = await best_of(5, raw_cast) / N * 1e6
            our_c = await best_of(5, our_cast) / N * 1e6
        nursery.cancel_scope.cancel()
    rows += [
        ("raw request/reply (µs/call)", raw_s, "µs"),
        ("Handle.call (µs/call)", our_s, "µs"),
        ("raw, 1000 callers x 100 (µs/call)", raw_m, "µs"),
        ("Handle.call, 1000 callers x 100 (µs/call)", our_m, "µs"),
        ("raw channel send (µs/msg)", raw_c, "µs"),
        ("Handle.cast (µs/msg)", our_c, "µs"),
    ]
    report(rows)
    print(f"call ratio vs raw request/reply: {our_s / raw_s:.2f}x (target <= 1.2x, limit 1.5x)")
    print(f"many-callers per-call cost vs sequential raw: {our_m / raw_s:.2f}x (limit 0.5x)")
    print(f"cast throughput vs raw channel: {raw_c / our_c:.2f}x (limit >= 1x)")


if __name__ == "__main__":
    trio.run(main)
