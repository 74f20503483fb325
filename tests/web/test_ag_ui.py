"""``condukt.web.ag_ui_app``: AG-UI events over SSE, every one decoded by the ``ag-ui-protocol`` models."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
import trio
from ag_ui.core import Event, EventType, RunAgentInput
from waiting import open_fifo

import condukt
import condukt.web

from .helpers import hypercorn_trio, uvicorn_server
from .node_clients import run_script
from .protocol_agents import LOOKUP_TOOL, Assistant, sleeper

TOKEN = "ag-ui-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EVENT: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Event)


@asynccontextmanager
async def served(agent: Any = Assistant, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with condukt.open_node() as node:
        app = condukt.web.ag_ui_app(node, agent=agent, token=TOKEN, **options)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=30, headers=AUTH) as client:
            yield client


def run_input(messages: list[dict[str, Any]], *, thread: str = "thread-1", tools: list[Any] | None = None,
              **extra: Any) -> dict[str, Any]:
    body = {"threadId": thread, "runId": f"run-{len(messages)}", "state": {}, "messages": messages,
            "tools": tools or [], "context": [], "forwardedProps": {}, **extra}
    RunAgentInput.model_validate(body)  # what the tests send is a valid RunAgentInput
    return body


def decode(text: str) -> list[Any]:
    """Every SSE event of an AG-UI stream, decoded by the protocol's own models."""
    return [EVENT.validate_json(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


def replay(events: list[Any]) -> list[dict[str, Any]]:
    """The messages a client builds from ``events`` (as @ag-ui/client does): assistant texts, calls, results."""
    messages: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.type == EventType.TEXT_MESSAGE_START:
            by_id[event.message_id] = {"id": event.message_id, "role": "assistant", "content": ""}
            messages.append(by_id[event.message_id])
        elif event.type == EventType.TEXT_MESSAGE_CONTENT:
            by_id[event.message_id]["content"] += event.delta
        elif event.type == EventType.TOOL_CALL_START:
            parent = by_id.get(event.parent_message_id or "")
            if parent is None:
                parent = {"id": event.parent_message_id or f"p-{event.tool_call_id}", "role": "assistant"}
                messages.append(parent)
            parent.setdefault("toolCalls", []).append(
                {"id": event.tool_call_id, "type": "function", "function": {"name": event.tool_call_name, "arguments": ""}})
        elif event.type == EventType.TOOL_CALL_ARGS:
            for message in messages:
                for call in message.get("toolCalls", []):
                    if call["id"] == event.tool_call_id:
                        call["function"]["arguments"] += event.delta
        elif event.type == EventType.TOOL_CALL_RESULT:
            messages.append({"id": event.message_id, "role": "tool", "toolCallId": event.tool_call_id,
                             "content": event.content})
    return messages


async def test_text_a_server_side_tool_and_the_thread_continued() -> None:
    async with served() as client:
        hello = [{"id": "u1", "role": "user", "content": "hello"}]
        answer = await client.post("/", json=run_input(hello))
        assert answer.headers["content-type"].startswith("text/event-stream")
        events = decode(answer.text)
        types = [e.type for e in events]
        assert types == [EventType.RUN_STARTED, EventType.TEXT_MESSAGE_START, *[EventType.TEXT_MESSAGE_CONTENT] * 3,
                         EventType.TEXT_MESSAGE_END, EventType.RUN_FINISHED]
        assert events[0].thread_id == "thread-1" and events[-1].run_id == "run-1"
        assert replay(events)[0]["content"] == "turn 1: hello"

        # The whole conversation again, with a new prompt: the agent sees each turn once.
        conversation = hello + replay(events) + [{"id": "u2", "role": "user", "content": "weather?"}]
        events = decode((await client.post("/", json=run_input(conversation))).text)
        types = [e.type for e in events]
        assert types[:5] == [EventType.RUN_STARTED, EventType.TOOL_CALL_START, EventType.TOOL_CALL_ARGS,
                             EventType.TOOL_CALL_END, EventType.TOOL_CALL_RESULT]
        assert events[4].content == "sunny in Paris"
        assert json.loads(events[2].delta) == {"city": "Paris"}
        assert replay(events)[-1]["content"] == "get_weather said: sunny in Paris"

        conversation += replay(events) + [{"id": "u3", "role": "user", "content": "third"}]
        events = decode((await client.post("/", json=run_input(conversation))).text)
        assert replay(events)[0]["content"] == "turn 3: third"  # no turn twice


async def test_the_session_is_the_thread() -> None:
    seen: list[str] = []

    class Recording(Assistant):
        async def handle_event(self, event: Any) -> None:
            if type(event) is condukt.events.AgentStart:
                seen.append(event.session_id)

    async with served(Recording) as client:
        await client.post("/", json=run_input([{"id": "u1", "role": "user", "content": "hi"}], thread="t-42"))
    assert seen == ["t-42"]


async def test_a_client_tool_ends_the_run_and_its_result_continues() -> None:
    tools = [{"name": "lookup", "description": "Looks it up.", "parameters": LOOKUP_TOOL}]
    async with served() as client:
        first = [{"id": "u1", "role": "user", "content": "lookup this"}]
        events = decode((await client.post("/", json=run_input(first, tools=tools))).text)
        types = [e.type for e in events]
        assert EventType.TOOL_CALL_END in types and EventType.TOOL_CALL_RESULT not in types
        assert types[-1] == EventType.RUN_FINISHED
        built = replay(events)
        (call,) = built[-1]["toolCalls"]
        assert call["function"]["name"] == "lookup"
        result = {"id": "t1", "role": "tool", "toolCallId": call["id"], "content": "found it"}
        events = decode((await client.post("/", json=run_input(first + built + [result], tools=tools))).text)
        assert replay(events)[-1]["content"] == "lookup said: found it"


async def test_images_and_context_reach_the_model() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
    async with served() as client:
        image = [{"id": "u1", "role": "user", "content": [
            {"type": "text", "text": "what is it?"},
            {"type": "image", "source": {"type": "data", "value": png, "mimeType": "image/png"}}]}]
        events = decode((await client.post("/", json=run_input(image))).text)
        assert replay(events)[0]["content"] == "an image: image/png, 12 bytes"
        context = run_input([{"id": "u1", "role": "user", "content": "hi"}],
                            context=[{"description": "The user's name", "value": "Ada"}])
        events = decode((await client.post("/", json=context)).text)
        assert replay(events)[0]["content"] == "turn 1: hi | The user's name: Ada"


async def test_bad_input() -> None:
    async with served() as client:
        shape = await client.post("/", json={"messages": "no"})
        assert shape.status_code == 422 and shape.json()["error"] == "invalid_run_input"
        ends_with_answer = run_input([{"id": "u1", "role": "user", "content": "hi"},
                                      {"id": "a1", "role": "assistant", "content": "hello"}])
        assert (await client.post("/", json=ends_with_answer)).status_code == 400
        huge = run_input([{"id": "u1", "role": "user", "content": "x" * (10 << 20)}])
        assert (await client.post("/", json=huge)).status_code == 413
        anonymous = await client.post("/", json=run_input([{"id": "u1", "role": "user", "content": "hi"}]),
                                      headers={"Authorization": ""})
        assert anonymous.status_code == 401
        wrong = await client.post("/", json=run_input([{"id": "u1", "role": "user", "content": "hi"}]),
                                  headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401


async def test_a_failed_run_is_a_run_error() -> None:
    def broken(request: condukt.ModelRequest) -> Any:
        raise condukt.providers.ProviderError("test", "the provider is down", status_code=503)

    spec = condukt.ChildSpec(None, condukt.Agent, kwargs={"model": condukt.testing.FunctionModel(broken)})
    async with served(spec) as client:
        events = decode((await client.post("/", json=run_input([{"id": "u1", "role": "user", "content": "hi"}]))).text)
        assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
        assert "the provider is down" in events[-1].message and events[-1].code == "upstream_error"


@pytest.mark.slow
async def test_a_client_leaving_mid_stream_aborts_the_run(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: Any
) -> None:
    pid_file = tmp_path / "pid"
    async with served(sleeper(pid_file)) as client, open_fifo(pid_file) as pids:
        body = run_input([{"id": "u1", "role": "user", "content": "sleep"}])
        async with client.stream("POST", "/", json=body) as response:
            lines = response.aiter_lines()  # kept: an abandoned iterator is closed, and the response with it
            async for line in lines:
                if "TOOL_CALL_END" in line:
                    break
            pid = int(await pids.receive_line(timeout=10))  # the tool runs its `sleep 600`; the client is still there
        # The client left.
        with wall_bound(2.0, "the sleep being killed after the client left"):
            assert await trio.to_thread.run_sync(process_gone, pid)


async def test_ag_ui_clients_own_http_agent() -> None:
    tools = [{"name": "lookup", "description": "Looks it up.", "parameters": LOOKUP_TOOL}]
    plan = [{"message": "hello"}, {"message": "weather?"}, {"message": "lookup this", "tools": tools},
            {"toolResult": "from the browser", "tools": tools}, {"message": "last"}]
    async with served() as client:
        runs = await run_script("ag_ui_client.mjs", str(client.base_url), TOKEN, json.dumps(plan))
    assert all("error" not in run for run in runs), runs
    hello, weather, lookup, answered, last = runs
    assert hello["types"][0] == "RUN_STARTED" and hello["types"][-1] == "RUN_FINISHED"
    assert hello["messages"][-1] == {**hello["messages"][-1], "role": "assistant", "content": "turn 1: hello"}
    assert "TOOL_CALL_RESULT" in weather["types"]
    assert [m["role"] for m in weather["messages"][2:]] == ["user", "assistant", "tool", "assistant"]
    assert weather["messages"][-1]["content"] == "get_weather said: sunny in Paris"
    assert lookup["messages"][-1]["toolCalls"][0]["function"]["name"] == "lookup"
    assert answered["messages"][-1]["content"] == "lookup said: from the browser"
    # The client sent the whole conversation each run: the agent saw each turn once.
    assert last["messages"][-1]["content"] == "turn 4: last"


def test_served_on_asyncio_by_uvicorn_with_its_own_node() -> None:
    app = condukt.web.ag_ui_app(agent=Assistant, token=TOKEN)  # the lifespan opens a node (condukt.asyncio)
    with uvicorn_server(app) as url:
        answer = httpx.post(url, json=run_input([{"id": "u1", "role": "user", "content": "hi"}]), headers=AUTH,
                            timeout=30)
    events = decode(answer.text)
    assert events[-1].type == EventType.RUN_FINISHED and replay(events)[0]["content"] == "turn 1: hi"


async def test_the_browser_guard_stands_in_front_and_origins_can_be_allowed() -> None:
    body = run_input([{"id": "u1", "role": "user", "content": "hi"}])
    async with served() as client:
        assert (await client.post("/", json=body, headers={"Host": "attacker.example"})).status_code == 421
        assert (await client.post("/", json=body, headers={"Origin": "https://app.example"})).status_code == 403
    async with served(allowed_origins=["https://app.example"]) as client:
        assert (await client.post("/", json=body, headers={"Origin": "https://app.example"})).status_code == 200
