"""``openai_app``: condukt agents behind the OpenAI API (models, chat completions, responses).

Each agent is a model named after its route. Chat completions are
stateless, as OpenAI's are: the request's messages are the conversation,
played on a fresh agent process per request (:class:`~._protocol.Conversation`)
that is stopped when the answer is complete. The Responses API keeps what it
answered (``store``, by default) so that ``previous_response_id`` continues
it: the stored conversation, the agent's own tool calls and results
included, is the next request's history.

What is not supported is refused with a 400 naming the parameter (see
``docs/openai.md``): more than one choice, logprobs, JSON response formats,
audio, forced tool choice, predicted outputs; sampling parameters
(``temperature``, ``max_tokens``...) are accepted and left to the agent's
own model settings.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import asyncio as condukt_asyncio
from .. import events
from ..messages import (
    AssistantMessage,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ..otp import Node
from ._guard import guard_middleware
from ._protocol import (
    CONTINUE,
    AppNode,
    ClientTurn,
    Conversation,
    EventStreamResponse,
    ProtocolError,
    ServedAgent,
    attachment,
    bearer_ok,
    check_app_options,
    decode_data_url,
    event_failure,
    read_json,
    run_failure,
    split_turn,
    stop_agent,
)

__all__ = ["openai_app"]

Handler = Callable[[Request], Awaitable[Response]]

#: Chat completion parameters that change the answer's shape: refused, with why.
_CHAT_REFUSED = {
    "audio": "audio output is not supported",
    "functions": "the deprecated 'functions' parameter is not supported: declare 'tools'",
    "function_call": "the deprecated 'function_call' parameter is not supported: use 'tool_choice'",
    "prediction": "predicted outputs are not supported",
    "top_logprobs": "logprobs are not supported",
    "web_search_options": "web search options are not supported: the agent's own tools run server-side",
}
#: Chat completion parameters accepted and left to the agent's own model settings.
_CHAT_IGNORED = frozenset({
    "frequency_penalty", "logit_bias", "max_completion_tokens", "max_tokens", "metadata", "parallel_tool_calls",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "safety_identifier", "seed", "service_tier",
    "stop", "store", "temperature", "top_p", "user", "verbosity",
})
_CHAT_KNOWN = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice", "n", "logprobs",
                         "response_format", "modalities"}) | _CHAT_IGNORED | frozenset(_CHAT_REFUSED)

_RESPONSES_REFUSED = {
    "background": "background responses are not supported",
    "conversation": "conversation objects are not supported: use previous_response_id",
    "prompt": "prompt templates are not supported",
    "top_logprobs": "logprobs are not supported",
}
_RESPONSES_IGNORED = frozenset({
    "include", "max_output_tokens", "max_tool_calls", "metadata", "parallel_tool_calls", "prompt_cache_key",
    "reasoning", "safety_identifier", "service_tier", "temperature", "top_p", "truncation", "user",
    "prompt_cache_retention",
})
_RESPONSES_KNOWN = frozenset({"model", "input", "instructions", "previous_response_id", "store", "stream",
                              "stream_options", "tools", "tool_choice", "text"}) | _RESPONSES_IGNORED | frozenset(
    _RESPONSES_REFUSED)


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex}"


def _error_body(exc: ProtocolError) -> dict[str, Any]:
    kind = "invalid_request_error" if exc.status < 500 else "server_error"
    if exc.status == 401:
        kind = "invalid_request_error"
    elif exc.status == 429:
        kind = "rate_limit_error" if exc.code != "usage_limit_exceeded" else "insufficient_quota"
    return {"error": {"message": exc.message, "type": kind, "param": exc.param, "code": exc.code}}


def _error_response(exc: ProtocolError) -> JSONResponse:
    headers = dict(exc.headers)
    # The official SDKs retry 408, 409, 429 and 5xx unless told not to: a run that timed
    # out or failed upstream would run twice more, its tools included.
    headers.setdefault("x-should-retry", "true" if exc.status in (429, 503) and exc.code != "usage_limit_exceeded"
                       else "false")
    return JSONResponse(_error_body(exc), exc.status, headers=headers)


def _usage(usage: Usage) -> tuple[int, int, int]:
    """(prompt tokens as OpenAI counts them, cached of those, completion tokens)."""
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return prompt, usage.cache_read_tokens, usage.output_tokens


def _chat_usage(usage: Usage) -> dict[str, Any]:
    prompt, cached, completion = _usage(usage)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _responses_usage(usage: Usage) -> dict[str, Any]:
    prompt, cached, completion = _usage(usage)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": usage.cache_write_tokens},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def _arguments(raw: Any, param: str) -> Any:
    """A tool call's arguments: decoded JSON, or the raw text when it is not JSON (as providers give it)."""
    if not isinstance(raw, str):
        raise ProtocolError(400, "invalid_type", f"{param} must be a string of JSON", param=param)
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return raw


