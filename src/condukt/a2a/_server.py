"""``condukt.a2a.asgi_app``: an agent served over A2A, on the official ``a2a-sdk``.

The SDK parses and answers JSON-RPC (its dispatcher, with its v0.3 adapter
so both method spellings work: ``SendMessage`` and ``message/send``...) and
serialises its types; condukt supplies the SDK's ``RequestHandler`` on its
own agents: a context is a session (one agent process under the sessions'
dynamic supervisor), a task is one run of it (:mod:`._tasks`).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, MutableMapping, Sequence
from typing import Any

import trio
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    PushNotificationNotSupportedError,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    UnsupportedOperationError,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.protobuf.json_format import MessageToJson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..agent import Agent
from ..messages import DocumentBlock, ImageBlock
from ..otp import ChildSpec, NameTaken, Node
from ..web.lowlevel import (
    AgentRoute,
    AppNode,
    ProtocolError,
    Sessions,
    SessionsFull,
    attachment,
    bearer_ok,
    guard_middleware,
)
from ._tasks import TaskRecord, Tasks

__all__ = ["asgi_app"]

_apps = itertools.count()
#: The longest context id a client may choose (it names a session).
MAX_CONTEXT_ID = 200
#: How long ``tasks/cancel`` waits for the aborted run to settle before answering.
CANCEL_WAIT = 10.0

_INPUT_MODES = ["text/plain", "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"]


def _prompt(message: Message) -> tuple[str, tuple[ImageBlock, ...], tuple[DocumentBlock, ...]]:
    """The prompt of a user message: its text and data parts as text, its files as images and documents."""
    texts: list[str] = []
    images: list[ImageBlock] = []
    documents: list[DocumentBlock] = []
    for index, part in enumerate(message.parts):
        which = part.WhichOneof("content")
        if which == "text":
            texts.append(part.text)
        elif which == "data":
            texts.append(MessageToJson(part.data, indent=None))
        elif which == "raw":
            block = attachment(part.media_type or "application/octet-stream",
                               base64.b64encode(part.raw).decode("ascii"), part.filename or None)
            (images if isinstance(block, ImageBlock) else documents).append(block)  # type: ignore[arg-type]
        elif which == "url":
            raise InvalidParamsError(f"message.parts[{index}]: file URLs are not fetched; send the bytes (raw)")
        else:
            raise InvalidParamsError(f"message.parts[{index}] is empty")
    text = "\n".join(texts)
    if not text and not images and not documents:
        raise InvalidParamsError("the message has no content")
    return text, tuple(images), tuple(documents)


class ConduktHandler(RequestHandler):
    """The SDK's request handler, on condukt agents: contexts are sessions, tasks are runs."""

    def __init__(self, node: AppNode, sessions: Sessions, route: AgentRoute, tasks: Tasks) -> None:
        self.node = node
        self.sessions = sessions
        self.route = route
        self.tasks = tasks
        self._attached: Any = None

    async def _node(self) -> Node:
        try:
            node = await self.node.get()
        except ProtocolError as exc:
            raise UnsupportedOperationError(exc.message) from None
        if not isinstance(node, Node):
            raise UnsupportedOperationError("condukt.a2a runs on trio (hypercorn -k trio, condukt serve)")
        if self._attached is not node:
            self.sessions.attach(node)
            self._attached = node
        trio_node: Node = node
        return trio_node

    async def _context_agent(self, context_id: str) -> Any:
        agent = await self.sessions.get(context_id)
        if agent is not None:
            return agent
        try:
            _, agent = await self.sessions.open(self.route, context_id)
        except NameTaken:  # another request opened it meanwhile
            agent = await self.sessions.get(context_id)
        except SessionsFull as exc:
            raise UnsupportedOperationError(f"{exc}: try again later") from None
        if agent is None:
            raise UnsupportedOperationError(f"the session of context {context_id!r} could not be started")
        return agent

    async def _start(self, params: SendMessageRequest) -> TaskRecord:
        """A new task for the request's message, its run started."""
        node = await self._node()
        message = params.message
        if message.task_id:
            known = self.tasks.get(message.task_id)
            if known is None:
                raise TaskNotFoundError(f"no task {message.task_id!r}")
            raise InvalidParamsError(f"task {message.task_id!r} is no longer waiting for input: send the message "
                                     "without a taskId (with its contextId to continue the conversation)")
        context_id = message.context_id or uuid.uuid4().hex
        if len(context_id) > MAX_CONTEXT_ID:
            raise InvalidParamsError(f"contextId is longer than {MAX_CONTEXT_ID} characters")
        prompt, images, documents = _prompt(message)
        agent = await self._context_agent(context_id)
        task_id = uuid.uuid4().hex
        received = Message()
        received.CopyFrom(message)
        received.context_id = context_id
        received.task_id = task_id
        task = Task(id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[received])
        task.status.timestamp.GetCurrentTime()
        record = TaskRecord(task, agent, prompt, images, documents)
        await self.tasks.start(node, record)
        return record

    def _record(self, task_id: str) -> TaskRecord:
        record = self.tasks.get(task_id)
        if record is None:
            raise TaskNotFoundError(f"no task {task_id!r}")
        return record

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        """``message/send``: the task once it ended (at once with ``returnImmediately``); the run goes on if the
        client leaves."""
        record = await self._start(params)
        if not params.configuration.return_immediately:
            await record.done.wait()
        return record.snapshot(self._history_length(params))

    @staticmethod
    def _history_length(params: SendMessageRequest) -> int | None:
        configuration = params.configuration
        return configuration.history_length if configuration.HasField("history_length") else None

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        """``message/stream``: the task, then its status and artifact updates until it ends."""
        record = await self._start(params)
        async for event in self._follow(record):
            yield event

    async def _follow(self, record: TaskRecord) -> AsyncIterator[Any]:
        # Subscribed before the snapshot: nothing falls between them (an update may repeat the snapshot's state).
        updates = record.subscribe()
        yield record.snapshot()
        async with updates:
            async for update in updates:
                yield update

    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest, context: ServerCallContext
                                   ) -> AsyncGenerator[Any]:
        """``tasks/resubscribe``: the task's current state, then its updates until it ends."""
        record = self._record(params.id)
        if record.terminal:
            raise UnsupportedOperationError(f"task {params.id!r} has ended: read it with tasks/get")
        async for event in self._follow(record):
            yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """``tasks/get``."""
        record = self._record(params.id)
        return record.snapshot(params.history_length if params.HasField("history_length") else None)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """``tasks/cancel``: abort the task's run (queued or running; tool subprocesses killed)."""
        record = self._record(params.id)
        if record.terminal or record.done.is_set():
            raise TaskNotCancelableError(f"task {params.id!r} has already ended "
                                         f"({TaskState.Name(record.task.status.state)})")
        record.cancel_requested = True
        if record.run_id is None:
            # Not started (queued behind another task of its context): canceled now; its run, when its turn
            # comes, stops at its start.
            await record.end("aborted", "the task was canceled")
            record.close()
        else:
            await record.agent.abort(record.run_id)
            with trio.move_on_after(CANCEL_WAIT):
                await record.done.wait()
        return record.snapshot()

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """``ListTasks``: the tasks kept, of one context if given (no paging)."""
        found = [record.snapshot(params.history_length if params.HasField("history_length") else None)
                 for record in self.tasks.in_context(params.context_id)
                 if not params.status or record.task.status.state == params.status]
        if not params.include_artifacts:
            for task in found:
                del task.artifacts[:]
        return ListTasksResponse(tasks=found, page_size=len(found), total_size=len(found))

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest, context: ServerCallContext
                                         ) -> AgentCard:
        raise UnsupportedOperationError("this agent has no extended card")


