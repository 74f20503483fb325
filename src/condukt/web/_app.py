"""``create_app``: the routes, auth, body limits and lifespan of the endpoint (on Starlette)."""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
import attrs
import sniffio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount, Route

from .. import __version__, events, serialization
from .. import asyncio as condukt_asyncio
from ..agent import (
    Aborted,
    BoundOperation,
    Busy,
    InvalidInput,
    InvalidOutput,
    NoResultSubmitted,
    NotRunning,
    RunTimeout,
    UnknownApproval,
)
from ..lifespan import open_app_node
from ..messages import Message
from ..otp import CallError, Node, NoProc, current_node
from ..providers import ModelError
from ..schema import Schema
from ._guard import guard_middleware
from ._http import EXCEPTION_HANDLERS, Handler, HTTPError, check_token, guard
from ._json import JSONResponse, sse
from ._openapi import openapi
from ._sessions import AgentRoute, Sessions, SessionsFull
from .observer import openapi_operations as observer_operations
from .observer import routes as observer_routes

__all__ = ["HTTPError", "create_app"]


@attrs.frozen
class Operation:
    """One ``POST /operations/{name}``: the bound operation and its compiled schemas."""

    name: str
    bound: BoundOperation
    input: Schema[Any] | None
    output: Schema[Any]