def _encoded(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _text_of(content: Any, param: str, kinds: frozenset[str]) -> str:
    """The text of a content that is a string or a list of text parts of the ``kinds`` given."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        raise ProtocolError(400, "invalid_type", f"{param} must be a string or a list of parts", param=param)
    texts = []
    for index, part in enumerate(content):
        where = f"{param}[{index}]"
        if not isinstance(part, dict) or part.get("type") not in kinds:
            raise ProtocolError(400, "invalid_value", f"{where} must be a part of type {' or '.join(sorted(kinds))}",
                                param=where)
        text = part.get("text", part.get("refusal"))
        if not isinstance(text, str):
            raise ProtocolError(400, "invalid_type", f"{where}.text must be a string", param=where)
        texts.append(text)
    return "".join(texts)


def _need(condition: bool, param: str, message: str) -> None:
    if not condition:
        raise ProtocolError(400, "invalid_value", message, param=param)


class _Turn:
    """A conversation being read from a request, in condukt's messages."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.instructions: list[str] = []
        self.names: dict[str, str] = {}  # tool call id -> tool name

    def user(self, blocks: list[TextBlock | ImageBlock | DocumentBlock]) -> None:
        self.messages.append(UserMessage(tuple(blocks)))

    def assistant(self, text: str, calls: list[ToolCall]) -> None:
        for call in calls:
            self.names[call.id] = call.name
        blocks: tuple[Any, ...] = ((TextBlock(text),) if text else ()) + tuple(calls)
        last = self.messages[-1] if self.messages else None
        if type(last) is AssistantMessage and not last.tool_calls:
            # Responses input gives a message and its calls as separate items: one turn.
            self.messages[-1] = AssistantMessage((*last.content, *blocks))
        else:
            self.messages.append(AssistantMessage(blocks))

    def tool_result(self, call_id: str, text: str) -> None:
        self.messages.append(ToolResultMessage(call_id, self.names.get(call_id, ""), (TextBlock(text),)))


# ---------------------------------------------------------------------------------- chat completions


def _chat_content(content: Any, param: str) -> list[TextBlock | ImageBlock | DocumentBlock]:
    """A user message's content: text, images (data URLs) and files (PDF, text)."""
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list) or not content:
        raise ProtocolError(400, "invalid_type", f"{param} must be a string or a non-empty list of parts", param=param)
    blocks: list[TextBlock | ImageBlock | DocumentBlock] = []
    for index, part in enumerate(content):
        where = f"{param}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            blocks.append(TextBlock(part["text"]))
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            media_type, data = decode_data_url(part["image_url"].get("url"), f"{where}.image_url.url")
            _need(media_type.startswith("image/"), where, f"{where}: {media_type} is not an image")
            blocks.append(ImageBlock(media_type, data))
        elif kind == "file" and isinstance(part.get("file"), dict):
            file = part["file"]
            _need("file_data" in file, where, f"{where}: files are accepted as file_data (no file ids)")
            media_type, data = decode_data_url(file["file_data"], f"{where}.file.file_data")
            blocks.append(attachment(media_type, data, file.get("filename")))
        elif kind == "input_audio":
            raise ProtocolError(400, "unsupported_content", f"{where}: audio input is not supported", param=where)
        else:
            raise ProtocolError(400, "invalid_value", f"{where} must be a text, image_url or file part", param=where)
    return blocks


def _chat_tool_calls(raw: Any, param: str) -> list[ToolCall]:
    if raw is None:
        return []
    _need(isinstance(raw, list), param, f"{param} must be a list")
    calls = []
    for index, item in enumerate(raw):
        where = f"{param}[{index}]"
        function = item.get("function") if isinstance(item, dict) else None
        _need(isinstance(function, dict) and isinstance(item.get("id"), str) and isinstance(function.get("name"), str),
              where, f"{where} must have an id and a function with a name and arguments")
        assert isinstance(function, dict)
        calls.append(ToolCall(item["id"], function["name"], _arguments(function.get("arguments", ""),
                                                                        f"{where}.function.arguments")))
    return calls


