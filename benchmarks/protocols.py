"""The protocol adapters' per-request overhead against condukt.web's own routes, same run, same process.

    python benchmarks/protocols.py [N]

Every request runs agent_loop.py's workload (2 model turns and 1 tool call,
in-process model) on a new conversation, driven straight through the ASGI
interface (no sockets, no client), CPU per request, the best of 5 rounds
(every case once per round, interleaved):

* baselines: ``POST /agents/a/runs`` of ``condukt.web.create_app``, as JSON
  and as SSE (``Accept: text/event-stream``), each request a new session,
  stopped after the answer (a session's lifecycle ends so);
* ``openai_app``: ``/v1/chat/completions`` (JSON and streamed) and
  ``/v1/responses`` (JSON, ``store: false``): the request's messages on a
  fresh agent, stopped after the answer;
* ``ag_ui_app`` and ``vercel_ai_app``: their streams (against the SSE baseline);
* ``condukt.a2a.asgi_app``: ``message/send`` (JSON-RPC), one context for 50
  messages as the A2A baseline continues one session for 50 runs.

Prints each adapter's CPU per request and its ratio to the baseline of the
same kind (JSON or stream). Target (issue 34): at most 1.3x.
"""

from __future__ import annotations

import datetime
import gc
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from agent_loop import OPTIONS, TwoTurns
from web_endpoint import TOKEN, post

import condukt
import condukt.a2a
import condukt.web

BATCH = 50


def sdk_floor() -> Any:
    """The a2a-sdk's JSON-RPC route with a handler that answers every message at once.

    Its answer is shaped as condukt's is (the user's message and the
    agent's in the history, the answer as status message and artifact), so
    the SDK serialises as much.
    """
    from a2a.helpers import new_text_part
    from a2a.server.request_handlers import RequestHandler
    from a2a.server.routes import create_jsonrpc_routes
    from a2a.types import Artifact, Message, Role, Task, TaskState, TaskStatus
    from starlette.applications import Starlette

    async def answer(self: Any, params: Any, context: Any) -> Task:
        task_id, context_id = uuid.uuid4().hex, params.message.context_id
        reply = Message(message_id=uuid.uuid4().hex, context_id=context_id, task_id=task_id, role=Role.ROLE_AGENT,
                        parts=[new_text_part("done")])
        task = Task(id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
                    history=[params.message, reply],
                    artifacts=[Artifact(artifact_id=uuid.uuid4().hex, name="answer", parts=[new_text_part("done")])])
        task.status.message.CopyFrom(reply)
        task.status.timestamp.GetCurrentTime()
        return task

    names = [name for name in RequestHandler.__abstractmethods__]
    Handler = type("Handler", (RequestHandler,), {**{name: answer for name in names}, "on_message_send": answer})
    return Starlette(routes=create_jsonrpc_routes(Handler(), "/", enable_v0_3_compat=True))