@attrs.define
class Endpoint:
    """Everything the route handlers share; ``create_app`` builds one per app."""

    routes: dict[str, AgentRoute]
    operations: dict[str, Operation]
    sessions: Sessions
    token: bytes | None
    max_body_size: int
    run_timeout: float | None
    node: Any = None
    public_openapi: bool = False
    observer: bool = False

    # ------------------------------------------------------------------ plumbing

    def guard(self, handler: Handler, *, public: bool = False) -> Handler:
        """Wrap ``handler``: bearer auth (unless ``public``) and :class:`HTTPError` answers."""
        return guard(handler, self.token, public=public)

    async def read_json(self, request: Request) -> Any:
        """The request's JSON body, read up to ``max_body_size`` bytes (413 beyond, as soon as it is passed)."""
        limit = self.max_body_size
        length = request.headers.get("content-length")
        if length is not None and length.isascii() and length.isdigit() and int(length) > limit:
            raise _too_large(limit)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise _too_large(limit)
        if not body:
            return None
        try:
            return json.loads(body)
        except ValueError as exc:
            raise HTTPError(400, "InvalidJSON", f"the body is not JSON: {exc}") from None
        except RecursionError:
            raise HTTPError(400, "InvalidJSON", "the body is JSON nested too deeply") from None

    async def node_of(self) -> Any:
        """The app's node: given, opened by its lifespan, or else the loop's default node (a mounted app)."""
        if self.node is None:
            library = sniffio.current_async_library()
            node = current_node() if library == "trio" else await condukt_asyncio.current_node()
            if node is None:
                raise HTTPError(503, "NotReady", "no condukt node: pass create_app(node), let the app's lifespan "
                                "run, or open one with condukt.lifespan in the enclosing app's lifespan")
            if self.node is None:  # another request may have attached it meanwhile
                self.node = node
                self.sessions.attach(node)
        return self.node

    async def in_trio(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """Await the trio function ``fn`` on this app's node, whichever loop serves the request."""
        if isinstance(self.node, condukt_asyncio.Node):
            return await condukt_asyncio.call(fn, *args, **kwargs)
        return await fn(*args, **kwargs)

    async def session(self, request: Request, route: str | None = None) -> tuple[str, Any]:
        await self.node_of()
        session_id = request.path_params["id"]
        handle = await self.sessions.get(session_id, route)
        if handle is None:
            raise HTTPError(404, "SessionNotFound", f"no session {session_id!r}")
        return session_id, handle

    # ------------------------------------------------------------------ agent runs

    async def run(self, request: Request) -> Response:
        """``POST /agents/{name}/runs``: JSON answer, or SSE with ``Accept: text/event-stream``."""
        await self.node_of()
        name = request.path_params["name"]
        route = self.routes.get(name)
        if route is None:
            raise HTTPError(404, "AgentNotFound", f"no agent {name!r} (known: {', '.join(sorted(self.routes))})")
        body = await self.read_json(request)
        errors = _RUN_REQUEST.errors(body)
        if errors:
            raise HTTPError(422, "InvalidRequest", "the body does not match the run request schema", errors=errors)
        prompt: str = body["prompt"]
        session_id: str | None = body.get("session")
        if session_id is None:
            try:
                session_id, agent = await self.sessions.open(route)
            except SessionsFull as exc:
                raise HTTPError(503, "SessionsFull", str(exc), headers={"Retry-After": "1"}) from None
        else:
            agent = await self.sessions.get(session_id, name)
            if agent is None:
                raise HTTPError(404, "SessionNotFound", f"no session {session_id!r} of agent {name!r}")
        if "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(
                self._sse(agent, session_id, prompt, self.sessions.entry(session_id)),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", "X-Condukt-Session": session_id},
            )
        entry = self.sessions.entry(session_id)
        ended: list[events.AgentEnd] = []

        async def on_event(event: events.Event) -> None:
            if type(event) is events.AgentEnd:
                ended.append(event)

        try:
            text = await agent.run(prompt, timeout=self.run_timeout, on_event=on_event)
        except Exception as exc:
            if entry is not None and entry.deleted:
                raise _deleted(session_id) from None
            raise _run_error(exc, session_id) from None
        finally:
            self.sessions.touch(session_id)
        usage = serialization.unstructure(ended[-1].usage) if ended else None
        return JSONResponse({"session": session_id, "text": text, "usage": usage})

    async def _sse(self, agent: Any, session_id: str, prompt: str, entry: Any) -> AsyncIterator[bytes]:
        # A client that disconnects cancels this generator: leaving the stream block aborts the run.
        try:
            async with agent.stream(prompt, timeout=self.run_timeout) as stream:
                async for event in stream:
                    yield _sse(events.to_json(event))
        except Exception as exc:  # the agent crashed (it restarts), refused the run, or its session was deleted
            error = _deleted(session_id) if entry is not None and entry.deleted else None
            name, message = ((error.body["error"], str(error)) if error
                             else (type(exc).__name__, public_message(exc, session_id)))
            yield _sse(events.to_json(events.Error(name, message)))
            yield _sse(events.to_json(events.Done("failed")))
        finally:
            self.sessions.touch(session_id)

    # ------------------------------------------------------------------ sessions

    async def abort(self, request: Request) -> Response:
        """``POST /sessions/{id}/abort``."""
        session_id, agent = await self.session(request)
        return JSONResponse({"session": session_id, "aborted": await agent.abort()})

    async def steer(self, request: Request) -> Response:
        """``POST /sessions/{id}/steer`` ``{"message": str}``."""
        body = await self.read_json(request)
        errors = _STEER_REQUEST.errors(body)
        if errors:
            raise HTTPError(422, "InvalidRequest", "the body does not match the steer request schema", errors=errors)
        session_id, agent = await self.session(request)
        try:
            await agent.steer(body["message"])
        except NotRunning:
            raise HTTPError(409, "NotRunning", f"session {session_id!r} has no run in progress to steer",
                            session=session_id) from None
        return JSONResponse({"session": session_id, "steered": True})

    async def history(self, request: Request) -> Response:
        """``GET /sessions/{id}/history``."""
        session_id, agent = await self.session(request)
        messages = await agent.history()
        return JSONResponse(
            {"session": session_id, "messages": serialization.unstructure(list(messages), list[Message])}
        )

    async def approvals(self, request: Request) -> Response:
        """``GET /sessions/{id}/approvals``: the tool calls waiting for a decision, oldest first."""
        session_id, agent = await self.session(request)
        pending = await agent.pending_approvals()
        return JSONResponse({"session": session_id, "approvals": [serialization.unstructure(p) for p in pending]})

    async def decide(self, request: Request) -> Response:
        """``POST /sessions/{id}/approvals/{call_id}`` ``{"approve": bool, "reason": str}``."""
        body = await self.read_json(request)
        errors = _DECISION_REQUEST.errors(body)
        if errors:
            raise HTTPError(422, "InvalidRequest", "the body does not match the decision schema", errors=errors)
        session_id, agent = await self.session(request)
        call_id = request.path_params["call_id"]
        try:
            if body["approve"]:
                await agent.approve(call_id)
            else:
                await agent.deny(call_id, body.get("reason", ""))
        except UnknownApproval as exc:
            raise HTTPError(404, "UnknownApproval", str(exc)) from None
        return JSONResponse({"session": session_id, "call_id": call_id, "approved": body["approve"]})

    async def delete(self, request: Request) -> Response:
        """``DELETE /sessions/{id}``."""
        await self.node_of()
        session_id = request.path_params["id"]
        if not await self.sessions.close(session_id):
            raise HTTPError(404, "SessionNotFound", f"no session {session_id!r}")
        return Response(status_code=204)

    # ------------------------------------------------------------------ operations

    async def operation(self, request: Request) -> Response:
        """``POST /operations/{name}``: typed JSON in, typed JSON out, 422 with the validation errors."""
        node = await self.node_of()
        name = request.path_params["name"]
        op = self.operations.get(name)
        if op is None:
            known = ", ".join(sorted(self.operations))
            raise HTTPError(404, "OperationNotFound", f"no operation {name!r} (known: {known})")
        body = await self.read_json(request)
        value: Any = body
        if op.input is not None:
            errors = op.input.errors(body)
            if errors:
                raise HTTPError(422, "InvalidInput", "the input does not match the operation's schema", errors=errors)
            value = op.input.convert(body)
        inner = node.inner if isinstance(node, condukt_asyncio.Node) else node
        try:
            result = await self.in_trio(op.bound, value, node=inner, timeout=self.run_timeout)
        except InvalidInput as exc:
            raise HTTPError(422, "InvalidInput", str(exc), errors=exc.errors) from None
        except Exception as exc:
            raise _run_error(exc, None) from None
        return JSONResponse(op.output.dump(result))

    # ------------------------------------------------------------------ service

    async def openapi(self, request: Request) -> Response:
        """``GET /openapi.json``."""
        extra, schemas = observer_operations("/observer") if self.observer else ([], {})
        return JSONResponse(openapi(self.routes, self.operations, token=self.token is not None, version=__version__,
                                    public_document=self.public_openapi, extra=extra, schemas=schemas))

    async def healthz(self, request: Request) -> Response:
        """``GET /healthz``: no auth."""
        return JSONResponse({"status": "ok", "sessions": len(self.sessions)})


