"""``condukt.web.vercel_ai_app``: the AI SDK's UI message stream, read by the ``ai`` package's own parsers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from waiting import open_fifo

import condukt
import condukt.web

from .helpers import hypercorn_trio
from .node_clients import run_script
from .protocol_agents import LOOKUP_TOOL, Assistant, sleeper

TOKEN = "vercel-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CLIENT_TOOLS = [{"name": "lookup", "description": "Looks it up.", "parameters": LOOKUP_TOOL}]


@asynccontextmanager
async def served(agent: Any = Assistant, **options: Any) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    async with condukt.open_node() as node:
        app = condukt.web.vercel_ai_app(node, agent=agent, token=TOKEN, client_tools=CLIENT_TOOLS, **options)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=30, headers=AUTH) as client:
            yield url, client


def user(text: str, id: str = "u1") -> dict[str, Any]:
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}


def chunks(text: str) -> list[Any]:
    found = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert found[-1] == "[DONE]"
    return [json.loads(item) for item in found[:-1]]


async def test_the_stream_text_and_a_server_side_tool() -> None:
    async with served() as (_, client):
        answer = await client.post("/", json={"id": "chat-1", "messages": [user("hello")], "trigger": "submit-message"})
        assert answer.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert answer.headers["content-type"].startswith("text/event-stream")
        parts = chunks(answer.text)
        assert [p["type"] for p in parts] == ["start", "start-step", "text-start", "text-delta", "text-delta",
                                             "text-delta", "text-end", "finish-step", "finish"]
        assert "".join(p["delta"] for p in parts if p["type"] == "text-delta") == "turn 1: hello"
        assert parts[-1]["finishReason"] == "stop"

        parts = chunks((await client.post("/", json={"messages": [user("weather?")]})).text)
        types = [p["type"] for p in parts]
        assert types[:5] == ["start", "start-step", "tool-input-start", "tool-input-available", "tool-output-available"]
        assert parts[3]["input"] == {"city": "Paris"} and parts[4]["output"] == "sunny in Paris"
        assert types.count("start-step") == 2  # the tool's turn, then the answer's


async def test_the_messages_are_the_conversation_and_a_client_tool_round_trip() -> None:
    async with served() as (_, client):
        history = [user("first"),
                   {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, {"type": "text", "text": "turn 1: first"}]},
                   user("second", "u2")]
        parts = chunks((await client.post("/", json={"messages": history})).text)
        assert "".join(p["delta"] for p in parts if p["type"] == "text-delta") == "turn 2: second"

        parts = chunks((await client.post("/", json={"messages": [user("lookup it")]})).text)
        call = next(p for p in parts if p["type"] == "tool-input-available")
        assert call["toolName"] == "lookup" and parts[-1]["finishReason"] == "tool-calls"
        assert not any(p["type"].startswith("tool-output") for p in parts)
        answered = {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"}, {"type": "text", "text": "Looking it up."},
            {"type": "tool-lookup", "toolCallId": call["toolCallId"], "state": "output-available",
             "input": call["input"], "output": {"found": 42}}]}
        parts = chunks((await client.post("/", json={"messages": [user("lookup it"), answered]})).text)
        assert "".join(p["delta"] for p in parts if p["type"] == "text-delta") == 'lookup said: {"found": 42}'


async def test_bad_input() -> None:
    async with served() as (_, client):
        assert (await client.post("/", json={"messages": []})).status_code == 400
        assert (await client.post("/", json={"prompt": "hi"})).status_code == 400
        ends = [user("hi"), {"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "hello"}]}]
        assert (await client.post("/", json={"messages": ends})).status_code == 400
        unanswered = [user("hi"), {"id": "a", "role": "assistant", "parts": [
            {"type": "tool-lookup", "toolCallId": "c1", "state": "input-available", "input": {"query": "q"}}]}]
        refused = await client.post("/", json={"messages": unanswered})
        assert refused.status_code == 400 and "need their results" in refused.json()["message"]
        fetch = [{"id": "u", "role": "user", "parts": [{"type": "file", "mediaType": "image/png",
                                                        "url": "https://example.com/cat.png"}]}]
        assert (await client.post("/", json={"messages": fetch})).status_code == 400
        assert (await client.post("/", json={"messages": [user("x" * (10 << 20))]})).status_code == 413
        assert (await client.post("/", json={"messages": [user("hi")]}, headers={"Authorization": ""})).status_code == 401
        assert (await client.post("/", json={"messages": [user("hi")]},
                                  headers={"Authorization": "Bearer nope"})).status_code == 401


async def test_a_failed_run_is_an_error_part() -> None:
    def broken(request: condukt.ModelRequest) -> Any:
        raise condukt.providers.ProviderError("test", "the provider is down", status_code=503)

    spec = condukt.ChildSpec(None, condukt.Agent, kwargs={"model": condukt.testing.FunctionModel(broken)})
    async with served(spec) as (_, client):
        parts = chunks((await client.post("/", json={"messages": [user("hi")]})).text)
        assert [p["type"] for p in parts] == ["start", "start-step", "error", "finish"]
        assert "the provider is down" in parts[2]["errorText"] and parts[-1]["finishReason"] == "error"


@pytest.mark.slow
async def test_a_client_leaving_mid_stream_aborts_the_run(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: Any
) -> None:
    pid_file = tmp_path / "pid"
    async with served(sleeper(pid_file)) as (_, client), open_fifo(pid_file) as pids:
        async with client.stream("POST", "/", json={"messages": [user("sleep")]}) as response:
            lines = response.aiter_lines()  # kept: an abandoned iterator is closed, and the response with it
            async for line in lines:
                if "tool-input-available" in line:
                    break
            pid = int(await pids.receive_line(timeout=10))  # the tool runs its `sleep 600`; the client is still there
        with wall_bound(2.0, "the sleep being killed after the client left"):
            assert await trio.to_thread.run_sync(process_gone, pid)


async def test_the_ai_packages_own_transport_and_reader() -> None:
    async with served() as (url, _):
        (text,) = await run_script("vercel_client.mjs", url, TOKEN, json.dumps([user("hello")]))
        assert text["errors"] == [] and text["message"]["role"] == "assistant"
        assert [p["text"] for p in text["message"]["parts"] if p["type"] == "text"] == ["turn 1: hello"]

        (tool,) = await run_script("vercel_client.mjs", url, TOKEN, json.dumps([user("weather?")]))
        (call,) = [p for p in tool["message"]["parts"] if p["type"] == "tool-get_weather"]
        assert call["state"] == "output-available" and call["output"] == "sunny in Paris"
        assert [p["text"] for p in tool["message"]["parts"] if p["type"] == "text"] == ["get_weather said: sunny in Paris"]

        (client_tool,) = await run_script("vercel_client.mjs", url, TOKEN, json.dumps([user("lookup it")]))
        (pending,) = [p for p in client_tool["message"]["parts"] if p["type"] == "tool-lookup"]
        assert pending["state"] == "input-available" and pending["input"] == {"query": "lookup it"}
        pending.update(state="output-available", output="from the browser")
        (done,) = await run_script("vercel_client.mjs", url, TOKEN,
                                   json.dumps([user("lookup it"), client_tool["message"]]))
        assert [p["text"] for p in done["message"]["parts"] if p["type"] == "text"] == [
            "lookup said: from the browser"]

        (denied,) = await run_script("vercel_client.mjs", url, "wrong", json.dumps([user("hello")]))
        assert "error" in denied


async def test_the_browser_guard_stands_in_front() -> None:
    async with served() as (_, client):
        body = {"messages": [user("hi")]}
        assert (await client.post("/", json=body, headers={"Host": "attacker.example"})).status_code == 421
        assert (await client.post("/", json=body, headers={"Origin": "https://evil.example"})).status_code == 403
        plain = await client.post("/", content=json.dumps(body), headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415
