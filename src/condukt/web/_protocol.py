"""What the protocol adapters share: a node for the app, bounded JSON bodies, and client conversations.

The OpenAI, AG-UI and Vercel AI protocols (and A2A, through
:mod:`condukt.web.lowlevel`) hand the agent a conversation the *client*
holds, and tools the client runs itself. :class:`ClientTurn` is one such
request, and :class:`Conversation` the capability that plays it on an agent:
its ``setup`` puts the client's messages in the agent's history (the hook
documented for restoring state), its tools are the client's tool
definitions, and a call the model makes to one of them ends the run after
its turn, so the adapter can hand the call to the client. The client's
result comes back in its next request as a tool result message at the end
of the conversation: that request's run has no new prompt, and the
capability leaves its placeholder prompt out of every model request.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

import anyio
import attrs
import sniffio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse

from .. import asyncio as condukt_asyncio
from ..agent import Agent, Capability, Run
from ..lifespan import open_app_node
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
from ..otp import ChildSpec, ConduktError, Node, current_node
from ..providers import ModelRequest
from ..tools import Tool, ToolContext

__all__ = [
    "AppNode",
    "ClientTool",
    "ClientTurn",
    "Conversation",
    "EventStreamResponse",
    "ProtocolError",
    "ServedAgent",
    "bearer_ok",
    "decode_data_url",
    "read_json",
]

#: The text of a continuing run's prompt: never sent to the model (see :class:`Conversation`).
CONTINUE = "(continue)"
#: What the history holds for a client tool call until the client's result replaces it.
SENT_TO_CLIENT = "(sent to the client, which runs this tool itself)"


class ProtocolError(ConduktError):
    """An answer a protocol adapter gives instead of running: HTTP status, a code, a message.

    Each adapter renders it in its protocol's error shape (OpenAI's
    ``{"error": {...}}``, JSON-RPC errors for A2A, ...).
    """

    def __init__(self, status: int, code: str, message: str, *, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.headers = dict(headers or {})


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body, read up to ``limit`` bytes.

    Raises :class:`ProtocolError` 413 as soon as more arrive (the rest is
    never read, and the answer closes the connection), 415 for a declared
    content type that is not JSON, 400 for a body that is not JSON.
    Cancellation stops the read (the body is lost with the request).
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and kind != "application/json" and not kind.endswith("+json"):
        raise ProtocolError(415, "unsupported_media_type", f"the body must be application/json, not {kind!r}")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large(limit)
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ProtocolError(400, "invalid_json", f"the body is not JSON: {exc}") from None


def too_large(limit: int) -> ProtocolError:
    """The 413 answer for a body over ``limit`` bytes."""
    return ProtocolError(413, "request_too_large", f"the request body is larger than {limit} bytes",
                         headers={"Connection": "close"})


def bearer_ok(request: Request, token: bytes | None) -> bool:
    """Whether ``request`` carries ``Authorization: Bearer <token>`` (always true without a token).

    The scheme is case-insensitive (RFC 9110); the token is compared in constant time.
    """
    if token is None:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    matches = hmac.compare_digest(given.strip().encode("utf-8", "replace"), token)
    return scheme.lower() == "bearer" and matches


_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)(?:;[^,;]*)*;base64,(.*)$", re.S)


def decode_data_url(url: str, what: str) -> tuple[str, str]:
    """``(media_type, base64 data)`` of a ``data:<type>;base64,...`` URL.

    Raises :class:`ProtocolError` 400 for any other URL: the adapters do not
    fetch URLs on the client's behalf (a server fetching what a request
    names is how internal addresses leak).
    """
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if match is None:
        shown = url[:60] if isinstance(url, str) else repr(url)
        raise ProtocolError(400, "unsupported_url",
                            f"{what}: only base64 data URLs (data:<type>;base64,...) are accepted, got {shown!r}")
    data = match.group(2).strip()
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError(400, "invalid_base64", f"{what}: the data URL is not valid base64") from None
    return match.group(1).lower(), data


def attachment(media_type: str, data: str, title: str | None = None) -> ImageBlock | DocumentBlock:
    """An image block for ``image/*``, a document block for anything else."""
    if media_type.startswith("image/"):
        return ImageBlock(media_type, data)
    return DocumentBlock(media_type, data, title)


# ---------------------------------------------------------------------------------- the conversation


@attrs.frozen
class ClientTurn:
    """One request of a protocol where the client holds the conversation.

    ``history`` is the conversation before this request's prompt (user,
    assistant and tool result messages); ``prompt`` and ``attachments`` the
    new user message, both empty when the request only brings the results of
    client tool calls (the last messages of ``history``): the run then
    *continues* the conversation. ``instructions`` are the client's own
    system text, sent after the agent's system prompt. ``client_tools`` are
    the tools the client declared and runs itself.
    """

    history: tuple[Message, ...] = ()
    prompt: str = ""
    attachments: tuple[ImageBlock | DocumentBlock, ...] = ()
    instructions: str | None = None
    client_tools: tuple[ToolDefinition, ...] = ()

    @property
    def continues(self) -> bool:
        """Whether the run answers tool results rather than a new prompt."""
        return not self.prompt and not self.attachments


def split_turn(messages: Sequence[Message]) -> tuple[tuple[Message, ...], str, tuple[ImageBlock | DocumentBlock, ...]]:
    """``(history, prompt, attachments)``: the last user message becomes the prompt.

    A conversation ending with tool results has no prompt (a continuation).
    Raises :class:`ProtocolError` 400 for an empty conversation or one that
    ends with the assistant's message, and for tool calls the conversation
    answers only in part.
    """
    if not messages:
        raise ProtocolError(400, "invalid_messages", "the conversation is empty: send at least one user message")
    check_tool_results(messages)
    last = messages[-1]
    if type(last) is UserMessage:
        text = "".join(block.text for block in last.content if type(block) is TextBlock)
        attachments = tuple(block for block in last.content if type(block) is not TextBlock)
        if not text and not attachments:
            raise ProtocolError(400, "invalid_messages", "the last user message is empty")
        return tuple(messages[:-1]), text, attachments
    if type(last) is ToolResultMessage:
        return tuple(messages), "", ()
    raise ProtocolError(400, "invalid_messages",
                        "the conversation must end with a user message or tool results, not the assistant's")


def check_tool_results(messages: Sequence[Message]) -> None:
    """Every tool call of an assistant message is answered right after it, and every result answers one.

    Providers refuse anything else; this says which call, before any model request.
    """
    waiting: dict[str, str] = {}
    for message in messages:
        if type(message) is ToolResultMessage:
            if message.tool_call_id not in waiting:
                raise ProtocolError(400, "invalid_messages",
                                    f"a tool result answers {message.tool_call_id!r}, which no preceding "
                                    "assistant message called")
            del waiting[message.tool_call_id]
            continue
        if waiting:
            missing = ", ".join(sorted(waiting))
            raise ProtocolError(400, "invalid_messages",
                                f"the assistant's tool calls {missing} need their results right after them")
        if type(message) is AssistantMessage:
            waiting = {call.id: call.name for call in message.tool_calls}
    if waiting:
        missing = ", ".join(sorted(waiting))
        raise ProtocolError(400, "invalid_messages",
                            f"the assistant's tool calls {missing} need their results (the conversation ends "
                            "with the calls)")


class ClientTool(Tool):
    """A tool the client declared: the model sees it, the client runs it (:class:`Conversation` answers calls)."""

    def __init__(self, definition: ToolDefinition) -> None:
        super().__init__()
        self.name = definition.name
        self.description = definition.description
        self.parameters = dict(definition.parameters) or {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Never runs: :class:`Conversation` answers every call of a client tool before it would."""
        raise AssertionError("a client tool is run by the client")


class Conversation(Capability):
    """Plays a :class:`ClientTurn` on an agent (one capability per request): make one with :meth:`of`.

    * ``setup`` puts ``turn.history`` in the agent's history;
    * ``tools`` offers the client's tools next to the agent's own;
    * ``prepare_request`` appends the client's instructions to the system
      prompt and, for a continuation, leaves out the placeholder prompt
      (:data:`CONTINUE`) the run was started with;
    * a call to a client tool with valid arguments is answered with a
      placeholder and ends the run after its turn (``client_calls`` holds
      them); invalid arguments are an error result the model sees, as for
      its own tools.

    Only the hooks a turn needs are there (:meth:`of` picks the class): an
    agent pays for a hook on every turn once it is overridden (the
    protocols benchmark, ``benchmarks/protocols.py``, measures it).
    """

    #: Whether this class adds hooks (client tools, rewrites) beyond the history.
    extras: ClassVar[bool] = False

    def __init__(self, turn: ClientTurn) -> None:
        self.turn = turn
        self.client = {definition.name: ClientTool(definition) for definition in turn.client_tools}
        #: The client tool calls that ended the run, in the model's order.
        self.client_calls: list[ToolCall] = []
        #: Index of this request's first new message in the history.
        self.start = len(turn.history)

    @staticmethod
    def of(turn: ClientTurn) -> Conversation:
        """The conversation capability for ``turn``, with the hooks it needs and no others."""
        rewrites = bool(turn.instructions) or turn.continues
        if turn.client_tools:
            return _ToolsAndRewrites(turn) if rewrites else _ClientTools(turn)
        return _Rewrites(turn) if rewrites else Conversation(turn)

    @property
    def needed(self) -> bool:
        """Whether the agent needs this capability at all (a new conversation without extras does not)."""
        return bool(self.turn.history) or self.extras

    async def setup(self, session: Any) -> None:
        """Put the client's conversation in the history (the agent starts with it, as after a restore)."""
        if self.turn.history:
            session.messages[:] = self.turn.history

    def new_messages(self, history: Sequence[Message]) -> list[Message]:
        """This request's messages in ``history``: the placeholder prompt and client-call placeholders left out."""
        new = list(history[self.start :])
        if self.turn.continues and new and type(new[0]) is UserMessage and new[0].text == CONTINUE:
            new.pop(0)
        held = {call.id for call in self.client_calls}
        return [m for m in new if not (type(m) is ToolResultMessage and m.tool_call_id in held)]


class _Rewrites(Conversation):
    extras = True

    def prepare_request(self, run: Run, request: ModelRequest) -> ModelRequest:
        """Add the client's instructions; drop a continuation's placeholder prompt."""
        turn = self.turn
        system = request.system_prompt
        if turn.instructions:
            system = f"{system}\n\n{turn.instructions}" if system else turn.instructions
        messages = request.messages
        if turn.continues and 0 <= run.start < len(messages):
            messages = messages[: run.start] + messages[run.start + 1 :]
        return attrs.evolve(request, system_prompt=system, messages=messages)


class _ClientTools(Conversation):
    extras = True

    def tools(self, session: Any) -> Sequence[Tool]:
        """The client's tools (checked like any tool at the agent's start)."""
        return list(self.client.values())

    def intercept_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """Hold a client tool's call for the client (an error result for invalid arguments)."""
        tool = self.client.get(call.name)
        if tool is None:
            return None
        problem = tool.validate(call.arguments)
        if problem is not None:
            return ToolResultMessage(call.id, call.name, (TextBlock(f"Error: {problem}"),), True)
        self.client_calls.append(call)
        return ToolResultMessage(call.id, call.name, (TextBlock(SENT_TO_CLIENT),))

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """End the run once the model called a client tool: the client answers it."""
        return bool(self.client_calls)


class _ToolsAndRewrites(_ClientTools, _Rewrites):
    pass


#: The start option that carries a request's :class:`Conversation` to its agent.
_CONVERSATION = "condukt_web_conversation"


def _served_class(agent: type[Agent]) -> type[Agent]:
    """``agent`` taking a :class:`Conversation` as a start option, besides its own capabilities."""

    class Served(agent):  # type: ignore[valid-type,misc]
        extra_options = frozenset({*agent.extra_options, _CONVERSATION})

        async def init(self, options: Mapping[str, Any]) -> None:
            self.__conversation = options[_CONVERSATION]
            await super().init(options)

        def capabilities(self) -> Sequence[Capability]:
            return [*super().capabilities(), self.__conversation]

    Served.__name__ = agent.__name__
    Served.__qualname__ = agent.__qualname__
    Served.__module__ = agent.__module__
    Served.__doc__ = agent.__doc__
    return Served


@attrs.define
class ServedAgent:
    """One agent of a protocol app: its class (made to take a :class:`Conversation`) and start options."""

    name: str
    agent: type[Agent]
    options: dict[str, Any]
    served: type[Agent]

    @classmethod
    def of(cls, name: str, value: Any) -> ServedAgent:
        """From an :class:`~condukt.Agent` subclass or a :class:`~condukt.ChildSpec` of one.

        Raises ``TypeError`` for anything else.
        """
        if isinstance(value, ChildSpec):
            start = value.start
            if not (isinstance(start, type) and issubclass(start, Agent)):
                raise TypeError(f"agent {name!r}: the ChildSpec must start an Agent subclass, got {start!r}")
            return cls(name, start, dict(value.kwargs), _served_class(start))
        if isinstance(value, type) and issubclass(value, Agent):
            return cls(name, value, {}, _served_class(value))
        raise TypeError(f"agent {name!r} must be an Agent subclass or a ChildSpec of one, got {value!r}")

    async def spawn(self, node: Any, conversation: Conversation, **options: Any) -> Any:
        """A new agent process on ``node`` holding ``conversation`` (stop it when done).

        ``options`` are start options added to the agent's own (``id=``: the session id).

        What spawning raises (a bad start option, a tool name the client
        reused) is raised here. Cancellation: cancelled while it starts,
        nothing is left running.
        """
        options = {**self.options, **options}
        if not conversation.needed:
            return await node.spawn(self.agent, **options)
        if "capabilities" in options:  # the start option replaces the class's capabilities(): add ours to it
            options["capabilities"] = [*options["capabilities"], conversation]
            return await node.spawn(self.agent, **options)
        return await node.spawn(self.served, **options, **{_CONVERSATION: conversation})


async def stop_agent(handle: Any) -> None:
    """Stop an agent a request started, shielded, never raising (cleanup in ``finally``)."""
    with anyio.CancelScope(shield=True):
        try:
            if handle.alive:
                await handle.stop()
        except Exception:
            pass  # it exited meanwhile


def check_app_options(token: str | None, max_body_size: int, run_timeout: float | None) -> None:
    """Raise ``ValueError`` for a protocol app's bad ``token``, ``max_body_size`` or ``run_timeout``."""
    if token is not None and (not isinstance(token, str) or not token):
        raise ValueError("token must be None or a non-empty str")
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 1:
        raise ValueError(f"max_body_size must be an int >= 1, got {max_body_size!r}")
    if run_timeout is not None and (isinstance(run_timeout, bool) or not isinstance(run_timeout, (int, float))
                                    or not 0 < run_timeout < float("inf")):
        raise ValueError(f"run_timeout must be None or a finite number > 0, got {run_timeout!r}")


# ---------------------------------------------------------------------------------- the node


class AppNode:
    """The node a protocol app runs agents on: given, opened by its lifespan, or the loop's default.

    ``node`` is a :class:`condukt.Node` (the app then runs on trio), a
    :class:`condukt.asyncio.Node` (asyncio), or ``None``: the app's lifespan
    opens one on whichever loop serves it, or, mounted where no lifespan
    runs, the loop's default node (:mod:`condukt.lifespan`) is used.
    """

    def __init__(self, node: Node | condukt_asyncio.Node | None) -> None:
        if node is not None and not isinstance(node, (Node, condukt_asyncio.Node)):
            raise TypeError(f"node must be a condukt Node, a condukt.asyncio Node or None, got {node!r}")
        self.given = node
        self.node: Any = node

    async def get(self) -> Any:
        """The node; :class:`ProtocolError` 503 when there is none. Cancellation only stops the lookup."""
        if self.node is None:
            library = sniffio.current_async_library()
            node = current_node() if library == "trio" else await condukt_asyncio.current_node()
            if node is None:
                raise ProtocolError(503, "not_ready", "no condukt node: pass one to the app, let the app's "
                                    "lifespan run, or open one with condukt.lifespan in the enclosing app's lifespan")
            self.node = node
        return self.node

    def lifespan(self) -> Any:
        """The Starlette lifespan: opens a node when none was given (and closes it)."""

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
            async with contextlib.AsyncExitStack() as stack:
                current = self.given if self.given is not None else await stack.enter_async_context(open_app_node())
                self.node = current
                try:
                    yield {"node": current}
                finally:
                    self.node = self.given

        return lifespan


# ---------------------------------------------------------------------------------- failures

#: A failed run's error class name -> (HTTP status, code): what an adapter answers for it.
FAILURES: Mapping[str, tuple[int, str]] = {
    "Aborted": (409, "aborted"),
    "RunTimeout": (504, "timeout"),
    "Busy": (429, "busy"),
    "UsageLimitExceeded": (429, "usage_limit_exceeded"),
    "GuardrailTripped": (422, "guardrail_tripped"),
    "ModelRefused": (422, "model_refused"),
    "InvalidOutput": (502, "invalid_output"),
    "NoResultSubmitted": (502, "invalid_output"),
    "CallError": (500, "agent_crashed"),
    "NoProc": (500, "agent_crashed"),
}


def run_failure(exc: BaseException) -> ProtocolError:
    """The answer for a run that raised ``exc`` (re-raises what is not a run's failure: a bug).

    A ``TypeError``/``ValueError`` is the request's content (a document type
    the model cannot take, an empty prompt): 400. A model or provider error
    is the upstream's: 502.
    """
    from ..agent import AgentError
    from ..otp import CallError, NoProc
    from ..providers import ModelError

    name = type(exc).__name__
    known = FAILURES.get(name)
    if known is not None and isinstance(exc, (AgentError, ModelError, CallError, NoProc)):
        status, code = known
        message = str(exc) or name
        if isinstance(exc, (CallError, NoProc)):
            message = "the agent crashed during the run"
        return ProtocolError(status, code, message)
    if isinstance(exc, (TypeError, ValueError)):
        return ProtocolError(400, "invalid_request", str(exc))
    if isinstance(exc, ModelError):
        return ProtocolError(502, "upstream_error", str(exc))
    if isinstance(exc, AgentError):
        return ProtocolError(500, "run_failed", str(exc))
    raise exc


def event_failure(error_type: str, message: str) -> tuple[int, str]:
    """``(status, code)`` for a failed run's :class:`~condukt.events.Error` event (a stream's failure)."""
    if error_type in FAILURES:
        return FAILURES[error_type]
    if error_type in {"UnsupportedContent", "EmptyPrompt", "InvalidInput", "ValueError", "TypeError"}:
        return 400, "invalid_request"
    return 502, "upstream_error"


# ---------------------------------------------------------------------------------- streaming


class EventStreamResponse(StreamingResponse):
    """A streamed answer that notices a client leaving, and always runs its ``cleanup``.

    Starlette's own response watches for the client's disconnect only on
    servers of ASGI spec versions before 2.4; after that, a client that left
    is noticed at the next write, which a run waiting on a long tool call may
    not make for minutes. This one always listens, so a disconnect cancels
    the body at once (the adapters' bodies abort their run when cancelled).
    ``cleanup`` (stopping the request's agent) runs however the response
    ends, even when the body never started.
    """

    def __init__(self, content: AsyncIterator[str], *, cleanup: Callable[[], Awaitable[None]] | None = None,
                 headers: Mapping[str, str] | None = None, media_type: str = "text/event-stream") -> None:
        super().__init__(content, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **(headers or {})},
                         media_type=media_type)
        self.cleanup = cleanup

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            async with anyio.create_task_group() as tasks:

                async def respond() -> None:
                    try:
                        await self.stream_response(send)
                    except OSError:  # the connection closed under a write
                        pass
                    tasks.cancel_scope.cancel()

                tasks.start_soon(respond)
                await self.listen_for_disconnect(receive)
                tasks.cancel_scope.cancel()
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            with anyio.CancelScope(shield=True):
                if aclose is not None:
                    await aclose()
                if self.cleanup is not None:
                    await self.cleanup()