def chat_turn(messages: Any) -> _Turn:
    """The conversation of a chat completion request, checked (400 with the failing ``param``)."""
    _need(isinstance(messages, list) and bool(messages), "messages", "messages must be a non-empty list")
    turn = _Turn()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        _need(isinstance(message, dict), where, f"{where} must be an object")
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            turn.instructions.append(_text_of(content, f"{where}.content", frozenset({"text"})))
        elif role == "user":
            turn.user(_chat_content(content, f"{where}.content"))
        elif role == "assistant":
            text = _text_of(content, f"{where}.content", frozenset({"text", "refusal"}))
            turn.assistant(text, _chat_tool_calls(message.get("tool_calls"), f"{where}.tool_calls"))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            _need(isinstance(call_id, str), f"{where}.tool_call_id", f"{where}.tool_call_id must be a string")
            turn.tool_result(call_id, _text_of(content, f"{where}.content", frozenset({"text"})))
        elif role == "function":
            raise ProtocolError(400, "unsupported_parameter", "the deprecated 'function' role is not supported: "
                                "answer tool calls with 'tool' messages", param=f"{where}.role")
        else:
            raise ProtocolError(400, "invalid_value", f"{where}.role must be system, developer, user, assistant or "
                                f"tool, got {role!r}", param=f"{where}.role")
    return turn


def _tool_definitions(raw: Any, *, nested: bool) -> tuple[ToolDefinition, ...]:
    """The client's function tools (chat: ``{"type": "function", "function": {...}}``; responses: flat)."""
    if raw is None:
        return ()
    _need(isinstance(raw, list), "tools", "tools must be a list")
    definitions = []
    for index, item in enumerate(raw):
        where = f"tools[{index}]"
        if not isinstance(item, dict) or item.get("type") != "function":
            kind = item.get("type") if isinstance(item, dict) else None
            raise ProtocolError(400, "unsupported_parameter", f"{where}: only function tools are supported (the "
                                f"agent's own tools run server-side), got type {kind!r}", param=where)
        function = item.get("function") if nested else item
        _need(isinstance(function, dict) and isinstance(function.get("name"), str), where,
              f"{where} must name its function")
        assert isinstance(function, dict)
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        _need(isinstance(parameters, dict), f"{where}.parameters", f"{where}.parameters must be a JSON Schema object")
        description = function.get("description") or ""
        _need(isinstance(description, str), f"{where}.description", f"{where}.description must be a string")
        definitions.append(ToolDefinition(function["name"], description, parameters))
    return tuple(definitions)


def _tool_choice(body: Mapping[str, Any], tools: tuple[ToolDefinition, ...]) -> tuple[ToolDefinition, ...]:
    """The client tools offered: ``"auto"`` (the default) offers them, ``"none"`` does not; others are refused."""
    choice = body.get("tool_choice", "auto")
    if choice in ("auto", None):
        return tools
    if choice == "none":
        return ()
    raise ProtocolError(400, "unsupported_parameter", "tool_choice must be 'auto' or 'none': the agent decides "
                        "which tools to call", param="tool_choice")


def _check_parameters(body: Any, known: frozenset[str], refused: Mapping[str, str]) -> None:
    _need(isinstance(body, dict), "", "the body must be a JSON object")
    for key in body:
        if key not in known:
            raise ProtocolError(400, "unknown_parameter", f"Unrecognized request argument supplied: {key}", param=key)
        if key in refused and body[key] not in (None, False):
            raise ProtocolError(400, "unsupported_parameter", refused[key], param=key)


# ---------------------------------------------------------------------------------- the app


@attrs.define
class _Stored:
    """A stored response: its route, the whole conversation after it, and the response object."""

    model: str
    messages: tuple[Message, ...]
    response: dict[str, Any]


