"""``ag_ui_app``: an agent behind the AG-UI protocol (``ag-ui-protocol``'s types), for CopilotKit and friends.

``POST /`` takes a ``RunAgentInput`` and answers Server-Sent Events:
``RUN_STARTED``, text messages, reasoning, tool calls (with their results
for the agent's own tools), ``RUN_FINISHED`` or ``RUN_ERROR``. The client
sends the whole conversation each run; it is played on a fresh agent process
whose session id is the ``threadId`` (:class:`~._protocol.Conversation`),
so no turn is ever added twice. The client's tools (``tools``) are the
client's: a call to one ends the run, and the run carrying its result
continues.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import ag_ui.core as ag
import pydantic
from ag_ui.core import (
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import BaseEvent
from ag_ui.encoder import EventEncoder
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
    event_failure,
    read_json,
    split_turn,
    stop_agent,
)
from ._ui import UiParts

__all__ = ["ag_ui_app", "conversation_of"]

_ENCODER = EventEncoder()


def _arguments(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return raw  # as a provider gives invalid JSON: the agent reports it to the model


def _content(content: Any, where: str) -> list[TextBlock | ImageBlock | DocumentBlock]:
    if isinstance(content, str):
        return [TextBlock(content)]
    blocks: list[TextBlock | ImageBlock | DocumentBlock] = []
    for index, part in enumerate(content):
        kind = part.type
        if kind == "text":
            blocks.append(TextBlock(part.text))
        elif kind in ("image", "document"):
            source = part.source
            if source.type == "data":
                block = attachment(source.mime_type, source.value)
            else:
                media_type, data = decode_data_url(source.value, f"{where}[{index}].source")
                block = attachment(media_type, data)
            if kind == "image" and type(block) is not ImageBlock:
                raise ProtocolError(400, "invalid_content", f"{where}[{index}] is not an image")
            blocks.append(block)
        else:
            raise ProtocolError(400, "unsupported_content", f"{where}[{index}]: {kind} parts are not supported")
    return blocks


def conversation_of(run: RunAgentInput) -> ClientTurn:
    """The condukt conversation of an AG-UI run: its messages, context, and the client's tools.

    Raises :class:`~._protocol.ProtocolError` (400) for what condukt cannot
    take (audio, URLs to fetch, a conversation that does not end with the
    user's message or tool results).
    """
    messages: list[Message] = []
    instructions: list[str] = []
    names: dict[str, str] = {}
    for index, message in enumerate(run.messages):
        where = f"messages[{index}]"
        if isinstance(message, (ag.SystemMessage, ag.DeveloperMessage)):
            instructions.append(message.content)
        elif isinstance(message, ag.UserMessage):
            messages.append(UserMessage(tuple(_content(message.content, f"{where}.content"))))
        elif isinstance(message, ag.AssistantMessage):
            calls = [ToolCall(c.id, c.function.name, _arguments(c.function.arguments))
                     for c in message.tool_calls or ()]
            names.update((call.id, call.name) for call in calls)
            text = message.content or ""
            messages.append(AssistantMessage(((TextBlock(text),) if text else ()) + tuple(calls)))
        elif isinstance(message, ag.ToolMessage):
            content = message.content
            text = content if isinstance(content, str) else "".join(
                getattr(part, "text", "") for part in content)
            call_id = message.tool_call_id
            messages.append(ToolResultMessage(call_id, names.get(call_id, ""), (TextBlock(text),)))
        # reasoning and activity messages are the client's display: not sent to the model
    for item in run.context or ():
        instructions.append(f"{item.description}: {item.value}")
    tools = tuple(ToolDefinition(tool.name, tool.description, tool.parameters or {"type": "object", "properties": {}})
                  for tool in run.tools or ())
    history, prompt, attachments = split_turn(messages)
    return ClientTurn(history, prompt, attachments, "\n\n".join(instructions) or None, tools)


def _sse(event: BaseEvent) -> str:
    return _ENCODER.encode(event)


class _AgUi:
    def __init__(self, node: AppNode, served: ServedAgent, token: bytes | None, max_body_size: int,
                 run_timeout: float | None) -> None:
        self.node = node
        self.served = served
        self.token = token
        self.max_body_size = max_body_size
        self.run_timeout = run_timeout

    async def run(self, request: Request) -> Response:
        """``POST /``: a ``RunAgentInput`` in, AG-UI events out."""
        try:
            if not bearer_ok(request, self.token):
                raise ProtocolError(401, "unauthorized", "a valid 'Authorization: Bearer <token>' header is needed",
                                    headers={"WWW-Authenticate": "Bearer"})
            body = await read_json(request, self.max_body_size)
            try:
                run = RunAgentInput.model_validate(body)
            except pydantic.ValidationError as exc:
                raise ProtocolError(422, "invalid_run_input", "the body is not an AG-UI RunAgentInput: "
                                    + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                for e in exc.errors()[:5])) from None
            turn = conversation_of(run)
            node = await self.node.get()
            conversation = Conversation.of(turn)
            try:
                agent = await self.served.spawn(node, conversation, id=run.thread_id)
            except (TypeError, ValueError) as exc:
                raise ProtocolError(400, "invalid_tools", str(exc)) from None
        except ProtocolError as exc:
            return JSONResponse({"error": exc.code, "message": exc.message}, exc.status, headers=exc.headers)
        return EventStreamResponse(self._events(agent, conversation, run),
                                   cleanup=functools.partial(stop_agent, agent))

    async def _events(self, agent: Any, conversation: Conversation, run: RunAgentInput) -> AsyncIterator[str]:
        thread_id, run_id = run.thread_id, run.run_id
        turn = conversation.turn
        images = [b for b in turn.attachments if type(b) is ImageBlock] or None
        documents = [b for b in turn.attachments if type(b) is DocumentBlock] or None
        yield _sse(RunStartedEvent(thread_id=thread_id, run_id=run_id, parent_run_id=run.parent_run_id))
        try:
            async with agent.stream(CONTINUE if turn.continues else turn.prompt, images=images, documents=documents,
                                    timeout=self.run_timeout) as stream:
                text_message = ""  # the assistant message the turn's tool calls belong to
                translate = UiParts(conversation)
                async for event in stream:
                    for part in translate(event):
                        kind = part.kind
                        if kind == "text-start":
                            text_message = part.id
                            yield _sse(TextMessageStartEvent(message_id=part.id, role="assistant"))
                        elif kind == "text-delta":
                            yield _sse(TextMessageContentEvent(message_id=part.id, delta=part.text))
                        elif kind == "text-end":
                            yield _sse(TextMessageEndEvent(message_id=part.id))
                        elif kind == "reasoning-start":
                            yield _sse(ReasoningStartEvent(message_id=part.id))
                            yield _sse(ReasoningMessageStartEvent(message_id=part.id, role="reasoning"))
                        elif kind == "reasoning-delta":
                            yield _sse(ReasoningMessageContentEvent(message_id=part.id, delta=part.text))
                        elif kind == "reasoning-end":
                            yield _sse(ReasoningMessageEndEvent(message_id=part.id))
                            yield _sse(ReasoningEndEvent(message_id=part.id))
                        elif kind == "tool-call":
                            arguments = part.arguments
                            if not isinstance(arguments, str):
                                arguments = json.dumps(arguments)
                            yield _sse(ToolCallStartEvent(tool_call_id=part.id, tool_call_name=part.name,
                                                          parent_message_id=text_message or None))
                            yield _sse(ToolCallArgsEvent(tool_call_id=part.id, delta=arguments))
                            yield _sse(ToolCallEndEvent(tool_call_id=part.id))
                        elif kind == "tool-result":
                            yield _sse(ToolCallResultEvent(message_id=f"{part.id}-result", tool_call_id=part.id,
                                                           content=part.text, role="tool"))
                        elif kind == "error":
                            _, code = event_failure(part.reason, part.text)
                            yield _sse(RunErrorEvent(message=part.text, code=code))
                            return
                        elif kind == "finish":
                            yield _sse(RunFinishedEvent(thread_id=thread_id, run_id=run_id))
                            return
        except Exception as exc:  # the agent crashed, or refused the run
            yield _sse(RunErrorEvent(message=f"{type(exc).__name__}: {exc}", code="agent_crashed"))
        finally:
            await stop_agent(agent)


def ag_ui_app(
    node: Node | condukt_asyncio.Node | None = None,
    *,
    agent: Any,
    token: str | None = None,
    max_body_size: int = 8 << 20,
    run_timeout: float | None = 300.0,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> Starlette:
    """An agent behind the AG-UI protocol: a Starlette ASGI app (``docs/ag-ui.md``).

    ``POST /`` takes a ``RunAgentInput`` (``ag-ui-protocol``) and streams
    AG-UI events over SSE: ``RUN_STARTED``, ``TEXT_MESSAGE_START`` /
    ``CONTENT`` / ``END`` per answer text, ``REASONING_*`` for the model's
    thinking, ``TOOL_CALL_START`` / ``ARGS`` / ``END`` per tool call (and
    ``TOOL_CALL_RESULT`` for the agent's own tools, which run server-side),
    then ``RUN_FINISHED``, or ``RUN_ERROR`` for a failed run.

    ``agent``: an :class:`~condukt.Agent` subclass or a :class:`~condukt.ChildSpec`
    of one. Each run is played on a fresh agent process holding the run's
    conversation, its session id the ``threadId``; a client that
    disconnects aborts it (tool subprocesses killed). A call to a tool the
    client declared ends the run after ``TOOL_CALL_END`` (the client runs
    it); the next run, carrying its result as a ``tool`` message, continues.
    ``node``, ``token``, ``max_body_size`` and ``run_timeout`` are as for
    :func:`condukt.web.openai_app`; errors before the stream starts are
    JSON ``{"error", "message"}`` with a 4xx status.
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
    app = _AgUi(holder, served, None if token is None else token.encode(), max_body_size, run_timeout)
    return Starlette(routes=[Route("/", app.run, methods=["POST"])],
                     middleware=[guard_middleware(allowed_hosts, allowed_origins)], lifespan=holder.lifespan())

