"""``vercel_ai_app``: an agent behind the Vercel AI SDK's UI message stream protocol (``useChat``).

``POST /`` takes the AI SDK's chat body (``{"id", "messages": [UIMessage...]}``)
and answers the UI message stream, v1: Server-Sent Events of JSON chunks
(``start``, ``start-step``, ``text-*``, ``reasoning-*``, ``tool-input-*``,
``tool-output-*``, ``finish-step``, ``finish``, ``error``) and ``[DONE]``,
with the header ``x-vercel-ai-ui-message-stream: v1``. The body's messages
are the conversation (played on a fresh agent process whose session id is
the chat's ``id``). The UI message format is written out here, by hand:
the AI SDK publishes it only as TypeScript (its ``uiMessageChunkSchema``),
and the tests parse this stream with the ``ai`` package's own reader.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import asyncio as condukt_asyncio
from ..messages import (
    AssistantMessage,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
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
    read_json,
    split_turn,
    stop_agent,
)
from ._ui import UiParts

__all__ = ["vercel_ai_app"]

#: The finish reasons of the protocol for :class:`~._ui.UiPart` ``finish`` reasons.
_FINISH = {"stop": "stop", "length": "length", "tool-calls": "tool-calls"}


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise ProtocolError(400, "invalid_messages", message)


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _tool_part(part: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(tool call id, tool name)`` of a tool part (``tool-<name>`` or ``dynamic-tool``), else None."""
    kind = part.get("type", "")
    if kind == "dynamic-tool":
        name = part.get("toolName")
    elif isinstance(kind, str) and kind.startswith("tool-"):
        name = kind[len("tool-"):]
    else:
        return None
    call_id = part.get("toolCallId")
    _need(isinstance(call_id, str) and isinstance(name, str), f"a {kind} part needs a toolCallId and a tool name")
    return call_id, name  # type: ignore[return-value]


def _assistant(parts: Sequence[Any], where: str) -> list[Message]:
    """An assistant UIMessage: one condukt message per step (its text and calls), then the calls' results."""
    messages: list[Message] = []
    steps: list[list[Any]] = [[]]
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "step-start":
            if steps[-1]:
                steps.append([])
            continue
        steps[-1].append(part)
    for step in steps:
        text: list[str] = []
        calls: list[ToolCall] = []
        results: list[ToolResultMessage] = []
        for part in step:
            _need(isinstance(part, dict), f"{where}: parts must be objects")
            tool = _tool_part(part)
            if tool is not None:
                call_id, name = tool
                calls.append(ToolCall(call_id, name, part.get("input") if part.get("input") is not None else {}))
                state = part.get("state")
                if state == "output-available":
                    results.append(ToolResultMessage(call_id, name, (TextBlock(_output_text(part.get("output"))),)))
                elif state == "output-error":
                    results.append(ToolResultMessage(call_id, name, (TextBlock(str(part.get("errorText", ""))),), True))
            elif part.get("type") == "text":
                text.append(str(part.get("text", "")))
            # reasoning, sources, files and data parts of an answer are the client's display
        if text or calls:
            joined = "".join(text)
            messages.append(AssistantMessage(((TextBlock(joined),) if joined else ()) + tuple(calls)))
            messages.extend(results)
    return messages


def _user(parts: Sequence[Any], where: str) -> UserMessage:
    blocks: list[TextBlock | ImageBlock | DocumentBlock] = []
    for index, part in enumerate(parts):
        _need(isinstance(part, dict), f"{where}: parts must be objects")
        kind = part.get("type")
        if kind == "text":
            blocks.append(TextBlock(str(part.get("text", ""))))
        elif kind == "file":
            media_type, data = decode_data_url(part.get("url"), f"{where}[{index}].url")
            blocks.append(attachment(part.get("mediaType") or media_type, data, part.get("filename")))
        elif isinstance(kind, str) and (kind.startswith("data-") or kind in ("step-start", "source-url",
                                                                              "source-document")):
            continue
        else:
            raise ProtocolError(400, "unsupported_content", f"{where}[{index}]: {kind!r} parts are not supported")
    return UserMessage(tuple(blocks))


