"""``condukt.web.openai_app`` against the official ``openai`` SDK, over a real socket (hypercorn on trio)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pydantic
import pytest
import trio
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from waiting import open_fifo

import condukt
import condukt.web

from .helpers import hypercorn_trio, uvicorn_server
from .protocol_agents import LOOKUP_TOOL, Assistant, sleeper

TOKEN = "sk-condukt-test"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LOOKUP = [{"type": "function", "function": {"name": "lookup", "description": "Looks it up.", "parameters": LOOKUP_TOOL}}]
RESPONSES_LOOKUP = [{"type": "function", "name": "lookup", "description": "Looks it up.", "parameters": LOOKUP_TOOL}]
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@asynccontextmanager
async def served(
    tmp_path: Path, agents: dict[str, Any] | None = None, **options: Any
) -> AsyncIterator[tuple[openai.AsyncOpenAI, httpx.AsyncClient]]:
    """The app on hypercorn (trio), with the SDK (no retries: a retry would hide a wrong status) and raw httpx."""
    agents = agents or {"assistant": Assistant, "sleeper": sleeper(tmp_path / "pid")}
    async with condukt.open_node() as node:
        app = condukt.web.openai_app(node, agents=agents, token=TOKEN, **options)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as raw:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
            try:
                yield client, raw
            finally:
                await client.close()


def sse_data(text: str) -> list[Any]:
    """The JSON of every ``data:`` line of an SSE body ([DONE] as the string)."""
    found = []
    for line in text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: "):]
            found.append(payload if payload == "[DONE]" else json.loads(payload))
    return found


async def test_models_are_the_agents(tmp_path: Path) -> None:
    async with served(tmp_path) as (client, _):
        models = [model.id async for model in client.models.list()]
        assert models == ["assistant", "sleeper"]
        model = await client.models.retrieve("assistant")
        assert model.id == "assistant" and model.owned_by == "condukt"
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("gpt-4o")


async def test_chat_completion_text_streamed_and_not_is_valid_for_the_sdk(tmp_path: Path) -> None:
    async with served(tmp_path) as (client, raw):
        completion = await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "hello"}]
        )
        assert completion.choices[0].message.content == "turn 1: hello"
        assert completion.choices[0].finish_reason == "stop"
        assert completion.model == "assistant" and completion.usage is not None

        chunks = [chunk async for chunk in await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "streamed"}], stream=True,
            stream_options={"include_usage": True})]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "turn 1: streamed"
        assert chunks[0].choices[0].delta.role == "assistant"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].choices == [] and chunks[-1].usage is not None  # the usage chunk, last
        without = [c async for c in await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "x"}], stream=True)]
        assert all(c.usage is None and c.choices for c in without)

        # The SDK builds its objects leniently: validate the wire shapes strictly too.
        body = {"model": "assistant", "messages": [{"role": "user", "content": "strict"}]}
        ChatCompletion.model_validate((await raw.post("/v1/chat/completions", json=body, headers=AUTH)).json())
        streamed = await raw.post("/v1/chat/completions", json={**body, "stream": True,
                                                                 "stream_options": {"include_usage": True}},
                                  headers=AUTH)
        assert streamed.headers["content-type"].startswith("text/event-stream")
        data = sse_data(streamed.text)
        assert data[-1] == "[DONE]"
        for chunk in data[:-1]:
            ChatCompletionChunk.model_validate(chunk)


async def test_the_request_messages_are_the_conversation(tmp_path: Path) -> None:
    async with served(tmp_path) as (client, _):
        completion = await client.chat.completions.create(model="assistant", messages=[
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "turn 1: first"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ])
        # Two user messages seen; the client's system text follows the agent's own system prompt.
        assert completion.choices[0].message.content == "turn 2: second | Answer in French."
        again = await client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "x"}])
        assert again.choices[0].message.content == "turn 1: x"  # stateless: nothing kept between requests


async def test_an_image_reaches_the_model(tmp_path: Path) -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    async with served(tmp_path) as (client, _):
        completion = await client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": url}}]}])
        assert completion.choices[0].message.content == f"an image: image/png, {len(PNG)} bytes"
        response = await client.responses.create(model="assistant", input=[{"role": "user", "content": [
            {"type": "input_text", "text": "and this?"}, {"type": "input_image", "image_url": url, "detail": "auto"}]}])
        assert response.output_text == f"an image: image/png, {len(PNG)} bytes"
        with pytest.raises(openai.BadRequestError, match="data URLs"):
            await client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest"}}]}])


async def test_the_agents_own_tools_run_server_side(tmp_path: Path) -> None:
    async with served(tmp_path) as (client, _):
        completion = await client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "weather in Paris?"}]
        )
        assert completion.choices[0].message.content == "get_weather said: sunny in Paris"
        assert completion.choices[0].message.tool_calls is None
        assert completion.choices[0].finish_reason == "stop"


async def test_a_client_tool_ends_the_answer_and_its_result_continues(tmp_path: Path) -> None:
    requests_before = len(Assistant.model.requests)
    async with served(tmp_path) as (client, _):
        messages: list[Any] = [{"role": "user", "content": "lookup the answer"}]
        first = await client.chat.completions.create(model="assistant", messages=messages, tools=LOOKUP)
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content == "Looking it up."
        (call,) = choice.message.tool_calls or []
        assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"query": "lookup the answer"}

        messages += [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "42"}]
        second = await client.chat.completions.create(model="assistant", messages=messages, tools=LOOKUP)
        assert second.choices[0].message.content == "lookup said: 42"
        assert second.choices[0].finish_reason == "stop"

        # Streamed: the call comes as tool_calls deltas, then finish_reason "tool_calls".
        chunks = [c async for c in await client.chat.completions.create(
            model="assistant", messages=messages[:1], tools=LOOKUP, stream=True)]
        calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
        assert [(tc.index, tc.function.name) for tc in calls if tc.function] == [(0, "lookup")]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
    # The model never saw the placeholder prompt of the continuing request, nor a placeholder result.
    seen = [m for request in Assistant.model.requests[requests_before:] for m in request.messages]
    assert not any("(continue)" in m.text or "sent to the client" in m.text for m in seen)
    assert any(type(m).__name__ == "ToolResultMessage" and m.text == "42" for m in seen)


async def test_responses_continue_with_previous_response_id(tmp_path: Path) -> None:
    async with served(tmp_path) as (client, raw):
        first = await client.responses.create(model="assistant", input="hello")
        assert first.output_text == "turn 1: hello" and first.status == "completed"
        second = await client.responses.create(model="assistant", input="again", previous_response_id=first.id)
        assert second.output_text == "turn 2: again"
        # The agent's own tool turn is in the stored conversation, not in the output.
        weather = await client.responses.create(model="assistant", input="weather?", previous_response_id=second.id)
        assert weather.output_text == "get_weather said: sunny in Paris"
        assert [item.type for item in weather.output] == ["message"]
        third = await client.responses.create(model="assistant", input="third", previous_response_id=weather.id)
        assert third.output_text == "turn 4: third"

        stream = await client.responses.create(model="assistant", input="streamed", previous_response_id=third.id,
                                               stream=True)
        kinds = []
        async for event in stream:
            kinds.append(event.type)
            if event.type == "response.completed":
                assert event.response.output_text == "turn 5: streamed"
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed" and "response.output_text.delta" in kinds

        # Strict shapes.
        body = {"model": "assistant", "input": "strict", "previous_response_id": third.id}
        Response.model_validate((await raw.post("/v1/responses", json=body, headers=AUTH)).json())
        streamed = await raw.post("/v1/responses", json={**body, "stream": True}, headers=AUTH)
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseStreamEvent)
        events = sse_data(streamed.text)
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        for event in events:
            adapter.validate_python(event)

        # Retrieve and delete; a response not stored cannot be continued.
        assert (await client.responses.retrieve(first.id)).output_text == "turn 1: hello"
        await client.responses.delete(first.id)
        with pytest.raises(openai.BadRequestError, match="not found"):
            await client.responses.create(model="assistant", input="x", previous_response_id=first.id)
        unstored = await client.responses.create(model="assistant", input="x", store=False)
        with pytest.raises(openai.BadRequestError, match="not found"):
            await client.responses.create(model="assistant", input="x", previous_response_id=unstored.id)


async def test_responses_client_function_call_round_trip(tmp_path: Path) -> None:
    async with served(tmp_path) as (client, _):
        first = await client.responses.create(model="assistant", input="lookup this", tools=RESPONSES_LOOKUP)
        calls = [item for item in first.output if item.type == "function_call"]
        assert [c.name for c in calls] == ["lookup"] and first.output_text == "Looking it up."
        second = await client.responses.create(
            model="assistant", previous_response_id=first.id, tools=RESPONSES_LOOKUP,
            input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "found it"}],
        )
        assert second.output_text == "lookup said: found it"
        # Stateless too: the whole conversation as input items.
        third = await client.responses.create(model="assistant", tools=RESPONSES_LOOKUP, input=[
            {"role": "user", "content": "lookup this"},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"query": "q"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "stateless"},
        ])
        assert third.output_text == "lookup said: stateless"
        streamed = await client.responses.create(model="assistant", input="lookup streamed", tools=RESPONSES_LOOKUP,
                                                 stream=True)
        done = [e async for e in streamed if e.type == "response.output_item.done"]
        assert [e.item.type for e in done] == ["message", "function_call"]


async def test_bad_requests_get_openai_errors(tmp_path: Path) -> None:
    async with served(tmp_path, max_body_size=4 << 20) as (client, raw):
        hello = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.chat.completions.create(model="gpt-4o", messages=hello)
        assert unknown.value.code == "model_not_found"
        with pytest.raises(openai.NotFoundError):
            await client.responses.create(model="gpt-4o", input="hi")
        with pytest.raises(openai.BadRequestError) as several:
            await client.chat.completions.create(model="assistant", messages=hello, n=2)
        assert several.value.param == "n"
        with pytest.raises(openai.BadRequestError, match="logprobs"):
            await client.chat.completions.create(model="assistant", messages=hello, logprobs=True)
        with pytest.raises(openai.BadRequestError, match="tool_choice"):
            await client.chat.completions.create(model="assistant", messages=hello, tools=LOOKUP, tool_choice="required")
        with pytest.raises(openai.BadRequestError, match="response_format"):
            await client.chat.completions.create(model="assistant", messages=hello,
                                                 response_format={"type": "json_object"})
        with pytest.raises(openai.BadRequestError, match="need their results"):
            await client.chat.completions.create(model="assistant", messages=[
                *hello, {"role": "assistant", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
                {"role": "user", "content": "and?"}])
        with pytest.raises(openai.BadRequestError, match="two tools are named"):  # a client tool named like the agent's
            await client.chat.completions.create(model="assistant", messages=hello, tools=[
                {"type": "function", "function": {"name": "get_weather"}}])

        # Not the protocol's shape.
        for body in ({"model": "assistant"}, {"model": "assistant", "messages": "hi"}, [1, 2],
                     {"model": "assistant", "messages": hello, "bogus": 1},
                     {"model": "assistant", "messages": [{"role": "robot", "content": "x"}]}):
            answer = await raw.post("/v1/chat/completions", json=body, headers=AUTH)
            assert answer.status_code == 400, body
            assert answer.json()["error"]["type"] == "invalid_request_error"
        not_json = await raw.post("/v1/chat/completions", content=b"{nope", headers={
            **AUTH, "Content-Type": "application/json"})
        assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "invalid_json"
        form = await raw.post("/v1/chat/completions", content=b"a=b", headers={
            **AUTH, "Content-Type": "application/x-www-form-urlencoded"})
        assert form.status_code == 415

        # A 10 MB body: refused as soon as its declared length is read.
        huge = {"model": "assistant", "messages": [{"role": "user", "content": "x" * (10 << 20)}]}
        too_big = await raw.post("/v1/chat/completions", json=huge, headers=AUTH)
        assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "request_too_large"

        # Missing and wrong tokens.
        assert (await raw.get("/v1/models")).status_code == 401
        wrong = openai.AsyncOpenAI(base_url=str(client.base_url), api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as denied:
            await wrong.chat.completions.create(model="assistant", messages=hello)
        assert denied.value.code == "invalid_api_key"
        await wrong.close()


async def test_a_run_that_times_out_is_not_retried_by_the_sdk(tmp_path: Path) -> None:
    spec = sleeper(tmp_path / "pid")
    async with served(tmp_path, {"sleeper": spec}, run_timeout=1.0) as (client, _):
        retrying = client.with_options(max_retries=2)
        with pytest.raises(openai.InternalServerError) as timed_out:
            await retrying.chat.completions.create(model="sleeper", messages=[{"role": "user", "content": "sleep"}])
        assert timed_out.value.status_code == 504 and timed_out.value.code == "timeout"
    assert len(spec.kwargs["model"].requests) == 1  # one run: the answer said x-should-retry: false


@pytest.mark.slow
async def test_a_client_leaving_mid_stream_aborts_the_run(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: Any
) -> None:
    async with served(tmp_path) as (client, _), open_fifo(tmp_path / "pid") as pids:
        stream = await client.chat.completions.create(
            model="sleeper", messages=[{"role": "user", "content": "sleep"}], stream=True
        )
        texts = []
        async for chunk in stream:
            texts.append(chunk.choices[0].delta.content or "")
            if "Going to sleep." in "".join(texts):
                break
        pid = int(await pids.receive_line(timeout=10))  # the tool runs its `sleep 600`
        with wall_bound(2.0, "the sleep being killed after the client left"):
            await stream.close()
            assert await trio.to_thread.run_sync(process_gone, pid)


def test_served_on_asyncio_by_uvicorn_with_its_own_node() -> None:
    app = condukt.web.openai_app(agents={"assistant": Assistant}, token=TOKEN)  # the lifespan opens a node
    with uvicorn_server(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
        completion = client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "hi"}])
        assert completion.choices[0].message.content == "turn 1: hi"
        chunks = list(client.chat.completions.create(
            model="assistant", messages=[{"role": "user", "content": "streamed"}], stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "turn 1: streamed"
        client.close()


def test_bad_arguments_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="at least one"):
        condukt.web.openai_app(agents={})
    with pytest.raises(TypeError, match="Agent subclass"):
        condukt.web.openai_app(agents={"x": object})
    with pytest.raises(ValueError, match="max_body_size"):
        condukt.web.openai_app(agents={"a": Assistant}, max_body_size=0)
    with pytest.raises(TypeError, match="node"):
        condukt.web.openai_app("node", agents={"a": Assistant})  # type: ignore[arg-type]


async def test_the_browser_guard_stands_in_front(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, raw):
        body = {"model": "assistant", "messages": [{"role": "user", "content": "hi"}]}
        rebound = await raw.post("/v1/chat/completions", json=body, headers={**AUTH, "Host": "attacker.example"})
        assert rebound.status_code == 421
        foreign = await raw.post("/v1/chat/completions", json=body, headers={**AUTH, "Origin": "https://evil.example"})
        assert foreign.status_code == 403
        simple = await raw.post("/v1/chat/completions", content=json.dumps(body), headers={
            **AUTH, "Content-Type": "text/plain"})
        assert simple.status_code == 415
        assert (await raw.post("/v1/chat/completions", json=body, headers=AUTH)).status_code == 200
