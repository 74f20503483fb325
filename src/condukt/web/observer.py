"""The observer: a live dashboard of a node's supervision tree, in the browser (``docs/observer.md``).

Like Erlang's ``observer`` and Phoenix LiveDashboard: every process of the
node with its kind, status, mailbox depth and restarts, and for agents the
run in progress, its turn, tokens and tool calls in flight; crash reports
(exit reason, traceback, and the crashed incarnation's event log ending in
its error) for each child's last incarnations; each supervisor's strategy,
intensity and restart timeline; node charts over time (runs/s, tokens/s,
cost, run latency p50/p99, mailbox depth, memory, restarts); a process
panel with its links, monitors, mailbox and memory; sort, filter and
search; abort, kill and restart buttons. One page (no CDN, no build step:
the chart library, uPlot, ships in the package) fed by Server-Sent Events.

Three ways to serve it:

* a route of the HTTP endpoint: ``condukt.web.create_app(..., observer=True)``
  serves it at ``/observer/``, behind the app's token;
* on its own, as an ASGI app to mount or serve: :func:`create_app`;
* from trio code, in one line: ``await condukt.web.observer.serve(node, port=8001)``.

The page itself is public (it holds no data); everything it shows comes
from ``api/...`` routes that need ``Authorization: Bearer <token>`` when a
token is set. The page reads the token from the URL fragment
(``/observer/#token=...``, never sent to the server, so never in an access
log) or asks for it, keeps it in the tab's ``sessionStorage`` and removes
it from the address bar.

Every way of serving it passes :class:`~condukt.web.BrowserGuard`: pages
of other sites cannot send it requests, nor read it by rebinding their
name to this address. :func:`serve` (and ``condukt observe``) also makes
a token of its own unless given one, since whoever can connect to the
port can otherwise read every prompt and event of the node (another user
of the same machine, for one); :func:`create_app`, which is mounted or
served by your own code, takes the token you give it.
"""

from __future__ import annotations

import contextlib
import enum
import math
import secrets
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from importlib import resources
from typing import Any
from urllib.parse import quote

import anyio
import attrs
import sniffio
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from .. import asyncio as condukt_asyncio
from .. import serialization
from ..agent import AgentHandle, InputAlreadyAnswered, UnknownInputRequest
from ..lifespan import open_app_node
from ..otp import ConduktError, DynamicSupervisorHandle, Node, SupervisorHandle, current_node
from ..otp.lowlevel import process_of, server_of
from ._event_log import RunStats, event_log
from ._guard import guard_middleware
from ._http import EXCEPTION_HANDLERS, Handler, HTTPError, check_token, guard
from ._json import JSONResponse, dumps
from ._memory import deep_size, resident_memory
from ._openapi import Operation, attrs_schema
from ._snapshot import (
    AgentView,
    ExitView,
    ProcessView,
    RunView,
    Snapshot,
    SupervisorView,
    exit_view,
    take_snapshot,
)

__all__ = [
    "NEW_TOKEN",
    "AgentView",
    "ExitView",
    "ProcessView",
    "RunView",
    "Snapshot",
    "SupervisorView",
    "create_app",
    "page_url",
    "serve",
    "snapshot",
]

#: Seconds between two updates of a live page (the default of ``interval``).
DEFAULT_INTERVAL = 1.0
#: A comment line is sent when nothing changed for this long (keeps proxies from closing the stream).
KEEPALIVE = 15.0

Guard = Callable[..., Handler]


class _NewToken(enum.Enum):
    NEW_TOKEN = "a new random token"


#: ``serve(token=NEW_TOKEN)`` (the default): a random token made for that server, given in its address.
NEW_TOKEN = _NewToken.NEW_TOKEN

#: A numeric parameter (``after``, a pid) has at most this many digits.
_MAX_DIGITS = 18
#: Samples of the node's charts kept (one per snapshot: ten minutes at the default interval).
METRICS_KEPT = 600
#: Messages of a mailbox the process panel lists.
MAILBOX_SHOWN = 20
#: The static files the page loads (the chart library and its licence), by name.
_STATIC = {
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
    "uPlot.LICENSE.txt": "text/plain; charset=utf-8",
}


