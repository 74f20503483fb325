"""``condukt.a2a.asgi_app`` against the official a2a-sdk client, over a real socket (hypercorn on trio)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers import get_message_text, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
)
from starlette.applications import Starlette
from starlette.routing import Mount
from waiting import open_fifo

import condukt
import condukt.a2a
from tests.web.helpers import hypercorn_trio
from tests.web.protocol_agents import Assistant, sleeper

TOKEN = "a2a-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@asynccontextmanager
async def served(tmp_path: Path, *, token: str | None = TOKEN, prefix: str = "") -> AsyncIterator[tuple[str, Any]]:
    """The assistant and a sleeper, each an A2A app, on one hypercorn (trio): yields (base URL, node)."""
    async with condukt.open_node() as node:
        assistant = condukt.a2a.asgi_app(node, agent=Assistant, name="assistant", description="Helps.", token=token)
        sleepy = condukt.a2a.asgi_app(node, agent=sleeper(tmp_path / "pid"), name="sleeper",
                                      description="Sleeps.", token=token)
        app = Starlette(routes=[Mount(f"{prefix}/sleeper", sleepy), Mount(prefix or "/", assistant)])
        async with hypercorn_trio(app) as url:
            yield url + prefix, node


@asynccontextmanager
async def client(url: str, *, streaming: bool) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as http:
        a2a_client = await ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create_from_url(url)
        yield a2a_client


def user(text: str, context_id: str = "") -> SendMessageRequest:
    message = Message(message_id=f"m-{text}", role=Role.ROLE_USER, context_id=context_id, parts=[new_text_part(text)])
    return SendMessageRequest(message=message)


async def send(url: str, text: str, context_id: str = "", *, streaming: bool = False) -> list[StreamResponse]:
    async with client(url, streaming=streaming) as a2a_client:
        return [response async for response in a2a_client.send_message(user(text, context_id))]


async def test_the_card_takes_its_url_from_the_request(tmp_path: Path) -> None:
    async with served(tmp_path, prefix="/agents") as (url, _), httpx.AsyncClient() as http:
        card = (await http.get(f"{url}/.well-known/agent-card.json")).json()  # public, no token
        assert card["name"] == "assistant" and card["description"] == "Helps."
        assert card["capabilities"]["streaming"] is True
        assert {(i["url"], i["protocolVersion"]) for i in card["supportedInterfaces"]} == {
            (f"{url}/", "1.0"), (f"{url}/", "0.3")}
        assert card["url"] == f"{url}/"  # the A2A 0.3 fields, for older clients
        assert "bearer" in card["securitySchemes"]
        legacy = (await http.get(f"{url}/.well-known/agent.json")).json()
        assert legacy["url"] == f"{url}/"
        sleeper_card = (await http.get(f"{url}/sleeper/.well-known/agent-card.json")).json()
        assert sleeper_card["supportedInterfaces"][0]["url"] == f"{url}/sleeper/"


async def test_send_stream_get_and_a_context_that_continues(tmp_path: Path) -> None:
    async with served(tmp_path) as (url, _):
        (first,) = await send(url, "hello")
        task = first.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(task.status.message) == "turn 1: hello"
        assert [a.parts[0].text for a in task.artifacts] == ["turn 1: hello"]
        context_id = task.context_id

        streamed = await send(url, "again", context_id, streaming=True)
        assert streamed[0].HasField("task") and streamed[0].task.context_id == context_id
        kinds = [r.WhichOneof("payload") for r in streamed]
        assert "artifact_update" in kinds
        assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        text = "".join(p.text for r in streamed if r.HasField("artifact_update") for p in r.artifact_update.artifact.parts)
        assert text == "turn 2: again"  # contextId = session: the same agent's conversation

        (tool,) = await send(url, "weather?", context_id)
        assert get_message_text(tool.task.status.message) == "get_weather said: sunny in Paris"

        async with client(url, streaming=False) as a2a_client:
            got = await a2a_client.get_task(GetTaskRequest(id=task.id))
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert [get_message_text(m) for m in got.history] == ["hello", "turn 1: hello"]
            trimmed = await a2a_client.get_task(GetTaskRequest(id=task.id, history_length=1))
            assert [get_message_text(m) for m in trimmed.history] == ["turn 1: hello"]
            with pytest.raises(TaskNotFoundError):
                await a2a_client.get_task(GetTaskRequest(id="no-such-task"))

        (other,) = await send(url, "fresh")
        assert other.task.context_id != context_id
        assert get_message_text(other.task.status.message) == "turn 1: fresh"


async def test_a2a_0_3_method_names_over_plain_json_rpc(tmp_path: Path) -> None:
    async with served(tmp_path) as (url, _), httpx.AsyncClient(headers=AUTH, timeout=30) as http:
        message = {"role": "user", "messageId": "x1", "parts": [{"kind": "text", "text": "old client"}]}
        sent = (await http.post(f"{url}/", json={"jsonrpc": "2.0", "id": 1, "method": "message/send",
                                                 "params": {"message": message}})).json()
        result = sent["result"]
        assert result["kind"] == "task" and result["status"]["state"] == "completed"
        got = (await http.post(f"{url}/", json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
                                                "params": {"id": result["id"]}})).json()
        assert got["result"]["artifacts"][0]["parts"][0]["text"] == "turn 1: old client"
        streamed = await http.post(f"{url}/", json={"jsonrpc": "2.0", "id": 3, "method": "message/stream", "params": {
            "message": {**message, "messageId": "x2", "contextId": result["contextId"]}}})
        events = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")]
        assert events[-1]["result"]["status"]["state"] == "completed" and events[-1]["result"]["final"] is True
        cancel = (await http.post(f"{url}/", json={"jsonrpc": "2.0", "id": 4, "method": "tasks/cancel",
                                                   "params": {"id": result["id"]}})).json()
        assert cancel["error"]["code"] == -32002  # TaskNotCancelable: it ended


@pytest.mark.slow
async def test_cancel_aborts_the_run_and_a_client_leaving_does_not(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: Any
) -> None:
    async with served(tmp_path) as (url, _), open_fifo(tmp_path / "pid") as pids, \
            client(f"{url}/sleeper", streaming=True) as a2a_client:
        task_id = ""
        async for response in a2a_client.send_message(user("sleep")):
            task_id = task_id or response.task.id
            if response.HasField("artifact_update"):
                break  # the client leaves mid-stream: "Going to sleep." came, the tool runs
        pid = int(await pids.receive_line(timeout=10))
        task = await a2a_client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_WORKING  # the task goes on without the stream
        os.kill(pid, 0)  # still running: leaving the stream stopped nothing
        with wall_bound(2.0, "cancel killing the sleep"):
            canceled = await a2a_client.cancel_task(CancelTaskRequest(id=task_id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            assert await trio.to_thread.run_sync(process_gone, pid)
        with pytest.raises(TaskNotCancelableError):
            await a2a_client.cancel_task(CancelTaskRequest(id=task_id))  # a finished task


async def test_return_immediately_then_get(tmp_path: Path) -> None:
    async with served(tmp_path) as (url, _), client(url, streaming=False) as a2a_client:
        request = user("later")
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        (response,) = [r async for r in a2a_client.send_message(request)]
        task_id = response.task.id
        with trio.fail_after(10):
            while (await a2a_client.get_task(GetTaskRequest(id=task_id))).status.state != TaskState.TASK_STATE_COMPLETED:
                await trio.sleep(0.01)


async def test_bad_requests(tmp_path: Path) -> None:
    async with served(tmp_path) as (url, _), httpx.AsyncClient(timeout=30) as http:
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}
        assert (await http.post(f"{url}/", json=rpc)).status_code == 401
        wrong = await http.post(f"{url}/", json=rpc, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == -32600
        ok = await http.post(f"{url}/", json=rpc, headers={**AUTH, "A2A-Version": "1.0"})
        assert ok.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        for body, code in (({"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}}, -32601),
                           ({"id": 1, "method": "SendMessage"}, -32600),
                           ([1, 2, 3], -32600)):
            answer = await http.post(f"{url}/", json=body, headers={**AUTH, "A2A-Version": "1.0"})
            assert answer.json()["error"]["code"] == code, body
        not_json = await http.post(f"{url}/", content=b"{nope", headers={**AUTH, "Content-Type": "application/json"})
        assert not_json.json()["error"]["code"] == -32700
        fetched = {**rpc, "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                                                 "parts": [{"url": "http://169.254.169.254/", "mediaType": "text/plain"}]}}}
        refused = await http.post(f"{url}/", json=fetched, headers={**AUTH, "A2A-Version": "1.0"})
        assert refused.json()["error"]["code"] == -32602 and "not fetched" in refused.json()["error"]["message"]

        huge = {**rpc, "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x" * (10 << 20)}]}}}
        too_big = await http.post(f"{url}/", json=huge, headers=AUTH)
        assert too_big.status_code == 413


def test_bad_arguments_are_refused_at_once() -> None:
    with pytest.raises(TypeError, match="Agent subclass"):
        condukt.a2a.asgi_app(agent=object, name="x", description="y")
    with pytest.raises(ValueError, match="name"):
        condukt.a2a.asgi_app(agent=Assistant, name="", description="y")
    with pytest.raises(ValueError, match="url"):
        condukt.a2a.remote("ftp://x")


def test_on_asyncio_the_app_refuses_to_start_saying_why() -> None:
    from starlette.testclient import TestClient

    app = condukt.a2a.asgi_app(agent=Assistant, name="assistant", description="Helps.")  # its lifespan's node
    with pytest.raises(RuntimeError, match="runs on trio"), TestClient(app):
        pass


async def test_the_browser_guard_stands_in_front(tmp_path: Path) -> None:
    async with served(tmp_path) as (url, _), httpx.AsyncClient(headers=AUTH, timeout=30) as http:
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}
        assert (await http.post(f"{url}/", json=rpc, headers={"Host": "attacker.example"})).status_code == 421
        assert (await http.post(f"{url}/", json=rpc, headers={"Origin": "https://evil.example"})).status_code == 403
        card = await http.get(f"{url}/.well-known/agent-card.json", headers={"Host": "attacker.example"})
        assert card.status_code == 421