def conversation_of(body: Any, client_tools: tuple[ToolDefinition, ...]) -> tuple[str | None, ClientTurn]:
    """``(chat id, conversation)`` of an AI SDK chat body."""
    _need(isinstance(body, dict), "the body must be a JSON object with 'messages'")
    raw = body.get("messages")
    _need(isinstance(raw, list) and bool(raw), "messages must be a non-empty list of UI messages")
    chat_id = body.get("id")
    _need(chat_id is None or isinstance(chat_id, str), "id must be a string")
    messages: list[Message] = []
    instructions: list[str] = []
    for index, message in enumerate(raw):
        where = f"messages[{index}].parts"
        _need(isinstance(message, dict) and isinstance(message.get("parts"), list),
              f"messages[{index}] must be a UI message with parts")
        role, parts = message.get("role"), message["parts"]
        if role == "system":
            instructions.append("".join(str(p.get("text", "")) for p in parts if isinstance(p, dict)
                                        and p.get("type") == "text"))
        elif role == "user":
            messages.append(_user(parts, where))
        elif role == "assistant":
            messages.extend(_assistant(parts, where))
        else:
            raise ProtocolError(400, "invalid_messages", f"messages[{index}].role must be system, user or assistant")
    history, prompt, attachments = split_turn(messages)
    return chat_id, ClientTurn(history, prompt, attachments, "\n\n".join(instructions) or None, client_tools)


