"""The HTTP endpoint (condukt.web) against a bare ASGI handler running the same agent, in the same process.

    python benchmarks/web_endpoint.py [N]

1. CPU per request: N ``POST /agents/a/runs`` (JSON) through ``create_app``
   against N requests to a hand-written ASGI handler that parses the same
   JSON body, runs the same agent (agent_loop.py's workload: 2 model turns
   and 1 tool call, in-process model) and sends the same JSON answer. Both
   continue one session for 50 requests, then start a new one. Requests are
   driven by calling the ASGI app directly (no sockets, no client), so the
   difference is what the endpoint adds: routing, auth, the body limit,
   validation, the session table, the usage capture. Target (issue 12):
   at most 0.3 ms per request.
2. Memory of 1,000 concurrent SSE streams: N streaming runs held in flight
   (the model waits before its second turn), the memory Python allocated
   for them (tracemalloc, so memory freed by an earlier phase cannot hide
   anything) against the same N agents streaming directly on trio (no
   HTTP), and RSS sampled while they are held (flat: nothing grows while
   streams are held).
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import json
import sys
import time
import tracemalloc
from typing import Any

import anyio
import starlette
import trio
from _common import rss_kb
from agent_loop import OPTIONS, Held, TwoTurns

import condukt
import condukt.asyncio as ca
import condukt.web

TOKEN = "bench-token"
BATCH = 50


def scope(path: str, *, stream: bool = False) -> dict[str, Any]:
    headers = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]
    if stream:
        headers.append((b"accept", b"text/event-stream"))
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }  # fmt: skip


async def post(app: Any, path: str, body: dict[str, Any], *, stream: bool = False,
               disconnect: trio.Event | None = None) -> tuple[int, bytes]:
    """One request straight through the ASGI interface; returns the status and the whole body."""
    payload = json.dumps(body).encode()
    sent = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        if disconnect is None:
            await anyio.sleep_forever()
        else:
            await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message.get("body"):
            chunks.append(message["body"])

    await app(scope(path, stream=stream), receive, send)
    return status, b"".join(chunks)


def bare_app(node: Any) -> Any:
    """The baseline: a hand-written ASGI handler running the same agent, sessions in a dict."""
    sessions: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        body = json.loads(message["body"])
        agent = sessions.get(body.get("session") or "")
        if agent is None:
            agent = await node.spawn(condukt.Agent, model=TwoTurns(), **OPTIONS)
            sessions[agent.session_id] = agent
        text = await agent.run(body["prompt"])
        answer = json.dumps({"session": agent.session_id, "text": text}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})

    return app


async def cpu_per_request(app: Any, n: int) -> float:
    session = None
    for _ in range(20):  # warm up
        status, body = await post(app, "/agents/a/runs", {"prompt": "go", "session": session})
        assert status == 200, body
        session = json.loads(body)["session"]
    gc.collect()
    start = time.process_time()
    for i in range(n):
        if i % BATCH == 0:
            session = None
        status, body = await post(app, "/agents/a/runs", {"prompt": "go", "session": session})
        session = json.loads(body)["session"]
    return (time.process_time() - start) / n


async def compare(node: Any, n: int) -> tuple[float, float]:
    """Best of 3 CPU per request on ``node`` (trio or condukt.asyncio): the endpoint, then the bare handler."""
    spec = condukt.ChildSpec(None, condukt.Agent, kwargs={"model": TwoTurns(), **OPTIONS})
    endpoint = condukt.web.create_app(node, agents={"a": spec}, token=TOKEN, session_idle_timeout=None)
    bare = bare_app(node)
    best_endpoint = best_bare = float("inf")
    for _ in range(3):
        best_bare = min(best_bare, await cpu_per_request(bare, n))
        best_endpoint = min(best_endpoint, await cpu_per_request(endpoint, n))
    return best_endpoint, best_bare


async def endpoint_overhead(n: int) -> tuple[float, float]:
    async with condukt.open_node() as node:
        return await compare(node, n)


async def endpoint_overhead_on_asyncio(n: int) -> tuple[float, float]:
    """The same comparison on asyncio: both apps on a condukt.asyncio node (trio as a guest)."""
    async with ca.open_node() as node:
        return await compare(node, n)


class CountingHeld(Held):
    def __init__(self) -> None:
        super().__init__()
        self.waiting = 0

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> Any:
        if type(request.messages[-1]).__name__ == "ToolResultMessage":
            self.waiting += 1
        return await super().complete(request, emit)


async def wait_held(model: CountingHeld, n: int) -> None:
    with trio.fail_after(120):
        while model.waiting < n:
            await trio.sleep(0.01)


async def sse_memory(n: int) -> tuple[float, float, list[int]]:
    """KiB allocated per held stream through the endpoint, the same on trio directly, RSS samples (KiB) while held."""
    async with condukt.open_node() as node:
        model = CountingHeld()
        spec = condukt.ChildSpec(None, condukt.Agent, kwargs={"model": model, **OPTIONS})
        app = condukt.web.create_app(node, agents={"a": spec}, token=TOKEN, max_sessions=n + 10,
                                     session_idle_timeout=None)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        disconnect = trio.Event()
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(lambda: post(app, "/agents/a/runs", {"prompt": "go"}, stream=True,
                                                disconnect=disconnect))
            await wait_held(model, n)
            gc.collect()
            held_http = (tracemalloc.get_traced_memory()[0] - before) / n / 1024
            tracemalloc.stop()
            samples = []
            for _ in range(4):
                gc.collect()
                samples.append(rss_kb())
                await trio.sleep(0.5)
            model.gate.set()
        # Baseline: the same runs streamed on trio directly.
        direct = CountingHeld()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        agents = [await node.spawn(condukt.Agent, model=direct, **OPTIONS) for _ in range(n)]

        async def consume(agent: Any) -> None:
            async with agent.stream("go") as events:
                async for _ in events:
                    pass

        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(consume, agent)
            await wait_held(direct, n)
            gc.collect()
            held_direct = (tracemalloc.get_traced_memory()[0] - before) / n / 1024
            tracemalloc.stop()
            direct.gate.set()
        return held_http, held_direct, samples


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(f"web_endpoint, {datetime.date.today()}, condukt {condukt.__version__}, Python {sys.version.split()[0]}, "
          f"trio {trio.__version__}, Starlette {starlette.__version__}; N={n}")
    endpoint, bare = await endpoint_overhead(n)
    print(f"  trio: CPU per JSON run request (best of 3):  bare ASGI {bare * 1e3:.3f} ms   endpoint "
          f"{endpoint * 1e3:.3f} ms   added {(endpoint - bare) * 1e3:.3f} ms ({endpoint / bare:.2f}×)")
    endpoint, bare = await trio.to_thread.run_sync(asyncio.run, endpoint_overhead_on_asyncio(n))
    print(f"  asyncio: CPU per JSON run request (best of 3):  bare ASGI {bare * 1e3:.3f} ms   endpoint "
          f"{endpoint * 1e3:.3f} ms   added {(endpoint - bare) * 1e3:.3f} ms ({endpoint / bare:.2f}×)")
    http, direct, samples = await sse_memory(n)
    print(f"  {n} SSE streams held: {http:.1f} KiB per stream (trio streams without HTTP: {direct:.1f} KiB, "
          f"{http / direct:.2f}×)")
    growth = samples[-1] - samples[0]
    print(f"  RSS while held, every 0.5 s: {', '.join(f'{s / 1024:.1f}' for s in samples)} MiB "
          f"(growth {growth} KiB over 1.5 s)")


if __name__ == "__main__":
    trio.run(main)