async def per_request(n: int, request: Callable[[int], Awaitable[None]], cleanup: Callable[[], Awaitable[None]]) -> float:
    """CPU seconds per ``await request(i)`` over ``n`` requests, ``cleanup()`` (not timed) every BATCH requests."""
    gc.collect()
    used = 0.0
    for batch in range(n // BATCH):
        start = time.process_time()
        for i in range(BATCH):
            await request(batch * BATCH + i)
        used += time.process_time() - start
        await cleanup()
    return used / (n // BATCH * BATCH)


Case = tuple[Callable[[int], Awaitable[None]], Callable[[], Awaitable[None]]]


async def best_of(rounds: int, n: int, cases: dict[str, Case]) -> dict[str, float]:
    """The best per-request CPU of each case over ``rounds`` rounds, the cases interleaved within each round.

    Interleaved, a change in the machine's load (it is shared) reaches the
    baselines and the adapters alike.
    """
    for request, cleanup in cases.values():  # warm up
        for i in range(20):
            await request(i)
        await cleanup()
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(rounds):
        for name, (request, cleanup) in cases.items():
            best[name] = min(best[name], await per_request(n, request, cleanup))
    return best


def ok(status: int, body: bytes, needle: bytes) -> None:
    assert status == 200 and needle in body, (status, body[:300])


async def main(n: int) -> None:
    spec = condukt.ChildSpec(None, condukt.Agent, kwargs={"model": TwoTurns(), **OPTIONS})
    async with condukt.open_node() as node:
        web = condukt.web.create_app(node, agents={"a": spec}, token=TOKEN, max_sessions=BATCH * 4,
                                     session_idle_timeout=None)
        sessions = web.state.condukt_endpoint.sessions

        async def close_sessions() -> None:
            for session_id in list(sessions._table):
                await sessions.close(session_id)

        # A new session's lifecycle ends with its agent stopped (DELETE, or its idle timeout): timed too,
        # as the adapters' stop of their per-request agent is.
        async def web_json(i: int) -> None:
            status, body = await post(web, "/agents/a/runs", {"prompt": "go"})
            ok(status, body, b'"done"')
            await sessions.close(json.loads(body)["session"])

        async def web_sse(i: int) -> None:
            status, body = await post(web, "/agents/a/runs", {"prompt": "go"}, stream=True)
            ok(status, body, b"event: done")
            await sessions.close(body.split(b'"session_id":"', 1)[1].split(b'"', 1)[0].decode())

        openai = condukt.web.openai_app(node, agents={"a": spec}, token=TOKEN)
        hello = [{"role": "user", "content": "go"}]

        async def chat(i: int) -> None:
            status, body = await post(openai, "/v1/chat/completions", {"model": "a", "messages": hello})
            ok(status, body, b'"done"')

        async def chat_stream(i: int) -> None:
            status, body = await post(openai, "/v1/chat/completions", {"model": "a", "messages": hello,
                                                                       "stream": True})
            ok(status, body, b"[DONE]")

        async def responses(i: int) -> None:
            status, body = await post(openai, "/v1/responses", {"model": "a", "input": "go", "store": False})
            ok(status, body, b'"done"')

        ag_ui = condukt.web.ag_ui_app(node, agent=spec, token=TOKEN)

        async def ag_ui_run(i: int) -> None:
            status, body = await post(ag_ui, "/", {"threadId": f"t{i}", "runId": f"r{i}", "state": {}, "tools": [],
                                                   "context": [], "forwardedProps": {},
                                                   "messages": [{"id": "u", "role": "user", "content": "go"}]})
            ok(status, body, b"RUN_FINISHED")

        vercel = condukt.web.vercel_ai_app(node, agent=spec, token=TOKEN)

        async def vercel_chat(i: int) -> None:
            status, body = await post(vercel, "/", {"id": f"c{i}", "messages": [
                {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}]})
            ok(status, body, b"[DONE]")

        a2a = condukt.a2a.asgi_app(node, agent=spec, name="a", description="bench", token=TOKEN,
                                   session_idle_timeout=None)
        contexts: dict[int, str] = {}
        web_sessions: dict[int, str] = {}

        async def a2a_send(i: int) -> None:
            context = contexts.setdefault(i // BATCH, uuid.uuid4().hex)
            status, body = await post(a2a, "/", {"jsonrpc": "2.0", "id": i, "method": "message/send", "params": {
                "message": {"role": "user", "messageId": f"m{i}", "contextId": context,
                            "parts": [{"kind": "text", "text": "go"}]}}})
            ok(status, body, b'"completed"')

        async def web_json_continued(i: int) -> None:
            session = web_sessions.get(i // BATCH)
            status, body = await post(web, "/agents/a/runs", {"prompt": "go", "session": session})
            ok(status, body, b'"done"')
            web_sessions[i // BATCH] = json.loads(body)["session"]

        floor = sdk_floor()

        async def a2a_floor(i: int) -> None:
            status, body = await post(floor, "/", {"jsonrpc": "2.0", "id": i, "method": "message/send", "params": {
                "message": {"role": "user", "messageId": f"m{i}", "contextId": "c",
                            "parts": [{"kind": "text", "text": "go"}]}}})
            ok(status, body, b'"completed"')

        async def nothing() -> None:
            pass

        async def close_continued() -> None:
            web_sessions.clear()
            await close_sessions()

        async def new_contexts() -> None:
            contexts.clear()  # the next batch starts a new context (its old agent stays, as a client's would)

        best = await best_of(5, n, {
            "json": (web_json, nothing), "sse": (web_sse, nothing), "continued": (web_json_continued, close_continued),
            "chat": (chat, nothing), "responses": (responses, nothing), "chat_stream": (chat_stream, nothing),
            "ag_ui": (ag_ui_run, nothing), "vercel": (vercel_chat, nothing), "a2a": (a2a_send, new_contexts),
            "a2a_floor": (a2a_floor, nothing),
        })
        baseline_json, baseline_sse, baseline_continued = best["json"], best["sse"], best["continued"]
        rows = [
            ("openai_app chat completion (JSON)", best["chat"], baseline_json, "JSON"),
            ("openai_app responses, store false (JSON)", best["responses"], baseline_json, "JSON"),
            ("openai_app chat completion (stream)", best["chat_stream"], baseline_sse, "SSE"),
            ("ag_ui_app run (stream)", best["ag_ui"], baseline_sse, "SSE"),
            ("vercel_ai_app chat (stream)", best["vercel"], baseline_sse, "SSE"),
            ("condukt.a2a message/send (JSON-RPC)", best["a2a"], baseline_continued, "JSON, one session per 50"),
        ]
        sdk_alone = best["a2a_floor"]
    print(f"python benchmarks/protocols.py {n} — {datetime.date.today()}, condukt {condukt.__version__}, "
          f"Python {sys.version.split()[0]}, trio {trio.__version__}")
    print(f"  baseline condukt.web JSON run, new session:      {baseline_json * 1e3:.3f} ms")
    print(f"  baseline condukt.web SSE run, new session:       {baseline_sse * 1e3:.3f} ms")
    print(f"  baseline condukt.web JSON run, session per 50:   {baseline_continued * 1e3:.3f} ms")
    width = max(len(name) for name, *_ in rows)
    for name, value, baseline, kind in rows:
        ratio = value / baseline
        verdict = "met" if ratio <= 1.3 else "NOT met"
        print(f"  {name:<{width}}  {value * 1e3:.3f} ms  {ratio:.2f}x the {kind} baseline (<= 1.3x: {verdict})")
    a2a = rows[-1][1]
    print(f"  the a2a-sdk's JSON-RPC pipeline alone (a handler answering at once, the same task): {sdk_alone * 1e3:.3f} ms;"
          f" condukt's tasks and sessions add {(a2a - sdk_alone - baseline_continued) * 1e3:.3f} ms to the baseline's "
          f"run and the SDK's pipeline")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    trio.run(main, max(BATCH, count // BATCH * BATCH))