def _chunk(data: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


class _Vercel:
    def __init__(self, node: AppNode, served: ServedAgent, token: bytes | None, max_body_size: int,
                 run_timeout: float | None, client_tools: tuple[ToolDefinition, ...]) -> None:
        self.node = node
        self.served = served
        self.token = token
        self.max_body_size = max_body_size
        self.run_timeout = run_timeout
        self.client_tools = client_tools

    async def chat(self, request: Request) -> Response:
        """``POST /``: the chat body in, the UI message stream out."""
        try:
            if not bearer_ok(request, self.token):
                raise ProtocolError(401, "unauthorized", "a valid 'Authorization: Bearer <token>' header is needed",
                                    headers={"WWW-Authenticate": "Bearer"})
            body = await read_json(request, self.max_body_size)
            chat_id, turn = conversation_of(body, self.client_tools)
            node = await self.node.get()
            conversation = Conversation.of(turn)
            options = {} if chat_id is None else {"id": chat_id}
            try:
                agent = await self.served.spawn(node, conversation, **options)
            except (TypeError, ValueError) as exc:
                raise ProtocolError(400, "invalid_request", str(exc)) from None
        except ProtocolError as exc:
            return JSONResponse({"error": exc.code, "message": exc.message}, exc.status, headers=exc.headers)
        return EventStreamResponse(self._stream(agent, conversation), cleanup=functools.partial(stop_agent, agent),
                                   headers={"x-vercel-ai-ui-message-stream": "v1"})

    async def _stream(self, agent: Any, conversation: Conversation) -> AsyncIterator[str]:
        turn = conversation.turn
        images = [b for b in turn.attachments if type(b) is ImageBlock] or None
        documents = [b for b in turn.attachments if type(b) is DocumentBlock] or None
        yield _chunk({"type": "start", "messageId": f"msg_{uuid.uuid4().hex}"})
        try:
            async with agent.stream(CONTINUE if turn.continues else turn.prompt, images=images, documents=documents,
                                    timeout=self.run_timeout) as stream:
                translate = UiParts(conversation)
                async for event in stream:
                    for part in translate(event):
                        kind = part.kind
                        if kind == "step-start":
                            yield _chunk({"type": "start-step"})
                        elif kind == "step-end":
                            yield _chunk({"type": "finish-step"})
                        elif kind in ("text-start", "text-end", "reasoning-start", "reasoning-end"):
                            yield _chunk({"type": kind, "id": part.id})
                        elif kind in ("text-delta", "reasoning-delta"):
                            yield _chunk({"type": kind, "id": part.id, "delta": part.text})
                        elif kind == "tool-call":
                            yield _chunk({"type": "tool-input-start", "toolCallId": part.id, "toolName": part.name})
                            yield _chunk({"type": "tool-input-available", "toolCallId": part.id,
                                          "toolName": part.name, "input": part.arguments})
                        elif kind == "tool-result":
                            if part.is_error:
                                yield _chunk({"type": "tool-output-error", "toolCallId": part.id,
                                              "errorText": part.text})
                            else:
                                yield _chunk({"type": "tool-output-available", "toolCallId": part.id,
                                              "output": part.text})
                        elif kind == "error":
                            yield _chunk({"type": "error", "errorText": f"{part.reason}: {part.text}"})
                            yield _chunk({"type": "finish", "finishReason": "error"})
                        elif kind == "finish":
                            yield _chunk({"type": "finish", "finishReason": _FINISH.get(part.reason, "other")})
                    if translate.done:
                        break
        except Exception as exc:  # the agent crashed, or refused the run
            yield _chunk({"type": "error", "errorText": f"{type(exc).__name__}: {exc}"})
            yield _chunk({"type": "finish", "finishReason": "error"})
        finally:
            await stop_agent(agent)
        yield "data: [DONE]\n\n"


def _definitions(tools: Sequence[Any]) -> tuple[ToolDefinition, ...]:
    found = []
    for tool in tools:
        if isinstance(tool, ToolDefinition):
            found.append(tool)
        elif isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
            found.append(ToolDefinition(tool["name"], str(tool.get("description", "")),
                                        tool.get("parameters") or {"type": "object", "properties": {}}))
        else:
            raise TypeError(f"client_tools holds ToolDefinitions or {{'name', 'description', 'parameters'}} dicts, "
                            f"got {tool!r}")
    return tuple(found)


def vercel_ai_app(
    node: Node | condukt_asyncio.Node | None = None,
    *,
    agent: Any,
    client_tools: Sequence[ToolDefinition | Mapping[str, Any]] = (),
    token: str | None = None,
    max_body_size: int = 8 << 20,
    run_timeout: float | None = 300.0,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> Starlette:
    """An agent behind the Vercel AI SDK's UI message stream: a Starlette ASGI app (``docs/vercel-ai.md``).

    ``POST /`` takes the chat body ``useChat`` sends (``DefaultChatTransport``:
    ``{"id", "messages"}``) and streams the UI message stream protocol v1
    (header ``x-vercel-ai-ui-message-stream: v1``): ``start``, a step per
    model response, text and reasoning parts, ``tool-input-available`` and
    ``tool-output-available`` / ``tool-output-error`` for the agent's own
    tools, ``finish`` (``finishReason``), or ``error``; then ``[DONE]``.

    ``agent``: an :class:`~condukt.Agent` subclass or a :class:`~condukt.ChildSpec`
    of one; each request plays the body's messages on a fresh agent process
    (session id: the chat's ``id``); a client that disconnects aborts it.
    ``client_tools`` (``ToolDefinition`` s or ``{"name", "description",
    "parameters"}``) are tools the browser runs (``useChat``'s
    ``onToolCall``): a call to one ends the answer with ``finishReason``
    ``"tool-calls"``, and the request carrying its output continues.
    ``node``, ``token``, ``max_body_size`` and ``run_timeout`` are as for
    :func:`condukt.web.openai_app`.
    ``allowed_hosts`` and ``allowed_origins`` are the
    :class:`~condukt.web.BrowserGuard`'s, in front of every route as for
    :func:`condukt.web.create_app`: a foreign ``Host`` gets 421, a foreign
    ``Origin`` 403, a body that is not JSON 415 (behind a proxy, pass the
    public name: ``allowed_hosts=["api.example.com"]``; a page served from
    another origin that calls the app needs its origin in ``allowed_origins``).

    Raises ``TypeError``/``ValueError`` for bad arguments. Synchronous.
    """
    holder = AppNode(node)
    served = ServedAgent.of("agent", agent)
    check_app_options(token, max_body_size, run_timeout)
    app = _Vercel(holder, served, None if token is None else token.encode(), max_body_size, run_timeout,
                  _definitions(client_tools))
    return Starlette(routes=[Route("/", app.chat, methods=["POST"])],
                     middleware=[guard_middleware(allowed_hosts, allowed_origins)], lifespan=holder.lifespan())