class _ResponseStore:
    """Responses kept for ``previous_response_id``: the most recent ``capacity``, in memory."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, _Stored] = OrderedDict()

    def get(self, response_id: str) -> _Stored | None:
        stored = self._items.get(response_id)
        if stored is not None:
            self._items.move_to_end(response_id)
        return stored

    def put(self, response_id: str, stored: _Stored) -> None:
        self._items[response_id] = stored
        self._items.move_to_end(response_id)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def delete(self, response_id: str) -> bool:
        return self._items.pop(response_id, None) is not None


class _Outcome:
    """What a run gave, gathered from its events: per-turn messages, usage, why it stopped."""

    def __init__(self) -> None:
        self.last: AssistantMessage | None = None
        self.usage = Usage()
        self.max_turns = False

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.TurnEnd):
            self.last = event.message
        elif isinstance(event, events.AgentEnd):
            self.usage = event.usage
        elif isinstance(event, events.MaxTurnsReached):
            self.max_turns = True

    def finish_reason(self, conversation: Conversation) -> str:
        if conversation.client_calls:
            return "tool_calls"
        stop = self.last.stop_reason if self.last is not None else "end_turn"
        if self.max_turns or stop == "max_tokens":
            return "length"
        if stop == "content_filter":
            return "content_filter"
        return "stop"


class _OpenAI:
    """The routes of one :func:`openai_app`."""

    def __init__(self, node: AppNode, agents: dict[str, ServedAgent], token: bytes | None, max_body_size: int,
                 run_timeout: float | None, store: _ResponseStore) -> None:
        self.node = node
        self.agents = agents
        self.token = token
        self.max_body_size = max_body_size
        self.run_timeout = run_timeout
        self.store = store
        self.created = int(time.time())

    # ------------------------------------------------------------------ plumbing

    def guard(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            try:
                if not bearer_ok(request, self.token):
                    given = request.headers.get("authorization")
                    raise ProtocolError(
                        401, "invalid_api_key" if given else "missing_api_key",
                        "Incorrect API key provided." if given else
                        "You didn't provide an API key: send 'Authorization: Bearer <token>'.",
                        headers={"WWW-Authenticate": "Bearer"})
                return await handler(request)
            except ProtocolError as exc:
                return _error_response(exc)

        return guarded

    def route(self, model: Any) -> ServedAgent:
        _need(isinstance(model, str), "model", "model must be a string naming one of GET /v1/models")
        served = self.agents.get(model)
        if served is None:
            raise ProtocolError(404, "model_not_found", f"The model '{model}' does not exist (known: "
                                f"{', '.join(sorted(self.agents))})", param="model")
        return served

    def _model(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": "condukt"}

    async def start(self, served: ServedAgent, turn: ClientTurn) -> tuple[Any, Conversation]:
        node = await self.node.get()
        conversation = Conversation.of(turn)
        try:
            agent = await served.spawn(node, conversation)
        except (TypeError, ValueError) as exc:  # a client tool named like an agent's own, a bad schema...
            raise ProtocolError(400, "invalid_tools", str(exc), param="tools") from None
        return agent, conversation

    @staticmethod
    def prompt_and_attachments(turn: ClientTurn) -> dict[str, Any]:
        images = [block for block in turn.attachments if type(block) is ImageBlock]
        documents = [block for block in turn.attachments if type(block) is DocumentBlock]
        prompt = CONTINUE if turn.continues else turn.prompt
        return {"prompt": prompt, "images": images or None, "documents": documents or None}

    # ------------------------------------------------------------------ models

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``: one model per agent."""
        return JSONResponse({"object": "list", "data": [self._model(name) for name in self.agents]})

    async def model(self, request: Request) -> Response:
        """``GET /v1/models/{model}``."""
        served = self.route(request.path_params["model"])
        return JSONResponse(self._model(served.name))

    # ------------------------------------------------------------------ chat completions

    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``."""
        body = await read_json(request, self.max_body_size)
        _check_parameters(body, _CHAT_KNOWN, _CHAT_REFUSED)
        served = self.route(body.get("model"))
        _need(body.get("n", 1) in (1, None), "n", "n must be 1: one choice per request")
        _need(not body.get("logprobs"), "logprobs", "logprobs are not supported")
        response_format = body.get("response_format")
        if response_format is not None and (not isinstance(response_format, dict)
                                            or response_format.get("type") != "text"):
            raise ProtocolError(400, "unsupported_parameter", "only response_format {'type': 'text'} is supported",
                                param="response_format")
        modalities = body.get("modalities")
        _need(modalities in (None, ["text"]), "modalities", "only the text modality is supported")
        stream = body.get("stream", False)
        _need(isinstance(stream, bool) or stream is None, "stream", "stream must be a boolean")
        options = body.get("stream_options") or {}
        _need(isinstance(options, dict), "stream_options", "stream_options must be an object")
        read = chat_turn(body.get("messages"))
        tools = _tool_choice(body, _tool_definitions(body.get("tools"), nested=True))
        history, prompt, attachments = split_turn(read.messages)
        turn = ClientTurn(history, prompt, attachments, "\n\n".join(read.instructions) or None, tools)
        agent, conversation = await self.start(served, turn)
        completion_id = _new_id("chatcmpl-")
        if stream:
            return EventStreamResponse(
                self._chat_stream(agent, conversation, served.name, completion_id, bool(options.get("include_usage"))),
                cleanup=functools.partial(stop_agent, agent))
        outcome = _Outcome()
        try:
            text = await agent.run(**self.prompt_and_attachments(turn), timeout=self.run_timeout,
                                   on_event=outcome.on_event)
        except Exception as exc:
            raise run_failure(exc) from None
        finally:
            await stop_agent(agent)
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if conversation.client_calls:
            last_text = outcome.last.text if outcome.last is not None else ""
            message["content"] = last_text or None
            message["tool_calls"] = [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": _encoded(call.arguments)}}
                for call in conversation.client_calls
            ]
        else:
            message["content"] = text if isinstance(text, str) else json.dumps(text)
        return JSONResponse({
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served.name,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": outcome.finish_reason(conversation)}],
            "usage": _chat_usage(outcome.usage),
            "system_fingerprint": None,
        })

    async def _chat_stream(self, agent: Any, conversation: Conversation, model: str, completion_id: str,
                           include_usage: bool) -> AsyncIterator[str]:
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            data: dict[str, Any] = {
                "id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if include_usage:
                data["usage"] = None
            return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

        outcome = _Outcome()
        separate = False  # a later turn's text starts after a blank line
        turn_has_text = False
        turn = conversation.turn
        try:
            yield chunk({"role": "assistant", "content": ""})
            async with agent.stream(**self.prompt_and_attachments(turn), timeout=self.run_timeout) as stream:
                async for event in stream:
                    await outcome.on_event(event)
                    kind = type(event)
                    if kind is events.TextDelta:
                        text = event.text
                        if separate and not turn_has_text:
                            text = "\n\n" + text
                        turn_has_text = True
                        yield chunk({"content": text})
                    elif kind is events.TurnStart:
                        separate = separate or turn_has_text
                        turn_has_text = False
                    elif kind is events.Error:
                        status, code = event_failure(event.error_type, event.message)
                        failure = ProtocolError(status, code, event.message)
                        yield f"data: {json.dumps(_error_body(failure))}\n\n"
                        return
            for index, call in enumerate(conversation.client_calls):
                yield chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                             "function": {"name": call.name, "arguments": _encoded(call.arguments)}}]})
            yield chunk({}, outcome.finish_reason(conversation))
            if include_usage:
                data = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                        "system_fingerprint": None, "choices": [], "usage": _chat_usage(outcome.usage)}
                yield f"data: {json.dumps(data)}\n\n"
            yield "data: [DONE]\n\n"
        except Exception as exc:  # the agent crashed, or refused the run
            yield f"data: {json.dumps(_error_body(run_failure(exc)))}\n\n"
        finally:
            # A client that disconnects cancels this generator: leaving the stream block aborted the run.
            await stop_agent(agent)

    # ------------------------------------------------------------------ responses

    def responses_turn(self, body: Mapping[str, Any], stored: _Stored | None) -> tuple[_Turn, str | None]:
        """The conversation of a Responses request: the stored one, then ``input``."""
        turn = _Turn()
        if stored is not None:
            turn.messages = list(stored.messages)
            for message in stored.messages:
                if type(message) is AssistantMessage:
                    for call in message.tool_calls:
                        turn.names[call.id] = call.name
        raw = body.get("input")
        if isinstance(raw, str):
            turn.user([TextBlock(raw)])
        else:
            if not isinstance(raw, list) or not raw:
                raise ProtocolError(400, "invalid_value", "input must be a string or a non-empty list of items",
                                    param="input")
            for index, item in enumerate(raw):
                self._responses_item(turn, item, f"input[{index}]")
        instructions = body.get("instructions")
        _need(instructions is None or isinstance(instructions, str), "instructions", "instructions must be a string")
        parts = [*turn.instructions, *([instructions] if instructions else [])]
        return turn, "\n\n".join(parts) or None

    @staticmethod
    def _responses_item(turn: _Turn, item: Any, where: str) -> None:
        _need(isinstance(item, dict), where, f"{where} must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            role, content = item.get("role"), item.get("content")
            if role in ("system", "developer"):
                turn.instructions.append(_text_of(content, f"{where}.content", frozenset({"input_text"})))
            elif role == "user":
                turn.user(_responses_content(content, f"{where}.content"))
            elif role == "assistant":
                turn.assistant(_text_of(content, f"{where}.content", frozenset({"output_text", "refusal",
                                                                                 "input_text"})), [])
            else:
                raise ProtocolError(400, "invalid_value", f"{where}.role must be system, developer, user or "
                                    f"assistant, got {role!r}", param=f"{where}.role")
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            _need(isinstance(call_id, str) and isinstance(name, str), where, f"{where} needs a call_id and a name")
            turn.assistant("", [ToolCall(call_id, name, _arguments(item.get("arguments", ""), f"{where}.arguments"))])
        elif kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            _need(isinstance(call_id, str), f"{where}.call_id", f"{where}.call_id must be a string")
            turn.tool_result(call_id, _text_of(output, f"{where}.output", frozenset({"input_text"})))
        elif kind == "reasoning":
            pass  # the model's reasoning is not sent back (it is not kept in the history either)
        else:
            raise ProtocolError(400, "unsupported_parameter", f"{where}: items of type {kind!r} are not supported",
                                param=where)

    async def responses(self, request: Request) -> Response:
        """``POST /v1/responses``."""
        body = await read_json(request, self.max_body_size)
        _check_parameters(body, _RESPONSES_KNOWN, _RESPONSES_REFUSED)
        served = self.route(body.get("model"))
        text_config = body.get("text")
        if text_config is not None:
            kind = text_config.get("format", {}).get("type", "text") if isinstance(text_config, dict) else None
            _need(kind == "text", "text.format", "only the text format is supported")
        store = body.get("store", True)
        _need(isinstance(store, bool) or store is None, "store", "store must be a boolean")
        stream = body.get("stream", False)
        _need(isinstance(stream, bool) or stream is None, "stream", "stream must be a boolean")
        previous_id = body.get("previous_response_id")
        stored = None
        if previous_id is not None:
            _need(isinstance(previous_id, str), "previous_response_id", "previous_response_id must be a string")
            stored = self.store.get(previous_id)
            if stored is None:
                raise ProtocolError(400, "previous_response_not_found",
                                    f"Previous response with id '{previous_id}' not found.",
                                    param="previous_response_id")
            if stored.model != served.name:
                raise ProtocolError(400, "invalid_value", f"response {previous_id!r} was made by model "
                                    f"{stored.model!r}, not {served.name!r}", param="previous_response_id")
        read, instructions = self.responses_turn(body, stored)
        tools = _tool_choice(body, _tool_definitions(body.get("tools"), nested=False))
        history, prompt, attachments = split_turn(read.messages)
        turn = ClientTurn(history, prompt, attachments, instructions, tools)
        agent, conversation = await self.start(served, turn)
        response = {
            "id": _new_id("resp_"), "object": "response", "created_at": int(time.time()), "status": "in_progress",
            "model": served.name, "output": [], "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "metadata": body.get("metadata") or {},
            "parallel_tool_calls": True, "temperature": None, "top_p": None,
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "previous_response_id": previous_id, "store": bool(store), "text": {"format": {"type": "text"}},
            "truncation": "disabled", "usage": None,
        }
        run = _ResponseRun(self, agent, conversation, served.name, response, bool(store))
        if stream:
            return EventStreamResponse(run.stream(), cleanup=functools.partial(stop_agent, agent))
        try:
            await run.complete()
        except Exception as exc:
            raise run_failure(exc) from None
        finally:
            await stop_agent(agent)
        return JSONResponse(response)

    async def retrieve(self, request: Request) -> Response:
        """``GET /v1/responses/{id}``: a stored response."""
        stored = self.store.get(request.path_params["id"])
        if stored is None:
            raise ProtocolError(404, "not_found", f"No response with id '{request.path_params['id']}' found.")
        return JSONResponse(stored.response)

    async def delete(self, request: Request) -> Response:
        """``DELETE /v1/responses/{id}``."""
        response_id = request.path_params["id"]
        if not self.store.delete(response_id):
            raise ProtocolError(404, "not_found", f"No response with id '{response_id}' found.")
        return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})


def _responses_content(content: Any, param: str) -> list[TextBlock | ImageBlock | DocumentBlock]:
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list) or not content:
        raise ProtocolError(400, "invalid_type", f"{param} must be a string or a non-empty list of parts", param=param)
    blocks: list[TextBlock | ImageBlock | DocumentBlock] = []
    for index, part in enumerate(content):
        where = f"{param}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_text" and isinstance(part.get("text"), str):
            blocks.append(TextBlock(part["text"]))
        elif kind == "input_image":
            _need("image_url" in part, where, f"{where}: images are accepted as image_url data URLs (no file ids)")
            media_type, data = decode_data_url(part["image_url"], f"{where}.image_url")
            _need(media_type.startswith("image/"), where, f"{where}: {media_type} is not an image")
            blocks.append(ImageBlock(media_type, data))
        elif kind == "input_file":
            _need("file_data" in part, where, f"{where}: files are accepted as file_data (no file ids or URLs)")
            media_type, data = decode_data_url(part["file_data"], f"{where}.file_data")
            blocks.append(attachment(media_type, data, part.get("filename")))
        else:
            raise ProtocolError(400, "invalid_value", f"{where} must be an input_text, input_image or input_file part",
                                param=where)
    return blocks


class _ResponseRun:
    """One ``POST /v1/responses`` run: its output items built from the run's events."""

    def __init__(self, app: _OpenAI, agent: Any, conversation: Conversation, model: str,
                 response: dict[str, Any], store: bool) -> None:
        self.app = app
        self.agent = agent
        self.conversation = conversation
        self.model = model
        self.response = response
        self.store = store
        self.outcome = _Outcome()
        self.sequence = 0
        self.message: dict[str, Any] | None = None  # the message item being written

    def _event(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"

    def _open_message(self) -> tuple[dict[str, Any], int]:
        item = {"id": _new_id("msg_"), "type": "message", "status": "in_progress", "role": "assistant",
                "content": []}
        self.response["output"].append(item)
        self.message = item
        return item, len(self.response["output"]) - 1

    def _close_message(self) -> dict[str, Any] | None:
        item, self.message = self.message, None
        if item is not None:
            item["status"] = "completed"
        return item

    def _calls(self) -> list[dict[str, Any]]:
        items = []
        for call in self.conversation.client_calls:
            item = {"id": _new_id("fc_"), "type": "function_call", "status": "completed", "call_id": call.id,
                    "name": call.name, "arguments": _encoded(call.arguments)}
            self.response["output"].append(item)
            items.append(item)
        return items

    async def _finish(self) -> None:
        response = self.response
        reason = self.outcome.finish_reason(self.conversation)
        response["status"] = "incomplete" if reason == "length" else "completed"
        if reason == "length":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        response["usage"] = _responses_usage(self.outcome.usage)
        response["completed_at"] = int(time.time())
        if self.store:
            history = await self.agent.history()
            turn = self.conversation.turn
            messages = (*turn.history, *self.conversation.new_messages(history))
            self.app.store.put(response["id"], _Stored(self.model, messages, response))

    async def complete(self) -> None:
        """Run to the end (not streamed); the output holds the final text and the client's tool calls."""
        turn = self.conversation.turn
        text = await self.agent.run(**self.app.prompt_and_attachments(turn), timeout=self.app.run_timeout,
                                    on_event=self.outcome.on_event)
        final = text if isinstance(text, str) else json.dumps(text)
        if self.conversation.client_calls:
            final = self.outcome.last.text if self.outcome.last is not None else ""
        if final:
            item, _ = self._open_message()
            item["content"].append({"type": "output_text", "text": final, "annotations": [], "logprobs": []})
            self._close_message()
        self._calls()
        await self._finish()

    async def stream(self) -> AsyncIterator[str]:
        """The run as Responses streaming events: one message item per turn that has text."""
        response = self.response
        turn = self.conversation.turn
        try:
            yield self._event("response.created", response=response)
            yield self._event("response.in_progress", response=response)
            text = ""
            async with self.agent.stream(**self.app.prompt_and_attachments(turn),
                                         timeout=self.app.run_timeout) as events_:
                async for event in events_:
                    await self.outcome.on_event(event)
                    kind = type(event)
                    if kind is events.TextDelta:
                        if self.message is None:
                            item, index = self._open_message()
                            text = ""
                            yield self._event("response.output_item.added", output_index=index, item=item)
                            yield self._event("response.content_part.added", item_id=item["id"], output_index=index,
                                              content_index=0, part={"type": "output_text", "text": "",
                                                                     "annotations": [], "logprobs": []})
                        delta = event.text
                        text += delta
                        assert self.message is not None
                        yield self._event("response.output_text.delta", item_id=self.message["id"],
                                          output_index=len(response["output"]) - 1, content_index=0, delta=delta,
                                          logprobs=[])
                    elif kind is events.TurnEnd and self.message is not None:
                        for line in self._end_message(text):
                            yield line
                    elif kind is events.Error:
                        status, code = event_failure(event.error_type, event.message)
                        response["status"] = "failed"
                        response["error"] = {"code": code, "message": event.message}
                        yield self._event("response.failed", response=response)
                        return
            if self.message is not None:
                for line in self._end_message(text):
                    yield line
            for item in self._calls():
                index = len(response["output"]) - 1
                added = {**item, "status": "in_progress", "arguments": ""}
                yield self._event("response.output_item.added", output_index=index, item=added)
                yield self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                  delta=item["arguments"])
                yield self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                  name=item["name"], arguments=item["arguments"])
                yield self._event("response.output_item.done", output_index=index, item=item)
            await self._finish()
            yield self._event(f"response.{response['status']}", response=response)
        except Exception as exc:  # the agent crashed, or refused the run
            failure = run_failure(exc)
            yield self._event("error", code=failure.code, message=failure.message, param=None)
        finally:
            await stop_agent(self.agent)

    def _end_message(self, text: str) -> list[str]:
        index = len(self.response["output"]) - 1
        item = self._close_message()
        assert item is not None
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        item["content"] = [part]
        return [
            self._event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=text, logprobs=[]),
            self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                        part=part),
            self._event("response.output_item.done", output_index=index, item=item),
        ]