def _sse(data: dict[str, Any]) -> bytes:
    return sse(data["type"], data)


def _too_large(limit: int) -> HTTPError:
    # The rest of the body is never read: the connection cannot carry another request.
    return HTTPError(413, "PayloadTooLarge", f"the request body is larger than {limit} bytes",
                     headers={"Connection": "close"})


def _deleted(session_id: str) -> HTTPError:
    return HTTPError(410, "SessionDeleted", f"session {session_id!r} was deleted during the run", session=session_id)


#: A process handle's repr (``<AgentHandle #12 ReviewAgent alive>``): internal, never in an answer.
_HANDLE_REPR = re.compile(r"<\w*Handle #\d+[^>]*>")


def public_message(exc: BaseException, session_id: str | None = None) -> str:
    """``str(exc)`` with the runtime's internal names (process handles) replaced by what a client knows."""
    return _HANDLE_REPR.sub(f"session {session_id!r}" if session_id else "the agent", str(exc))


def _run_error(exc: Exception, session_id: str | None) -> HTTPError:
    """The answer for a run or operation that raised ``exc``."""
    extra: dict[str, Any] = {} if session_id is None else {"session": session_id}
    name = type(exc).__name__
    if isinstance(exc, Aborted):
        return HTTPError(409, name, public_message(exc, session_id) or "the run was aborted", **extra)
    if isinstance(exc, RunTimeout):
        return HTTPError(504, name, public_message(exc, session_id), **extra)
    if isinstance(exc, Busy):
        return HTTPError(429, name, public_message(exc, session_id), headers={"Retry-After": "1"}, **extra)
    if isinstance(exc, (InvalidOutput, NoResultSubmitted, ModelError)):
        return HTTPError(502, name, public_message(exc, session_id), **extra)
    if isinstance(exc, (CallError, NoProc)):
        return HTTPError(500, "AgentCrashed", "the agent crashed during the run; the session restarts", **extra)
    if isinstance(exc, (TypeError, ValueError)):
        return HTTPError(422, name, public_message(exc, session_id), **extra)
    raise exc