def _jsonrpc_error(status: int, code: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}, status,
                        headers=headers)


def asgi_app(
    node: Node | None = None,
    *,
    agent: Any,
    name: str,
    description: str,
    version: str = "1.0.0",
    skills: Sequence[AgentSkill] = (),
    token: str | None = None,
    max_body_size: int = 8 << 20,
    run_timeout: float | None = 300.0,
    max_sessions: int = 1000,
    session_idle_timeout: float | None = 900.0,
    max_tasks: int = 10_000,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> Starlette:
    """An agent served over A2A: a Starlette ASGI app (``docs/a2a.md``).

    ``GET /.well-known/agent-card.json`` is the agent card (its interface
    URL is the app's own, taken from the request, so the app needs no
    address of its own); ``POST /`` answers JSON-RPC: ``message/send``,
    ``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``
    and their A2A 1.0 names (``SendMessage``...).

    ``agent``: an :class:`~condukt.Agent` subclass or a :class:`~condukt.ChildSpec`
    of one. Each A2A ``contextId`` is a session: one agent process (a
    message without one starts a new context); each message is a task, one
    run of that agent, driven on the node (not by the request): a client
    that leaves does not stop it, ``tasks/cancel`` does (``Aborted``, tool
    subprocesses killed). ``token``: the JSON-RPC endpoint needs
    ``Authorization: Bearer <token>`` (the card says so); the card stays
    public. ``run_timeout`` bounds each task's run; ``max_sessions`` and
    ``session_idle_timeout`` are the sessions' limits (as in
    :func:`condukt.web.create_app`); the last ``max_tasks`` tasks are kept
    for ``tasks/get``.

    ``node``: a trio :class:`condukt.Node`, or ``None`` (the app's lifespan
    opens one). The app runs on trio (``hypercorn -k trio``, ``condukt serve``).
    ``allowed_hosts`` and ``allowed_origins`` are the
    :class:`~condukt.web.BrowserGuard`'s, in front of every route as for
    :func:`condukt.web.create_app`: a foreign ``Host`` gets 421, a foreign
    ``Origin`` 403, a body that is not JSON 415 (behind a proxy, pass the
    public name: ``allowed_hosts=["api.example.com"]``).

    Raises ``TypeError``/``ValueError`` for bad arguments. Synchronous.
    """
    if node is not None and not isinstance(node, Node):
        raise TypeError(f"node must be a trio condukt Node or None, got {node!r}")
    if isinstance(agent, ChildSpec):
        route = AgentRoute.of(name, agent)
    elif isinstance(agent, type) and issubclass(agent, Agent):
        route = AgentRoute.of(name, agent)
    else:
        raise TypeError(f"agent must be an Agent subclass or a ChildSpec of one, got {agent!r}")
    for label, text in (("name", name), ("description", description), ("version", version)):
        if not isinstance(text, str) or not text:
            raise ValueError(f"{label} must be a non-empty string")
    if token is not None and (not isinstance(token, str) or not token):
        raise ValueError("token must be None or a non-empty str")
    for label, count in (("max_body_size", max_body_size), ("max_sessions", max_sessions), ("max_tasks", max_tasks)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{label} must be an int >= 1, got {count!r}")
    holder = AppNode(node)
    sessions = Sessions({name: route}, max_sessions=max_sessions, idle_timeout=session_idle_timeout,
                        max_restarts=3, max_seconds=5.0)
    tasks = Tasks(max_tasks, run_timeout, next(_apps))
    handler = ConduktHandler(holder, sessions, route, tasks)
    secret = None if token is None else token.encode()
    (rpc,) = create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)

    card = AgentCard(
        name=name, description=description, version=version,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=_INPUT_MODES, default_output_modes=["text/plain"],
        skills=list(skills) or [AgentSkill(id=name, name=name, description=description, tags=["condukt"])],
    )
    if secret is not None:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer")))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))

    async def agent_card(request: Request) -> Response:
        served = AgentCard()
        served.CopyFrom(card)
        # The app's own address: the card's URL less the card's path (a mounted app's prefix stays).
        path = request.url.path
        base = path.rsplit("/.well-known/", 1)[0]
        url = str(request.url.replace(path=base + "/", query="", fragment=""))
        for protocol_version in ("1.0", "0.3"):
            served.supported_interfaces.append(
                AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=protocol_version))
        return JSONResponse(agent_card_to_dict(served))

    async def jsonrpc(request: Request) -> Response:
        if not bearer_ok(request, secret):
            return _jsonrpc_error(401, -32600, "a valid 'Authorization: Bearer <token>' header is needed",
                                  {"WWW-Authenticate": "Bearer"})
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body_size:
            return _jsonrpc_error(413, -32600, f"the request body is larger than {max_body_size} bytes",
                                  {"Connection": "close"})
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_size:
                return _jsonrpc_error(413, -32600, f"the request body is larger than {max_body_size} bytes",
                                      {"Connection": "close"})
        sent = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal sent
            if sent:  # the body was read: what follows is the client's disconnect
                return await request.receive()
            sent = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        answer: Response = await rpc.endpoint(Request(request.scope, replay))
        return answer

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with holder.lifespan()(app) as state:
            if not isinstance(state["node"], Node):
                raise RuntimeError("condukt.a2a runs on trio: serve the app with hypercorn -k trio or condukt serve")
            try:
                yield state
            finally:
                with trio.CancelScope(shield=True):
                    await sessions.aclose()

    browser_guard = guard_middleware(allowed_hosts, allowed_origins)
    return Starlette(
        middleware=[browser_guard],
        routes=[
            Route(AGENT_CARD_WELL_KNOWN_PATH, agent_card, methods=["GET"]),
            Route("/.well-known/agent.json", agent_card, methods=["GET"]),  # where A2A 0.3 clients look
            Route("/", jsonrpc, methods=["POST"]),
        ],
        lifespan=lifespan,
    )

