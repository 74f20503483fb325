"""The server itself: :class:`ProtocolServer`, and the :func:`tool_then_answer` responder."""

from __future__ import annotations

import functools
import json
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import httptools
import trio

from . import _http as http
from ._prompt_cache import PromptCache
from ._protocol import PROTOCOLS, RecordedRequest, protocol_for
from ._steps import Disconnect, Fault, Malformed, Raw, Reply, Slow, Status, Step, tool_use

__all__ = ["ProtocolServer", "tool_then_answer"]


def tool_then_answer(request: RecordedRequest) -> Step:
    """Call the ``noop`` tool first when the client offers one, then answer ``"done"``.

    Two model turns and one tool call per run for a client with a ``noop``
    tool (the benchmarks'); one turn for any other, so an agent without it
    never sees a call of a tool it does not have.
    """
    wire = request.wire
    if "noop" not in request.tool_names or (wire is not None and wire.last_is_tool_result(request)):
        return Reply("done", usage=(20, 3))
    return Reply(tool_calls=(tool_use("noop", {}),), usage=(10, 2))


class ProtocolServer:
    """The server; start it with ``await nursery.start(server.run)``."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        responder: Callable[[RecordedRequest], Step] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        protocols: Iterable[str] | None = None,
    ) -> None:
        #: Seconds added to every request before its first byte.
        self.latency = latency
        #: The address it listens on (``port`` 0: a free port, the one chosen once it runs).
        self.host = host
        self.port = port
        #: The protocols it answers (by :attr:`WireProtocol.name`; ``None``: all); others get a 404.
        self.protocols = None if protocols is None else frozenset(protocols)
        if self.protocols is not None and not self.protocols <= PROTOCOLS.keys():
            unknown = ", ".join(sorted(self.protocols - PROTOCOLS.keys()))
            raise ValueError(f"unknown protocol(s) {unknown}; the server speaks {', '.join(PROTOCOLS)}")
        self.script: deque[Step] = deque()
        #: Answers requests once the script is empty (default: ``Reply("ok")``).
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        #: Connections accepted so far, and those still open.
        self.connections = 0
        self.open_connections = 0
        #: Set when a hanging response sees its client close the connection.
        self.client_closed = trio.Event()
        #: Releases ``Fault(kind="gate")`` responses.
        self.gate = trio.Event()
        self.record = True
        #: Whether Gemini function calls carry an ``id`` (older Gemini models send none).
        self.gemini_call_ids = True
        #: When set, Anthropic requests' usage reports what this simulated prompt cache read and wrote.
        self.prompt_cache: PromptCache | None = None
        self._timer = http.Timer()

    def add(self, *steps: Step) -> None:
        """Queue responses, in order."""
        self.script.extend(steps)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (the host it listens on, in brackets for IPv6)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on ``host``:``port`` until cancelled (``OSError`` if it cannot, e.g. the port is taken)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._timer.run)
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, self._connection, self.port, host=self.host)
            )
            self.port = listeners[0].socket.getsockname()[1]
            task_status.started(self)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        self.open_connections += 1
        requests = http.Requests()
        try:
            while True:
                while not requests.complete:
                    data = await http.receive(stream)
                    if not data:
                        return
                    requests.parser.feed_data(data)
                method, target, headers, raw, keep_alive = requests.complete.popleft()
                request = self._record(method, target, headers, raw)
                if not await self._respond(stream, request, keep_alive):
                    return
                if not keep_alive:
                    return
        except (
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            httptools.HttpParserError,
            httptools.HttpParserUpgrade,
        ):
            pass
        finally:
            self.open_connections -= 1
            await trio.aclose_forcefully(stream)

    def _record(self, method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = target.decode()
        wire = protocol_for(path.partition("?")[0])
        protocol = wire.name if wire is not None and (self.protocols is None or wire.name in self.protocols) else "?"
        recorded = RecordedRequest(
            method.decode(),
            path,
            {k.decode().lower(): v.decode() for k, v in headers},
            raw,
            body,
            time.monotonic(),
            protocol,
        )
        if self.record:
            self.requests.append(recorded)
        return recorded

    async def _respond(self, stream: trio.SocketStream, request: RecordedRequest, keep_alive: bool = True) -> bool:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        close = () if keep_alive else (http.CLOSE,)
        try:
            if request.protocol == "?":
                return await self._send_body(stream, 404, self._not_found(request), close)
            if self.script:
                step: Any = self.script.popleft()
            elif self.responder is not None:
                step = self.responder(request)
            else:
                step = Reply("ok")
            delay = self.latency
            while isinstance(step, Slow):
                delay += step.delay
                step = step.step
            if delay:
                await self._timer.sleep(delay)
            return await self._render(stream, request, step, close)
        finally:
            self.in_flight -= 1

    async def _render(
        self, stream: trio.SocketStream, request: RecordedRequest, step: Any, close: tuple[tuple[str, str], ...] = ()
    ) -> bool:
        wire = request.wire
        assert wire is not None  # an unknown path was answered 404 before
        if isinstance(step, Disconnect):
            return False
        if isinstance(step, Status):
            body = wire.error_body(step.code, step.error_type, step.message)
            headers = (*wire.error_headers(step.code, step.error_type), *step.headers, *close)
            return await self._send_body(stream, step.code, body, headers)
        if isinstance(step, Malformed):
            return await self._send_body(stream, 200, step.body, close)
        if isinstance(step, Raw):
            return await self._send_body(stream, step.status, step.body, close, content_type=step.content_type)
        fault = step if isinstance(step, Fault) else None
        answer: Reply = fault.reply if fault else step
        if wire.name == "anthropic" and self.prompt_cache is not None:
            uncached, read, write = self.prompt_cache.account(request.body)
            answer = attrs.evolve(answer, usage=(uncached, answer.usage[1]), cache=(read, write))
        if not request.streaming:
            return await self._send_body(stream, 200, wire.body(answer, request, self), close)
        frames = wire.frames(answer, request, self)
        head = http.head(
            200, (("content-type", wire.stream_content_type), ("cache-control", "no-cache"), *close, http.CHUNKED)
        )
        cut = len(frames) if fault is None else fault.after
        # The head goes with the first frame (as a server flushing its first chunk does).
        await http.send(stream, head + b"".join(map(http.chunk, frames[:1])) if cut else head)
        interval = answer.interval
        for frame in frames[1:cut]:
            if interval:
                await self._timer.sleep(interval)
            await http.send(stream, http.chunk(frame))
        if fault is not None:
            if fault.kind == "drop":
                return False
            if fault.kind == "hang":
                await self._wait_for_close(stream, request)
                return False
            if fault.kind == "error":
                await http.send(stream, http.chunk(wire.stream_error(fault.error_type, fault.message)))
                frames = []
            elif fault.kind == "garbage":
                await http.send(stream, http.chunk(wire.garbage()))
                frames = []
            elif fault.kind == "gate":
                await self.gate.wait()
            for frame in frames[cut:]:
                if interval:
                    await self._timer.sleep(interval)
                await http.send(stream, http.chunk(frame))
        await http.send(stream, b"0\r\n\r\n")
        return True

    def _not_found(self, request: RecordedRequest) -> bytes:
        served = ", ".join(sorted(self.protocols)) if self.protocols is not None else "any provider protocol"
        message = f"no such endpoint: {request.method} {request.path.partition('?')[0]} (this server speaks {served})"
        return json.dumps({"error": {"message": message}}).encode()

    async def _wait_for_close(self, stream: trio.SocketStream, request: RecordedRequest) -> None:
        try:
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        request.client_closed = True
        self.client_closed.set()

    async def _send_body(
        self,
        stream: trio.SocketStream,
        status: int,
        body: bytes,
        headers: tuple[tuple[str, str], ...] = (),
        *,
        content_type: str = "application/json",
    ) -> bool:
        head = http.head(
            status,
            (("content-type", content_type), ("content-length", str(len(body))), ("request-id", "req_local"), *headers),
        )
        await http.send(stream, head + body)
        return True