_RUN_REQUEST = Schema.of(
    {
        "type": "object",
        "properties": {"prompt": {"type": "string", "minLength": 1}, "session": {"type": ["string", "null"]}},
        "required": ["prompt"],
        "additionalProperties": False,
    }
)
_STEER_REQUEST = Schema.of(
    {
        "type": "object",
        "properties": {"message": {"type": "string", "minLength": 1}},
        "required": ["message"],
        "additionalProperties": False,
    }
)

_DECISION_REQUEST = Schema.of(
    {
        "type": "object",
        "properties": {"approve": {"type": "boolean"}, "reason": {"type": "string"}},
        "required": ["approve"],
        "additionalProperties": False,
    }
)


def create_app(
    node: Node | condukt_asyncio.Node | None = None,
    *,
    agents: Mapping[str, Any] | None = None,
    operations: Iterable[BoundOperation] = (),
    token: str | None = None,
    max_body_size: int = 1 << 20,
    max_sessions: int = 1000,
    session_idle_timeout: float | None = 900.0,
    run_timeout: float | None = 300.0,
    max_restarts: int = 3,
    max_seconds: float = 5.0,
    observer: bool = False,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    public_openapi: bool = False,
) -> Starlette:
    """The HTTP endpoint for ``agents`` and ``operations``: a Starlette ASGI app (routes in ``docs/http.md``).

    ``node``: a :class:`condukt.Node` (the app then runs on trio, e.g.
    hypercorn ``-k trio``), a :class:`condukt.asyncio.Node` (asyncio, e.g.
    uvicorn), or ``None``: the app opens its own node in its lifespan, on
    whichever loop serves it (see :mod:`condukt.lifespan`; it is then the
    loop's default node, for your other handlers too).

    ``agents`` maps route names to an :class:`~condukt.Agent` subclass or a
    :class:`~condukt.ChildSpec` of one (its ``kwargs`` are start options).
    Each session is one agent process under a dynamic supervisor with a
    *per-child* restart intensity (``max_restarts`` in ``max_seconds``): a
    crashed session's agent is restarted under the same session id (its
    history survives only with a ``session_store``), and sessions crashing
    never stop the others. ``operations`` are bound operations
    (``ReviewAgent.review_pr``), each served at ``POST /operations/<name>``.

    ``token``: every route but ``GET /healthz`` needs ``Authorization:
    Bearer <token>`` (compared in constant time; 401 otherwise); printable
    ASCII without spaces, so that every client sends it alike.
    ``max_body_size`` bytes per request body (413 as soon as more arrive).
    ``max_sessions`` live sessions at most (503 with ``Retry-After``
    beyond); a session idle for ``session_idle_timeout`` seconds (``None``:
    never) is stopped. ``run_timeout`` bounds each run and operation.

    ``public_openapi=True`` serves ``GET /openapi.json`` without the token
    (the document describes the routes, it holds no data); by default it
    needs the token like every other route.

    ``observer=True`` serves the live dashboard of the node at
    ``/observer/`` (``docs/observer.md``), its data behind the token. Off
    by default: it shows every session (ids, prompts, events) to whoever
    holds the token, or to everyone when there is none.

    Every request passes :class:`~condukt.web.BrowserGuard`, token or not:
    a ``Host`` that is not this server's (``localhost``, ``127.0.0.1``,
    ``::1``, the address the connection arrived at, or one of
    ``allowed_hosts``) gets 421, an ``Origin`` other than the server's own
    (or one of ``allowed_origins``) 403, a body that is not JSON 415: what a
    hostile page in a browser on the same machine could send. Behind a
    proxy, pass the public name: ``allowed_hosts=["api.example.com"]``.
    Errors, Starlette's own 404 and 405 included, are JSON.

    Raises ``TypeError``/``ValueError`` for bad arguments. Synchronous.
    """
    if node is not None and not isinstance(node, (Node, condukt_asyncio.Node)):
        raise TypeError(f"node must be a condukt Node, a condukt.asyncio Node or None, got {node!r}")
    browser_guard = guard_middleware(allowed_hosts, allowed_origins)
    routes = {name: AgentRoute.of(name, value) for name, value in (agents or {}).items()}
    for name in routes:
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"agent route names must be non-empty strings without '/', got {name!r}")
    ops: dict[str, Operation] = {}
    for bound in operations:
        if not isinstance(bound, BoundOperation):
            raise TypeError(f"operations must be bound operations such as MyAgent.my_operation, got {bound!r}")
        declared = bound.operation
        input_schema = None if declared.input is None else Schema.of(declared.input)
        ops[declared.name] = Operation(declared.name, bound, input_schema, Schema.of(declared.output))
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 1:
        raise ValueError(f"max_body_size must be an int >= 1, got {max_body_size!r}")
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ValueError(f"max_sessions must be an int >= 1, got {max_sessions!r}")
    for label, seconds in (("session_idle_timeout", session_idle_timeout), ("run_timeout", run_timeout)):
        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0
            or math.isinf(seconds)
        ):
            raise ValueError(f"{label} must be None or a finite number > 0, got {seconds!r}")
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(f"max_restarts must be an int >= 0, got {max_restarts!r}")
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float)) or not max_seconds > 0:
        raise ValueError(f"max_seconds must be a number > 0, got {max_seconds!r}")
    secret = check_token(token)
    if not isinstance(observer, bool):
        raise TypeError(f"observer must be a bool, got {observer!r}")
    if not isinstance(public_openapi, bool):
        raise TypeError(f"public_openapi must be a bool, got {public_openapi!r}")
    endpoint = Endpoint(
        routes=routes,
        operations=ops,
        sessions=Sessions(
            routes,
            max_sessions=max_sessions,
            idle_timeout=session_idle_timeout,
            max_restarts=max_restarts,
            max_seconds=max_seconds,
        ),
        token=secret,
        max_body_size=max_body_size,
        run_timeout=run_timeout,
        public_openapi=public_openapi,
        observer=observer,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with contextlib.AsyncExitStack() as stack:
            current = node if node is not None else await stack.enter_async_context(open_app_node())
            endpoint.node = current
            endpoint.sessions.attach(current)
            await endpoint.sessions.supervisor()
            async with anyio.create_task_group() as tasks:
                if session_idle_timeout is not None:
                    tasks.start_soon(_expire, endpoint.sessions, session_idle_timeout)
                try:
                    yield {"node": current}
                finally:
                    tasks.cancel_scope.cancel()
                    with anyio.CancelScope(shield=True):
                        await endpoint.sessions.aclose()
                    endpoint.node = None

    if node is not None:  # usable even where no lifespan runs (a mounted sub-app)
        endpoint.node = node
        endpoint.sessions.attach(node)

    g = endpoint.guard
    app = Starlette(
        routes=[
            Route("/agents/{name}/runs", g(endpoint.run), methods=["POST"]),
            *session_routes(endpoint),
            Route("/operations/{name}", g(endpoint.operation), methods=["POST"]),
            Route("/openapi.json", g(endpoint.openapi, public=public_openapi), methods=["GET"]),
            Route("/healthz", g(endpoint.healthz, public=True), methods=["GET"]),
            *([Mount("/observer", routes=observer_routes(endpoint.node_of, g))] if observer else []),
        ],
        lifespan=lifespan,
        middleware=[browser_guard],
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.condukt_endpoint = endpoint
    return app


def session_routes(endpoint: Endpoint) -> list[Route]:
    """The ``/sessions/{id}/...`` routes: a feature adds its own here (and to ``_openapi.SESSION_PATHS``)."""
    g = endpoint.guard
    return [
        Route("/sessions/{id}/abort", g(endpoint.abort), methods=["POST"]),
        Route("/sessions/{id}/steer", g(endpoint.steer), methods=["POST"]),
        Route("/sessions/{id}/history", g(endpoint.history), methods=["GET"]),
        Route("/sessions/{id}/approvals", g(endpoint.approvals), methods=["GET"]),
        Route("/sessions/{id}/approvals/{call_id}", g(endpoint.decide), methods=["POST"]),
        Route("/sessions/{id}", g(endpoint.delete), methods=["DELETE"]),
    ]


async def _expire(sessions: Sessions, idle_timeout: float) -> None:
    """Stop idle sessions, checking every quarter of the timeout (at most every 30 s)."""
    period = min(idle_timeout / 4, 30.0)
    while True:
        await anyio.sleep(period)
        await sessions.sweep()