def snapshot(node: Node) -> Snapshot:
    """The supervision tree of ``node`` now (what the page shows), as attrs data.

    Synchronous; call it from the node's trio run.
    ``condukt.serialization.unstructure(view)`` turns a
    :class:`ProcessView` into the JSON the page receives. Raises
    :class:`~condukt.ConduktError` if the node is not running.
    """
    return take_snapshot(node)


@attrs.frozen
class _Encoded:
    """A snapshot as the stream sends it: each process's JSON, by key."""

    time: float
    root: str
    entries: dict[str, bytes]
    handles: dict[int, Any]
    taken_at: float
    #: The processes' views (restart finds a process's supervisor here).
    views: tuple[ProcessView, ...]


async def _take(node: Node, sessions: dict[int, str], reported: dict[int, None]) -> tuple[Snapshot, RunStats]:
    log = await event_log(node)  # the log starts with the first look at the node
    snap = take_snapshot(node, sessions)
    for view in snap.processes:
        for crash in view.exits:
            if crash.error_type is not None and crash.session is not None and crash.pid not in reported:
                reported[crash.pid] = None
                message = crash.reason.removeprefix(f"{crash.error_type}: ")
                await log.call(("crashed", crash.session, crash.error_type, message))
    if len(reported) > 2 * METRICS_KEPT * 100:
        for pid in list(reported)[: len(reported) // 2]:
            del reported[pid]
    stats: RunStats = await log.call(("stats",))
    return snap, stats


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def _details(node: Node, handle: Any, sessions: dict[int, str]) -> dict[str, Any]:
    """The process panel's data for a live ``handle`` (links, monitors, mailbox, memory, supervisor timeline)."""
    proc = process_of(handle)
    if proc is None:
        raise HTTPError(404, "ProcessNotFound", f"no live process with pid {handle.id}")
    server = server_of(handle)
    size, complete = deep_size(server) if server is not None else (0, True)
    details: dict[str, Any] = {
        "pid": handle.id,
        "links": sorted(h.id for h in proc.links()),
        "monitored_by": [None if h is None else h.id for h in proc.monitored_by()],
        # Message types only: a message may carry what the event log scrubs (a prompt with a secret).
        "mailbox": {"length": proc.mailbox_length,
                    "messages": [{"kind": kind, "type": type(message).__name__}
                                 for kind, message in proc.mailbox_peek(MAILBOX_SHOWN)]},
        "memory": {"bytes": size, "complete": complete},
        "supervisor": None,
    }
    if isinstance(handle, (SupervisorHandle, DynamicSupervisorHandle)):
        info = handle.info()
        details["supervisor"] = {
            "strategy": info.strategy, "max_restarts": info.max_restarts, "max_seconds": info.max_seconds,
            "intensity": info.intensity,
            "timeline": [serialization.unstructure(exit_view(e, sessions.get(e.pid))) for e in info.exits],
        }
    return details


async def _kill(node: Node, handle: Any) -> bool:
    alive = bool(handle.alive)
    handle.kill()
    return alive


async def _restart(node: Node, supervisor: SupervisorHandle, handle: Any) -> int:
    for child_id, child in supervisor.which_children():
        if child is handle:
            await supervisor.terminate_child(child_id)
            new = await supervisor.restart_child(child_id)
            return new.id
    raise HTTPError(409, "NotRestartable", f"process {handle.id} is no longer a child of its supervisor")


async def _events(node: Node, session_id: str, after: int) -> Any:
    log = await event_log(node)
    return await log.call(("events", session_id, after))


async def _abort(node: Node, handle: AgentHandle) -> bool:
    return await handle.abort()


async def _respond(node: Node, handle: AgentHandle, call_id: str, value: Any) -> None:
    await handle.respond(call_id, value)


async def _in_trio_details(node: Node, handle: Any, sessions: dict[int, str]) -> dict[str, Any]:
    return _details(node, handle, sessions)


class _Observer:
    """What the routes share: where the node is, and the latest snapshot (one per interval for all pages)."""

    def __init__(self, node_of: Callable[[], Awaitable[Any]], interval: float) -> None:
        self.node_of = node_of
        self.interval = interval
        self._latest: _Encoded | None = None
        self._encoded: dict[str, tuple[ProcessView, bytes]] = {}
        self._lock: anyio.Lock | None = None
        #: Session ids of the agents seen, by pid (a crash report names the crashed incarnation's log).
        self._sessions: dict[int, str] = {}
        #: Crashes the event log was told of, by pid.
        self._reported: dict[int, None] = {}
        #: The node's charts: one sample per snapshot.
        self.metrics: deque[dict[str, Any]] = deque(maxlen=METRICS_KEPT)
        self._last_stats: tuple[float, RunStats, int] | None = None

    async def in_trio(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await fn(trio_node, *args)`` in the node's trio run, whichever loop serves the request."""
        node = await self.node_of()
        if isinstance(node, condukt_asyncio.Node):
            return await condukt_asyncio.call(fn, node.inner, *args)
        return await fn(node, *args)

    async def latest(self) -> _Encoded:
        """A snapshot at most half an interval old (taken now if the last one is older)."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            latest = self._latest
            now = anyio.current_time()
            if latest is None or now - latest.taken_at >= self.interval / 2:
                try:
                    snap, stats = await self.in_trio(_take, self._sessions, self._reported)
                except ConduktError as exc:
                    raise HTTPError(503, "NotReady", f"the node is not running: {exc}") from None
                self._sample(snap, stats)
                # A process whose view did not change keeps its JSON: comparing views costs
                # far less than encoding one (benchmarks/observer.py).
                previous = self._encoded
                encode, unstructure = dumps, serialization.unstructure
                encoded: dict[str, tuple[ProcessView, bytes]] = {}
                for view in snap.processes:
                    before = previous.get(view.key)
                    encoded[view.key] = before if before is not None and before[0] == view else (
                        view, encode(unstructure(view)))
                self._encoded = encoded
                entries = {key: text for key, (_, text) in encoded.items()}
                latest = self._latest = _Encoded(snap.time, snap.root, entries, snap.handles, now, snap.processes)
            return latest

    def _sample(self, snap: Snapshot, stats: RunStats) -> None:
        """One point of each chart, from a new snapshot and the event log's run statistics."""
        mailbox = restarts = 0
        for view in snap.processes:
            mailbox += view.mailbox
            restarts += view.restarts
        last = self._last_stats
        self._last_stats = (snap.time, stats, restarts)
        elapsed = snap.time - last[0] if last is not None else 0.0
        latencies = stats.latencies
        self.metrics.append({
            "time": round(snap.time, 3),
            "processes": len(snap.handles),
            "runs_per_s": round((stats.runs - last[1].runs) / elapsed, 3) if last and elapsed > 0 else 0.0,
            "tokens_per_s": round((stats.tokens - last[1].tokens) / elapsed, 1) if last and elapsed > 0 else 0.0,
            "cost": round(stats.cost, 6),
            "latency_p50": round(_percentile(latencies, 0.5), 4) if latencies else None,
            "latency_p99": round(_percentile(latencies, 0.99), 4) if latencies else None,
            "mailbox": mailbox,
            "memory": resident_memory(),
            "restarts": max(0, restarts - last[2]) if last is not None else 0,
        })

    # ------------------------------------------------------------------ routes

    async def static(self, request: Request) -> Response:
        """``GET /static/{name}``: the chart library the page loads, and its licence (public, cacheable)."""
        name = request.path_params["name"]
        media_type = _STATIC.get(name)
        if media_type is None:
            raise HTTPError(404, "NotFound", "no such static file")
        body = resources.files(__package__).joinpath("static", name).read_bytes()
        return Response(body, media_type=media_type,
                        headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"})

    async def metrics_route(self, request: Request) -> Response:
        """``GET /api/metrics``: the node's chart samples, oldest first."""
        await self.latest()
        return JSONResponse({"samples": list(self.metrics)}, headers={"Cache-Control": "no-store"})

    async def _live(self, pid: int) -> Any:
        latest = await self.latest()
        handle = latest.handles.get(pid)
        if handle is None or not handle.alive:
            self._latest = None  # it may be newer than the snapshot
            latest = await self.latest()
            handle = latest.handles.get(pid)
        if handle is None or not handle.alive:
            raise HTTPError(404, "ProcessNotFound", f"no live process with pid {pid}")
        return handle

    async def process(self, request: Request) -> Response:
        """``GET /api/processes/{pid}``: links, monitors, mailbox, memory, and a supervisor's restart timeline."""
        handle = await self._live(_int(request.path_params["pid"], "pid"))
        found = await self.in_trio(_in_trio_details, handle, self._sessions)
        return JSONResponse(found, headers={"Cache-Control": "no-store"})

    async def kill(self, request: Request) -> Response:
        """``POST /api/processes/{pid}/kill``: kill it, as ``handle.kill()`` (its supervisor decides the rest)."""
        pid = _int(request.path_params["pid"], "pid")
        handle = await self._live(pid)
        latest = await self.latest()
        if str(pid) == latest.root:
            raise HTTPError(409, "RootProcess", "the node's root supervisor is not killed from the observer")
        killed = await self.in_trio(_kill, handle)
        self._latest = None
        return JSONResponse({"pid": pid, "killed": killed})

    async def restart(self, request: Request) -> Response:
        """``POST /api/processes/{pid}/restart``: a static supervisor's child, stopped and started again."""
        pid = _int(request.path_params["pid"], "pid")
        handle = await self._live(pid)
        latest = await self.latest()
        parent = next((view.parent for view in latest.views if view.pid == pid), None)
        supervisor = latest.handles.get(int(parent)) if parent is not None else None
        if not isinstance(supervisor, SupervisorHandle) or not supervisor.alive:
            raise HTTPError(409, "NotRestartable", f"process {pid} is not a child of a static supervisor: "
                            "kill it to have its supervisor restart it as its restart type says")
        new_pid = await self.in_trio(_restart, supervisor, handle)
        self._latest = None
        return JSONResponse({"pid": pid, "restarted": new_pid})

    async def page(self, request: Request) -> Response:
        """``GET /``: the page (public: it holds no data)."""
        return Response(_page(), media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)

    async def snapshot(self, request: Request) -> Response:
        """``GET /api/snapshot``: the tree as JSON."""
        latest = await self.latest()
        return Response(_full(latest), media_type="application/json", headers={"Cache-Control": "no-store"})

    async def events(self, request: Request) -> Response:
        """``GET /api/agents/{session}/events?after=N``: an agent's recent events (numbered above ``N``)."""
        after = _int(request.query_params.get("after", "0"), "after")
        seq, found = await self.in_trio(_events, request.path_params["session"], after)
        return JSONResponse({"seq": seq, "events": found}, headers={"Cache-Control": "no-store"})

    async def abort(self, request: Request) -> Response:
        """``POST /api/processes/{pid}/abort``: abort the run of that agent (``{"pid", "aborted"}``)."""
        pid = _int(request.path_params["pid"], "pid")
        try:
            handle = await self._live(pid)
        except HTTPError:
            handle = None
        if not isinstance(handle, AgentHandle):
            raise HTTPError(404, "AgentNotFound", f"no live agent with pid {pid}")
        aborted = await self.in_trio(_abort, handle)
        return JSONResponse({"pid": pid, "aborted": aborted})

    async def respond(self, request: Request) -> Response:
        """``POST /api/processes/{pid}/inputs/{call_id}`` ``{"value": ...}``: answer that agent's waiting question.

        404 ``AgentNotFound`` / ``UnknownInputRequest``, 409 ``InputAlreadyAnswered``, 422 for a body without ``value``.
        """
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "value" not in body:
            raise HTTPError(422, "InvalidRequest", 'the body must be a JSON object with a "value"')
        pid = _int(request.path_params["pid"], "pid")
        try:
            handle = await self._live(pid)
        except HTTPError:
            handle = None
        if not isinstance(handle, AgentHandle):
            raise HTTPError(404, "AgentNotFound", f"no live agent with pid {pid}")
        call_id = request.path_params["call_id"]
        try:
            await self.in_trio(_respond, handle, call_id, body["value"])
        except InputAlreadyAnswered as exc:
            raise HTTPError(409, "InputAlreadyAnswered", str(exc)) from None
        except UnknownInputRequest as exc:
            raise HTTPError(404, "UnknownInputRequest", str(exc)) from None
        return JSONResponse({"pid": pid, "call_id": call_id, "answered": True})

    async def stream(self, request: Request) -> Response:
        """``GET /api/stream?agent=<session id>``: SSE of the tree, and of that agent's events if given."""
        await self.latest()  # fail now (503), not inside the stream
        agent = request.query_params.get("agent") or None
        return StreamingResponse(
            self._stream(agent),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, agent: str | None) -> AsyncIterator[bytes]:
        """``snapshot`` first, then a ``diff`` per interval when something changed; ``log`` events for ``agent``."""
        latest = await self.latest()
        sent = latest.entries
        yield _sse("snapshot", _full(latest))
        after = 0
        if agent is not None:
            after, found = await self.in_trio(_events, agent, 0)
            yield _sse("log", dumps({"agent": agent, "reset": True, "events": found}))
        samples = list(self.metrics)
        last_sample = samples[-1]["time"] if samples else 0.0
        yield _sse("metrics", dumps({"samples": samples}))
        quiet_since = anyio.current_time()
        while True:
            await anyio.sleep(self.interval)
            latest = await self.latest()
            entries = latest.entries
            if entries is not sent:
                changed = [text for key, text in entries.items() if sent.get(key) != text]
                removed = [key for key in sent if key not in entries]
                sent = entries
                if changed or removed:
                    quiet_since = anyio.current_time()
                    yield _sse("diff", _diff(latest, changed, removed))
            fresh = [sample for sample in self.metrics if sample["time"] > last_sample]
            if fresh:
                last_sample = fresh[-1]["time"]
                quiet_since = anyio.current_time()
                yield _sse("metrics", dumps({"samples": fresh}))
            if agent is not None:
                last, found = await self.in_trio(_events, agent, after)
                after = last
                if found:
                    quiet_since = anyio.current_time()
                    yield _sse("log", dumps({"agent": agent, "reset": False, "events": found}))
            if anyio.current_time() - quiet_since >= KEEPALIVE:
                quiet_since = anyio.current_time()
                yield b": keep-alive\n\n"

    def routes(self, guard: Guard) -> list[BaseRoute]:
        """The observer's routes, relative to where it is mounted; ``guard`` adds the token check."""
        return [
            Route("/", guard(self.page, public=True), methods=["GET"]),
            Route("/api/snapshot", guard(self.snapshot), methods=["GET"]),
            Route("/api/stream", guard(self.stream), methods=["GET"]),
            Route("/api/agents/{session}/events", guard(self.events), methods=["GET"]),
            Route("/api/processes/{pid}/abort", guard(self.abort), methods=["POST"]),
            Route("/api/processes/{pid}/inputs/{call_id}", guard(self.respond), methods=["POST"]),
            Route("/api/processes/{pid}/kill", guard(self.kill), methods=["POST"]),
            Route("/api/processes/{pid}/restart", guard(self.restart), methods=["POST"]),
            Route("/api/processes/{pid}", guard(self.process), methods=["GET"]),
            Route("/api/metrics", guard(self.metrics_route), methods=["GET"]),
            Route("/static/{name}", guard(self.static, public=True), methods=["GET"]),
        ]


def _int(text: str, label: str) -> int:
    # str.isdigit() also accepts "²" and other digits int() refuses, and int() refuses over 4,300 digits.
    if not (text.isascii() and text.isdigit()) or len(text) > _MAX_DIGITS:
        shown = text if len(text) <= 40 else text[:39] + "…"
        raise HTTPError(422, "InvalidRequest", f"{label} must be a non-negative integer of at most "
                        f"{_MAX_DIGITS} digits, got {shown!r}")
    return int(text)


def _full(latest: _Encoded) -> bytes:
    return b'{"time":%s,"root":%s,"processes":[%s]}' % (
        dumps(latest.time), dumps(latest.root), b",".join(latest.entries.values()))


def _diff(latest: _Encoded, changed: list[bytes], removed: list[str]) -> bytes:
    return b'{"time":%s,"root":%s,"changed":[%s],"removed":%s}' % (
        dumps(latest.time), dumps(latest.root), b",".join(changed), dumps(removed))


def _sse(event: str, data: bytes) -> bytes:
    return b"event: " + event.encode("ascii") + b"\ndata: " + data + b"\n\n"


_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # Inline, or from the observer itself (the chart library under static/); nothing from elsewhere.
    "Content-Security-Policy": "default-src 'none'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
}

_PAGE: bytes | None = None


def _page() -> bytes:
    global _PAGE
    if _PAGE is None:
        _PAGE = resources.files(__package__).joinpath("observer.html").read_bytes()
    return _PAGE


def _check(interval: float) -> None:
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0 or math.isinf(interval):
        raise ValueError(f"interval must be a finite number of seconds > 0, got {interval!r}")


def openapi_operations(prefix: str = "") -> tuple[list[Operation], dict[str, Any]]:
    """The observer's ``api/`` routes for an OpenAPI document, mounted at ``prefix``, and the schemas they use."""
    components: dict[str, Any] = {}
    process = attrs_schema(ProcessView, components)
    exit_schema = attrs_schema(ExitView, components)
    number = {"type": ["number", "null"]}
    components["ObserverSnapshot"] = {
        "type": "object", "properties": {"time": {"type": "number"}, "root": {"type": "string"},
                                         "processes": {"type": "array", "items": process}},
        "required": ["time", "root", "processes"], "additionalProperties": False}
    components["ObserverSample"] = {
        "type": "object", "additionalProperties": False,
        "properties": {"time": {"type": "number"}, "processes": {"type": "integer"}, "runs_per_s": {"type": "number"},
                       "tokens_per_s": {"type": "number"}, "cost": {"type": "number"}, "latency_p50": number,
                       "latency_p99": number, "mailbox": {"type": "integer"}, "memory": {"type": "integer"},
                       "restarts": {"type": "integer"}},
        "required": ["time", "processes", "runs_per_s", "tokens_per_s", "cost", "latency_p50", "latency_p99",
                     "mailbox", "memory", "restarts"]}
    closed = {"additionalProperties": False}
    components["ObserverProcess"] = {
        "type": "object", **closed,
        "properties": {
            "pid": {"type": "integer"}, "links": {"type": "array", "items": {"type": "integer"}},
            "monitored_by": {"type": "array", "items": {"type": ["integer", "null"]}},
            "mailbox": {"type": "object", **closed, "required": ["length", "messages"], "properties": {
                "length": {"type": "integer"},
                "messages": {"type": "array", "items": {"type": "object", **closed, "required": ["kind", "type"],
                                                        "properties": {"kind": {"type": "string"},
                                                                       "type": {"type": "string"}}}}}},
            "memory": {"type": "object", **closed, "required": ["bytes", "complete"],
                       "properties": {"bytes": {"type": "integer"}, "complete": {"type": "boolean"}}},
            "supervisor": {"anyOf": [{"type": "null"}, {
                "type": "object", **closed,
                "required": ["strategy", "max_restarts", "max_seconds", "intensity", "timeline"],
                "properties": {"strategy": {"type": "string"}, "max_restarts": {"type": "integer"},
                               "max_seconds": {"type": "number"}, "intensity": {"type": "string"},
                               "timeline": {"type": "array", "items": exit_schema}}}]},
        },
        "required": ["pid", "links", "monitored_by", "mailbox", "memory", "supervisor"]}
    components["ObserverEvents"] = {
        "type": "object", **closed, "required": ["seq", "events"],
        "properties": {"seq": {"type": "integer"},
                       "events": {"type": "array", "items": {
                           "type": "object", "required": ["type", "seq"], "additionalProperties": True,
                           "description": "An event as condukt.events.to_json gives it, plus 'seq'",
                           "properties": {"type": {"type": "string"}, "seq": {"type": "integer"}}}}}}
    pid = ({"name": "pid", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}},)
    bad_pid = {404: "No live process with that pid", 422: "The pid is not a non-negative integer"}

    def ref(name: str) -> dict[str, Any]:
        return {"$ref": f"#/components/schemas/{name}"}

    def closed_object(**properties: Any) -> dict[str, Any]:
        return {"type": "object", "properties": properties, "required": list(properties), **closed}

    ops = [
        Operation(f"{prefix}/api/stream", "get", "observer_stream",
                  "Server-Sent Events: 'snapshot', then 'diff', 'metrics' and the selected agent's 'log'", None,
                  errors={503: None}, stream="the tree's snapshots and diffs, the charts' samples and an agent's log",
                  parameters=({"name": "agent", "in": "query", "required": False, "schema": {"type": "string"}},)),
        Operation(f"{prefix}/api/snapshot", "get", "observer_snapshot", "The node's supervision tree",
                  ref("ObserverSnapshot"), errors={503: None}),
        Operation(f"{prefix}/api/metrics", "get", "observer_metrics", "The node's chart samples, oldest first",
                  closed_object(samples={"type": "array", "items": ref("ObserverSample")}), errors={503: None}),
        Operation(f"{prefix}/api/agents/{{session}}/events", "get", "observer_agent_events",
                  "An agent's recent events", ref("ObserverEvents"),
                  errors={422: "'after' is not a non-negative integer", 503: None},
                  parameters=({"name": "after", "in": "query", "required": False,
                               "schema": {"type": "integer", "minimum": 0}},)),
        Operation(f"{prefix}/api/processes/{{pid}}", "get", "observer_process",
                  "A process's links, monitors, mailbox, memory and restart timeline", ref("ObserverProcess"),
                  errors=bad_pid, parameters=pid),
        Operation(f"{prefix}/api/processes/{{pid}}/abort", "post", "observer_abort", "Abort an agent's run",
                  closed_object(pid={"type": "integer"}, aborted={"type": "boolean"}),
                  errors={404: "No live agent with that pid", 422: bad_pid[422]}, parameters=pid),
        Operation(f"{prefix}/api/processes/{{pid}}/inputs/{{call_id}}", "post", "observer_respond",
                  "Answer an agent's waiting deferred tool call (ask_user...)",
                  closed_object(pid={"type": "integer"}, call_id={"type": "string"}, answered={"type": "boolean"}),
                  request=closed_object(value={}),
                  errors={404: "No live agent with that pid, or no call waiting with that id",
                          409: "The call was answered already", 422: "'pid' is not an integer, or no 'value'"},
                  parameters=(*pid, {"name": "call_id", "in": "path", "required": True, "schema": {"type": "string"}})),
        Operation(f"{prefix}/api/processes/{{pid}}/kill", "post", "observer_kill", "Kill a process",
                  closed_object(pid={"type": "integer"}, killed={"type": "boolean"}),
                  errors={**bad_pid, 409: "The node's root supervisor is not killed"}, parameters=pid),
        Operation(f"{prefix}/api/processes/{{pid}}/restart", "post", "observer_restart",
                  "Stop a static supervisor's child and start it again",
                  closed_object(pid={"type": "integer"}, restarted={"type": "integer"}),
                  errors={**bad_pid, 409: "Not a child of a static supervisor"}, parameters=pid),
    ]
    return ops, components


def routes(node_of: Callable[[], Awaitable[Any]], guard: Guard, interval: float = DEFAULT_INTERVAL) -> list[BaseRoute]:
    """The observer's routes for the node ``await node_of()`` returns (how ``condukt.web.create_app`` mounts it)."""
    return _Observer(node_of, interval).routes(guard)


def create_app(
    node: Node | condukt_asyncio.Node | None = None,
    *,
    token: str | None = None,
    interval: float = DEFAULT_INTERVAL,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> Starlette:
    """The observer of ``node`` as a Starlette ASGI app: the page at ``/``, its data under ``/api/``.

    Mount it anywhere (``Mount("/observer", app=...)``) or serve it on its
    own. ``node``: a :class:`condukt.Node` (serve on trio, e.g. hypercorn
    ``-k trio``), a :class:`condukt.asyncio.Node` (asyncio, e.g. uvicorn),
    or ``None``: the node its lifespan opens, or else the loop's default
    node (:mod:`condukt.lifespan`). ``token``: the ``api/`` routes need
    ``Authorization: Bearer <token>`` (401 otherwise; the page passes it
    along, see the module docstring). ``interval``: seconds between two
    updates of a live page (snapshots are shared by every page within
    half of it). ``allowed_hosts``, ``allowed_origins``: as for
    :class:`~condukt.web.BrowserGuard`, which every request passes.
    Raises ``TypeError``/``ValueError`` for bad arguments. Synchronous.
    """
    if node is not None and not isinstance(node, (Node, condukt_asyncio.Node)):
        raise TypeError(f"node must be a condukt Node, a condukt.asyncio Node or None, got {node!r}")
    _check(interval)
    secret = check_token(token)
    browser_guard = guard_middleware(allowed_hosts, allowed_origins)
    current: list[Any] = [node]

    async def node_of() -> Any:
        if current[0] is None:
            on_trio = sniffio.current_async_library() == "trio"
            found = current_node() if on_trio else await condukt_asyncio.current_node()
            if found is None:
                raise HTTPError(503, "NotReady", "no condukt node: pass create_app(node) or let its lifespan run")
            current[0] = found
        return current[0]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with contextlib.AsyncExitStack() as stack:
            if node is None:
                current[0] = await stack.enter_async_context(open_app_node())
            try:
                yield {"node": current[0]}
            finally:
                current[0] = node

    return Starlette(
        routes=routes(node_of, lambda handler, public=False: guard(handler, secret, public=public), interval),
        lifespan=lifespan,
        middleware=[browser_guard],
        exception_handlers=EXCEPTION_HANDLERS,
    )


def page_url(base_url: str, token: str | None = None, *, path: str = "/observer/") -> str:
    """The address of the observer page of the app at ``base_url``, the token in its fragment.

    ``page_url("http://127.0.0.1:8000", "s3cret")`` is
    ``"http://127.0.0.1:8000/observer/#token=s3cret"``: open it in a
    browser (the fragment never reaches the server). ``path`` is where the
    observer is mounted (``"/"`` for :func:`create_app` served on its own).
    """
    url = base_url.rstrip("/") + "/" + path.strip("/")
    url = url.rstrip("/") + "/"
    return url if token is None else f"{url}#token={quote(token, safe='')}"


async def serve(
    node: Node,
    *,
    host: str = "127.0.0.1",
    port: int = 8001,
    token: str | None | _NewToken = NEW_TOKEN,
    interval: float = DEFAULT_INTERVAL,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the observer of ``node`` (trio) with hypercorn at ``http://host:port/`` until cancelled.

    For a command line (``condukt observe``) or a script: run it in a
    nursery next to the node's work, or as the last line of an
    ``open_node`` block. ``nursery.start(serve, node, ...)`` returns the
    page's address once it listens (``port=0``: a free port), with the
    token in its fragment (``http://127.0.0.1:8001/#token=...``, see
    :func:`page_url`): open that address in a browser.

    ``token``: by default (:data:`NEW_TOKEN`) a random one made for this
    server, so that nobody else who can reach the port (another user of
    the machine) reads the node's prompts and events; a str to choose it;
    ``None`` for none. ``allowed_hosts``, ``allowed_origins``: as for
    :class:`~condukt.web.BrowserGuard` (serving on another address than
    loopback, add the name browsers will use).

    Cancellation stops the server (open pages see their stream end).
    Raises ``ImportError`` without hypercorn (extra ``[observer]``),
    ``OSError`` when the port is taken, and ``TypeError``/``ValueError``
    for bad arguments.
    """
    if not isinstance(node, Node):
        raise TypeError(f"node must be a condukt Node (trio), got {node!r}")
    try:
        import hypercorn.config
        import hypercorn.trio
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("condukt.web.observer.serve needs hypercorn: `pip install 'condukt[observer]'`") from exc
    chosen = secrets.token_urlsafe(24) if token is NEW_TOKEN else token
    assert not isinstance(chosen, _NewToken)
    app = create_app(
        node, token=chosen, interval=interval, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
    )
    config = hypercorn.config.Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = None

    async def serving(task_status: trio.TaskStatus[list[str]]) -> None:
        await hypercorn.trio.serve(app, config, task_status=task_status)  # type: ignore[arg-type]

    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(serving)
        task_status.started(page_url(binds[0], chosen, path="/"))