def openai_app(
    node: Node | condukt_asyncio.Node | None = None,
    *,
    agents: Mapping[str, Any],
    token: str | None = None,
    max_body_size: int = 8 << 20,
    run_timeout: float | None = 300.0,
    max_stored_responses: int = 1000,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> Starlette:
    """Agents behind the OpenAI API: a Starlette ASGI app (``docs/openai.md``).

    Routes: ``GET /v1/models`` (one model per agent name), ``GET
    /v1/models/{model}``, ``POST /v1/chat/completions``, ``POST
    /v1/responses``, ``GET``/``DELETE /v1/responses/{id}``. Point an OpenAI
    client at ``<url>/v1`` with the agent's name as the model.

    ``agents`` maps model names to an :class:`~condukt.Agent` subclass or a
    :class:`~condukt.ChildSpec` of one (its ``kwargs`` are start options).
    Every request runs on a fresh agent process holding the request's
    conversation, stopped when the answer is complete; a client that
    disconnects mid-stream aborts the run (tool subprocesses killed). Tools
    the client declares are the client's: a call to one ends the answer
    with ``finish_reason="tool_calls"`` (a ``function_call`` item in the
    Responses API), and the request carrying the result continues.

    ``node``: as for :func:`condukt.web.create_app` (trio node, asyncio node,
    or ``None`` for the lifespan's). ``token``: requests need ``Authorization:
    Bearer <token>`` (what the OpenAI SDKs send as the API key); 401 in
    OpenAI's error shape otherwise. ``max_body_size`` bytes per request body
    (413 beyond); ``run_timeout`` bounds each run (504). The Responses API
    keeps the last ``max_stored_responses`` stored responses in memory for
    ``previous_response_id``.
    ``allowed_hosts`` and ``allowed_origins`` are the
    :class:`~condukt.web.BrowserGuard`'s, in front of every route as for
    :func:`condukt.web.create_app`: a foreign ``Host`` gets 421, a foreign
    ``Origin`` 403, a body that is not JSON 415 (behind a proxy, pass the
    public name: ``allowed_hosts=["api.example.com"]``).

    Raises ``TypeError``/``ValueError`` for bad arguments. Synchronous.
    """
    holder = AppNode(node)
    if not isinstance(agents, Mapping) or not agents:
        raise ValueError("agents must map at least one model name to an Agent subclass")
    served = {}
    for name, value in agents.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"model names must be non-empty strings without '/', got {name!r}")
        served[name] = ServedAgent.of(name, value)
    check_app_options(token, max_body_size, run_timeout)
    if isinstance(max_stored_responses, bool) or not isinstance(max_stored_responses, int) or max_stored_responses < 1:
        raise ValueError(f"max_stored_responses must be an int >= 1, got {max_stored_responses!r}")
    app_routes = _OpenAI(holder, served, None if token is None else token.encode(), max_body_size, run_timeout,
                         _ResponseStore(max_stored_responses))
    g = app_routes.guard
    browser_guard = guard_middleware(allowed_hosts, allowed_origins)
    return Starlette(
        routes=[
            Route("/v1/models", g(app_routes.models), methods=["GET"]),
            Route("/v1/models/{model:path}", g(app_routes.model), methods=["GET"]),
            Route("/v1/chat/completions", g(app_routes.chat), methods=["POST"]),
            Route("/v1/responses", g(app_routes.responses), methods=["POST"]),
            Route("/v1/responses/{id}", g(app_routes.retrieve), methods=["GET"]),
            Route("/v1/responses/{id}", g(app_routes.delete), methods=["DELETE"]),
        ],
        middleware=[browser_guard],
        lifespan=holder.lifespan(),
    )
