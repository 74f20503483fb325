"""An ``httpx`` transport on trio sockets, with an O(1) connection pool.

httpx's default transport (httpcore over anyio) costs about 0.5 ms of CPU per
request on trio and grows with the number of pooled connections (about 2.5 ms
per request with 1,000 connections), which is more than the whole budget of an
agent turn. This transport keeps httpx's client API and replaces the I/O,
the pool and the HTTP/1.1 codec (:mod:`._http11`): idle connections wait in
a per-origin stack, a request writes its head and body in one ``send_all``,
a chunked body hands over every complete chunk received so far at once, and
a response that is not read to the end closes its connection at once, so a
cancelled request never leaks one. :meth:`TrioTransport.exchange` is the
same round trip without httpx's request and response objects, for callers
(the providers) that send many alike requests.

It speaks HTTP/1.1 over TCP or TLS, honours httpx's per-request timeouts
(``connect``, ``read``, ``write``, ``pool``; ``read`` and ``write`` per
socket operation, as httpcore does; reads are timed by one task per
transport rather than a cancel scope each, see :mod:`._read_timer`), and
maps failures to httpx's exception classes, keeping the cause (a TLS
verification failure, say) in the message.
A request without ``User-Agent`` or ``Accept-Encoding`` headers gets
``condukt/<version>`` and ``gzip, deflate`` (httpx decodes both).

It goes through HTTP and HTTPS proxies, given as ``proxy=`` or read from
``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY`` by httpx's
rules (:mod:`._proxy`): a forward proxy for ``http://`` URLs, a ``CONNECT``
tunnel for ``https://`` ones. It does not do SOCKS or HTTP/2: give the node
another transport (:func:`condukt.providers.configure_http`) if you need them.
"""

from __future__ import annotations

import logging
import math
import os
import select
import ssl
from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from typing import Any

import httpx
import trio

from .http11 import ProtocolError, ResponseHead, ResponseReader, encode_head, encode_headers, encode_request
from .proxy import Proxy, ProxyMap
from .read_timer import ReadTimer

__all__ = ["PreparedRequest", "RawResponse", "TrioTransport"]

logger = logging.getLogger("condukt.providers")

_Origin = tuple[bytes, str, int]
_RECEIVE_SIZE = 65536
_ACCEPT_ENCODING = (b"Accept-Encoding", b"gzip, deflate")
#: Whether a request on a plain TCP connection is first written with one
#: non-blocking ``os.write`` on its socket (POSIX, where a socket is a file
#: descriptor): a request that fits in the socket's buffer, as a model API
#: request does, then costs no trio ``send_all`` (its conflict detector,
#: memoryview loop, send wrapper and closing checkpoint) and no cancel scope
#: for the write timeout (nothing waits). The rest of a request the socket
#: did not take goes through ``send_all``, under the write timeout. Reads
#: without a timeout of their own go to the descriptor too (``os.read``,
#: ``trio.lowlevel.wait_readable`` when there is nothing to read yet).
_DIRECT_WRITE = os.name == "posix"
#: The most distinct prepared heads a transport keeps (then it starts over).
_PREPARED_CACHE = 256


class _Connection:
    """One HTTP/1.1 connection: a trio stream, its response reader, and its read deadline (see :mod:`._read_timer`)."""

    __slots__ = (
        "fd",
        "filed_at",
        "idle_since",
        "origin",
        "progress",
        "read_deadline",
        "reader",
        "stream",
        "timed_out",
        "timer",
        "via",
    )

    def __init__(self, origin: _Origin, stream: trio.abc.Stream, timer: ReadTimer, via: Proxy | None = None) -> None:
        self.origin = origin
        self.stream = stream
        #: The socket's descriptor when requests may be written to it directly (see ``_DIRECT_WRITE``), else -1.
        self.fd = stream.socket.fileno() if _DIRECT_WRITE and type(stream) is trio.SocketStream else -1
        #: The forward proxy this plain-HTTP connection goes to (requests then use the absolute form).
        self.via = via
        self.reader = ResponseReader()
        self.idle_since = 0.0
        #: Called whenever bytes of the current response arrive (the request's ``condukt.progress``).
        self.progress: Callable[[], object] | None = None
        self.timer = timer
        self.read_deadline = math.inf
        self.filed_at = math.inf
        self.timed_out = False

    def looks_closed(self) -> bool:
        """Whether the peer closed (or sent junk on) this idle connection."""
        # An idle keep-alive connection has nothing to read: data or EOF means
        # the server closed it (or broke the protocol), so it must not be reused.
        sock = _socket_of(self.stream)
        if sock is None:
            return False
        return _peer_closed(sock)

    async def receive(self, timeout: float | None) -> None:
        """Read more bytes into the reader (EOF is passed on as :meth:`ResponseReader.eof`).

        Raises ``httpx.ReadTimeout`` when no byte came for ``timeout`` seconds
        (the transport's :class:`ReadTimer` closes the connection then).
        """
        data: bytes | bytearray
        fd = self.fd
        if timeout is not None:
            deadline = self.read_deadline = trio.current_time() + timeout
            if deadline < self.filed_at:
                self.timer.file(self, deadline)
        try:
            if fd >= 0:
                # Plain TCP: wait for the socket's descriptor (a checkpoint, as receive_some is), then read
                # it: what SocketStream.receive_some does without its conflict detector, send wrapper and
                # context manager (half a dozen objects and calls less per read).
                while True:
                    await trio.lowlevel.wait_readable(fd)
                    if self.timed_out:
                        # Closed by the timer after this task was woken (in the same batch): the
                        # descriptor's number may be another socket's or file's by now.
                        raise trio.ClosedResourceError
                    try:
                        data = os.read(fd, _RECEIVE_SIZE)
                        break
                    except BlockingIOError:  # woken without data after all: wait again
                        pass
            else:
                data = await self.stream.receive_some(_RECEIVE_SIZE)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            if self.timed_out:
                raise httpx.ReadTimeout(f"no data from the server for {timeout:g}s") from None
            raise
        finally:
            self.read_deadline = math.inf
        if data:
            self.reader.feed(data if type(data) is bytes else bytes(data))
            if self.progress is not None:
                self.progress()
        else:
            self.reader.eof()

    def has_data(self) -> bool:
        """Whether bytes (or EOF) wait on the socket, without waiting (``False`` if it cannot be probed)."""
        sock = _socket_of(self.stream)
        if sock is None:
            return False
        try:
            return _readable(sock.fileno())
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        """Close the socket at once (no TLS close_notify: the connection is being dropped)."""
        if self.filed_at != math.inf:
            self.timer.forget(self)
        _close_now(self.stream)


def _socket_of(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    inner: Any = stream
    while not isinstance(inner, trio.SocketStream):
        inner = getattr(inner, "transport_stream", None)
        if inner is None:
            return None
    return inner.socket


def _poll_readable(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _select_readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


#: Whether an idle socket has something to read (data, EOF or a reset), without waiting.
#: ``select.poll`` where there is one (POSIX: no ``FD_SETSIZE`` limit on the
#: descriptor, and the cheapest check); ``select.select`` on one socket elsewhere
#: (Windows, whose ``select`` takes any socket handle). A non-blocking
#: ``recv(MSG_PEEK)`` would need a second socket object per check, several
#: times dearer (benchmarks/code_choices.py compares the three).
_readable = _poll_readable if hasattr(select, "poll") else _select_readable


def _peer_closed(sock: trio.socket.SocketType) -> bool:
    """Whether the peer closed (or sent junk on, or reset) an idle connection."""
    try:
        return _readable(sock.fileno())
    except (OSError, ValueError):
        return True  # a descriptor the probe cannot look at: do not trust the connection


def _write_now(fd: int, data: bytes) -> int:
    """Write what the socket takes at once, without waiting: the number of bytes written."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError as exc:
        raise httpx.WriteError(_describe(exc)) from exc


def _close_now(stream: trio.abc.Stream) -> None:
    sock = _socket_of(stream)
    if sock is not None:
        sock.close()


class _ResponseStream(httpx.AsyncByteStream):
    """The body of one response, read straight off its connection."""

    __slots__ = ("_conn", "_done", "_read_timeout", "_transport")

    def __init__(self, transport: TrioTransport, conn: _Connection, read_timeout: float | None) -> None:
        self._transport = transport
        self._conn = conn
        self._read_timeout = read_timeout
        self._done = False

    def __aiter__(self) -> _ResponseStream:
        return self

    def _take(self) -> bytes:
        """The body bytes parsed since the last take; the connection goes back to the pool once the body is whole."""
        reader = self._conn.reader
        data = reader.body()
        if reader.done:
            self._done = True
            self._transport._release(self._conn)
        return data

    async def __anext__(self) -> bytes:
        conn = self._conn
        try:
            while not self._done:
                data = self._take()
                if data:
                    return data
                if not self._done:
                    await conn.receive(self._read_timeout)
        except BaseException as exc:
            error = self._failed(exc)
            if error is exc:
                raise
            raise error from None
        raise StopAsyncIteration

    async def read_all(self) -> bytes:
        """The rest of the body at once (what iterating and joining gives, without the iteration protocol)."""
        conn = self._conn
        pieces: list[bytes] = []
        try:
            while not self._done:
                data = self._take()
                if data:
                    pieces.append(data)
                if not self._done:
                    await conn.receive(self._read_timeout)
        except BaseException as exc:
            error = self._failed(exc)
            if error is exc:
                raise
            raise error from None
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _failed(self, exc: BaseException) -> BaseException:
        """Reading failed with ``exc``: close the connection; what to raise (``exc``, or its ``httpx`` error)."""
        if not self._done:
            self._done = True
            self._transport._discard(self._conn)
        if isinstance(exc, (httpx.HTTPError, trio.Cancelled)) or not isinstance(exc, Exception):
            return exc
        return _translate(exc)

    async def aclose(self) -> None:
        if not self._done:
            # Not read to the end: the connection cannot carry another request.
            self._done = True
            self._transport._discard(self._conn)
        await trio.lowlevel.checkpoint_if_cancelled()


class PreparedRequest:
    """A request's method, URL and headers as :meth:`TrioTransport.prepare` checked and encoded them.

    Opaque: give it to :meth:`TrioTransport.exchange_prepared` of the
    transport that made it, as often as you like.
    """

    __slots__ = ("headers", "method", "origin", "prefix", "transport", "url")

    def __init__(
        self,
        transport: TrioTransport,
        method: str,
        url: httpx.URL,
        headers: tuple[tuple[bytes, bytes], ...],
        origin: _Origin,
        prefix: bytes,
    ) -> None:
        self.transport = transport
        self.method = method
        self.url = url
        self.headers = headers
        self.origin = origin
        self.prefix = prefix


class RawResponse:
    """A response from :meth:`TrioTransport.exchange`: its status and raw headers, the body still to read.

    What ``httpx.Response`` holds, without its layers (header decoding,
    content decoders, chunkers, async generators: about 30 us a response).
    The body is read from :attr:`stream` (an ``httpx.AsyncByteStream``
    yielding the bytes as they arrive) or at once with :meth:`read`; it is
    not decoded: a response with a ``Content-Encoding`` is better read
    through :meth:`to_httpx`. Read to its end, the connection goes back to
    the pool; closed before (:meth:`aclose`), the connection is closed.
    Reading raises what ``httpx`` raises (``ReadError``, ``ReadTimeout``,
    ``RemoteProtocolError``).
    """

    __slots__ = ("headers", "reason", "status_code", "stream")

    def __init__(self, head: ResponseHead, stream: httpx.AsyncByteStream) -> None:
        #: The HTTP status.
        self.status_code: int = head.status_code
        #: The reason phrase, as sent.
        self.reason: bytes = head.reason
        #: The headers as sent: ``(name, value)`` byte pairs, names in the server's case.
        self.headers: list[tuple[bytes, bytes]] = head.headers
        #: The body, chunk by chunk.
        self.stream = stream

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (given in lower case; matched case-insensitively), or ``None``."""
        size = len(name)
        for key, value in self.headers:
            if len(key) == size and key.lower() == name:
                return value
        return None

    async def read(self) -> bytes:
        """The whole (undecoded) body; the connection then goes back to the pool.

        Cancelled before the end, it closes the connection (the rest of its body cannot be skipped).
        """
        stream = self.stream
        if type(stream) is _ResponseStream:
            return await stream.read_all()
        chunks = [chunk async for chunk in stream]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def aclose(self) -> None:
        """Stop reading: a body not read to its end closes its connection. Idempotent.

        The closing happens before its only checkpoint: cancelled, it has closed the connection
        when it raises ``trio.Cancelled``.
        """
        await self.stream.aclose()

    def to_httpx(self) -> httpx.Response:
        """An ``httpx.Response`` reading the same body (decoded per ``Content-Encoding``); use one or the other."""
        return httpx.Response(
            self.status_code,
            headers=self.headers,
            stream=self.stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": self.reason},
        )


def _translate(exc: BaseException) -> httpx.HTTPError:
    if isinstance(exc, ProtocolError):
        return httpx.RemoteProtocolError(str(exc) or "malformed response from the server")
    return httpx.ReadError(_describe(exc))


def _describe(exc: BaseException) -> str:
    """``exc`` and what caused it, in one line: trio's ``BrokenResourceError`` has no text of its own."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 4:
        more = ""
        if isinstance(current, BaseExceptionGroup):  # e.g. one error per address tried: the first tells
            more = f" (and {len(current.exceptions) - 1} more)" if len(current.exceptions) > 1 else ""
            current = current.exceptions[0]
        text = str(current)
        parts.append((f"{type(current).__name__}: {text}" if text else type(current).__name__) + more)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return ", caused by ".join(parts)


async def _send_all(stream: trio.abc.Stream, data: bytes | memoryview, timeout: float | None) -> None:
    if timeout is None:
        await stream.send_all(data)
        return
    with trio.CancelScope(deadline=trio.current_time() + timeout) as scope:
        await stream.send_all(data)
    if scope.cancelled_caught:
        raise httpx.WriteTimeout("timed out sending the request")


async def _wait_for_slot(slots: trio.Semaphore, timeout: float | None) -> None:
    if timeout is None:
        await slots.acquire()
        return
    with trio.move_on_after(timeout):
        await slots.acquire()
        return
    raise httpx.PoolTimeout("no connection became free in time")


#: Methods RFC 9110 (9.2.2) calls idempotent: sending one twice does what sending it once does.
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


def _resend_reason(
    method: str, headers: Sequence[tuple[bytes, bytes]], replayable: bool, exc: httpx.HTTPError
) -> str | None:
    """Why a request, failed on a reused connection before any byte of an answer, may be sent
    again on a new one; ``None`` if it may not.

    The rule: a request is sent again only when the server cannot have acted
    on it. Writing it failed, so the server never had the whole request; or
    it is idempotent (by ``method``, or it carries an ``Idempotency-Key`` in
    ``headers``), so acting twice is acting once. A ``POST`` that was written
    whole and then met a closed connection is not sent again: the server may
    have read and processed it before closing. Its body must be in memory
    (``replayable``: a streamed body cannot be replayed).
    """
    if not replayable:
        return None
    if isinstance(exc, httpx.WriteError):
        return "the reused connection was closed before the request was sent; sent again on a new connection"
    if method in _IDEMPOTENT or any(name.lower() == b"idempotency-key" for name, _ in headers):
        return "the reused connection was closed without an answer; idempotent request sent again on a new connection"
    return None


async def _tunnel(stream: trio.abc.Stream, proxy: Proxy, host: str, port: int) -> None:
    """Ask ``proxy`` for a ``CONNECT`` tunnel to ``host:port`` on ``stream``.

    A refusal is an ``httpx.ProxyError`` with the proxy's status (``407``:
    the credentials were missing or wrong); it never shows them.
    """
    authority = (f"[{host}]" if ":" in host else host).encode("idna") + b":%d" % port
    await stream.send_all(encode_request(b"CONNECT", authority, [(b"Host", authority), *proxy.headers], None))
    reader = ResponseReader()
    while (head := reader.head(head_request=True)) is None:
        data = await stream.receive_some(_RECEIVE_SIZE)
        if not data:
            reader.eof()
        reader.feed(bytes(data))
    if not 200 <= head.status_code < 300:
        reason = head.reason.decode("latin-1")
        raise httpx.ProxyError(
            f"the proxy {proxy.label} refused to tunnel to {host}:{port}: {head.status_code} {reason}".rstrip()
        )


def _timeouts(request: httpx.Request) -> dict[str, float | None]:
    timeouts: dict[str, float | None] = request.extensions.get("timeout") or {}
    return timeouts


class TrioTransport(httpx.AsyncBaseTransport):
    """An HTTP/1.1 transport for ``httpx.AsyncClient`` on trio.

    ``max_connections`` bounds the requests in flight through this transport
    (each holds one connection while it runs); more wait, under the
    request's ``pool`` timeout (``None``: under the caller's cancel scope).
    ``max_keepalive_connections`` idle connections are kept for reuse, each
    at most ``keepalive_expiry`` seconds. Use it as a context manager or
    call :meth:`aclose`, which closes the idle connections.

    Cancelling a request at any point closes its connection: nothing is
    returned to the pool half-read.

    ``proxy`` (a URL or ``httpx.Proxy``) sends every request through that
    HTTP(S) proxy; without it and with ``trust_env``, the environment's
    ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY`` are read
    once, here, as ``httpx.AsyncClient(trust_env=True)`` reads them.
    Credentials in the proxy URL go to the proxy alone, as
    ``Proxy-Authorization``, and never into a message.

    A kept-alive connection the server closed while it was idle is not
    reused (a non-blocking readability check before each reuse). If it is
    closed in the instant after that check, the request is sent again on a
    new connection only when the server cannot have acted on it (see
    :func:`_resend_reason`: the write failed, or the request is idempotent);
    otherwise the error is raised for the caller's retry policy to judge.
    Every resend is logged (``condukt.providers``, INFO) and reported to
    the request's ``condukt.resend`` extension, an async callable taking
    the reason, if it has one (:class:`~condukt.providers.lowlevel.HttpModel`
    turns it into a :class:`~condukt.events.Retry` event). A request's
    ``condukt.progress`` extension, a callable, is called whenever bytes
    of its response arrive, head and body alike (an idle timeout that
    resets while bytes move).
    """

    def __init__(
        self,
        *,
        max_connections: int | None = 1000,
        max_keepalive_connections: int | None = 1000,
        keepalive_expiry: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        proxy: httpx.Proxy | httpx.URL | str | None = None,
        trust_env: bool = True,
    ) -> None:
        self._proxies = ProxyMap(proxy, trust_env=trust_env)
        self._routes: dict[_Origin, Proxy | None] = {}
        self._slots = trio.Semaphore(max_connections) if max_connections else None
        self._max_idle = max_keepalive_connections if max_keepalive_connections is not None else 1 << 30
        self._expiry = keepalive_expiry
        self._ssl_context = ssl_context
        self._idle: dict[_Origin, deque[_Connection]] = {}
        self._idle_count = 0
        self._active: set[_Connection] = set()
        self._closed = False
        self._timer = ReadTimer()
        from ... import __version__  # here: the package is still importing this module at import time

        self._user_agent = (b"User-Agent", b"condukt/" + __version__.encode("ascii"))
        self._prepared: dict[tuple[str, str, tuple[tuple[bytes, bytes], ...]], PreparedRequest] = {}

    @property
    def idle_connections(self) -> int:
        """Connections kept open for reuse."""
        return self._idle_count

    @property
    def active_connections(self) -> int:
        """Connections carrying a request or response right now."""
        return len(self._active)

    def _ssl(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            context = httpx.create_ssl_context()
            context.set_alpn_protocols(["http/1.1"])
            self._ssl_context = context
        return self._ssl_context

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its response with the body still to read.

        Raises ``httpx`` errors: ``ConnectError``, ``ConnectTimeout``,
        ``PoolTimeout``, ``WriteError``, ``WriteTimeout``, ``ReadError``,
        ``ReadTimeout``, ``RemoteProtocolError``, ``UnsupportedProtocol``, and
        ``LocalProtocolError`` once closed. Cancelled at any point (including
        while it waits for a free connection), it closes the request's
        connection and frees its slot before ``trio.Cancelled`` propagates.
        """
        if self._closed:
            raise httpx.LocalProtocolError("the transport is closed")
        stream = request.stream
        request_headers = request.headers
        headers: Sequence[tuple[bytes, bytes]] = request_headers.raw
        body: bytes | None = None
        chunked = False
        if isinstance(stream, httpx.ByteStream):
            body = request.content
        else:
            chunked = "content-length" not in request_headers
            if chunked and "transfer-encoding" not in request_headers:
                # httpx says chunked itself for a streamed body; a request built otherwise may not.
                headers = [*headers, (b"Transfer-Encoding", b"chunked")]
        url = request.url
        origin = self._origin(url)
        route = self._route(origin)
        method = request.method
        # Plain HTTP through a proxy goes to it in the absolute form (HTTPS tunnels through it).
        head = self._encode_head(method, url, headers, route if origin[0] == b"http" else None) + b"\r\n"
        extensions = request.extensions
        timeouts = _timeouts(request)
        response = await self._round_trip(
            method,
            origin,
            headers,
            head + body if body else head,
            body is not None,
            timeouts,
            extensions.get("condukt.progress"),
            extensions.get("condukt.resend"),
            None if body is not None else stream,  # type: ignore[arg-type]
            chunked,
        )
        return response.to_httpx()

    def prepare(self, method: str, url: httpx.URL, headers: Sequence[tuple[bytes, bytes]]) -> PreparedRequest:
        """``method``, ``url`` and ``headers`` checked and encoded once, for :meth:`exchange_prepared`.

        For a caller that sends many requests differing only in their body
        (a model API client): the head is validated (no CR, LF or NUL in
        values, token names) and serialised here, once, rather than per
        request. ``headers`` go out as given (they should hold ``Host``),
        followed by ``User-Agent`` / ``Accept-Encoding`` when missing, and
        each request's ``Content-Length``. Raises ``httpx.UnsupportedProtocol``
        for a scheme other than ``http``/``https`` and ``httpx.LocalProtocolError``
        for a head that cannot be written.
        """
        pairs = tuple(headers)
        key = (method, str(url), pairs)
        prepared = self._prepared.get(key)
        if prepared is None:
            # Agents of one node send alike heads (same endpoint, same key): encoded once for all.
            origin = self._origin(url)
            route = self._route(origin)
            prefix = self._encode_head(method, url, pairs, route if origin[0] == b"http" else None)
            if len(self._prepared) >= _PREPARED_CACHE:
                self._prepared.clear()
            prepared = self._prepared[key] = PreparedRequest(self, method, url, pairs, origin, prefix)
        return prepared

    async def exchange(
        self,
        method: str,
        url: httpx.URL,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
        *,
        timeouts: dict[str, float | None] | None = None,
        progress: Callable[[], object] | None = None,
        resend: Callable[[str], Awaitable[object]] | None = None,
    ) -> RawResponse:
        """Send a request whose body is in memory, without building ``httpx.Request`` and ``httpx.Response``.

        What :meth:`handle_async_request` does (same pool, same errors, same
        cancellation and resend rules), for a caller that has its headers as
        raw pairs already: a model API client sends thousands of alike
        requests, and httpx's request and response objects cost about 45 us
        a request, a tenth of an agent run's client CPU (measured in
        ``benchmarks/providers_openai.py``). ``headers`` go out as given (they
        should hold ``Host``), followed by ``User-Agent`` / ``Accept-Encoding``
        when missing, and ``Content-Length``. ``timeouts``, ``progress`` and
        ``resend`` are what the ``timeout``, ``condukt.progress`` and
        ``condukt.resend`` request extensions are to
        :meth:`handle_async_request`. The caller reads or closes the
        returned :class:`RawResponse`. :meth:`prepare` and
        :meth:`exchange_prepared` do the same with the head encoded once.
        """
        if self._closed:
            raise httpx.LocalProtocolError("the transport is closed")
        prepared = self.prepare(method, url, headers)
        return await self.exchange_prepared(prepared, body, timeouts=timeouts, progress=progress, resend=resend)

    def exchange_prepared(
        self,
        prepared: PreparedRequest,
        body: bytes,
        *,
        timeouts: dict[str, float | None] | None = None,
        progress: Callable[[], object] | None = None,
        resend: Callable[[str], Awaitable[object]] | None = None,
        headers: Sequence[tuple[bytes, bytes]] | None = None,
    ) -> Awaitable[RawResponse]:
        """:meth:`exchange` for a head :meth:`prepare` encoded (by this transport: ``ValueError`` otherwise).

        Await what it returns (``await transport.exchange_prepared(...)``):
        the round trip itself, without a coroutine of this method around it
        (one object less per request in flight, and one frame less each time
        the request resumes). ``ValueError`` and, once the transport is
        closed, ``httpx.LocalProtocolError`` are raised by the call itself;
        the rest of what :meth:`exchange` raises comes from the await.
        Cancelled at any point, the round trip closes the request's
        connection and frees its slot before ``trio.Cancelled`` propagates.
        ``headers`` are sent after the prepared ones, for this request only
        (a signature, a token that expires); a header that cannot be
        written raises ``httpx.LocalProtocolError`` from the call.
        """
        if prepared.transport is not self:
            raise ValueError("the request was prepared by another transport")
        if self._closed:
            raise httpx.LocalProtocolError("the transport is closed")
        prefix = prepared.prefix
        if headers:
            try:
                prefix += encode_headers(headers)
            except ProtocolError as exc:
                raise httpx.LocalProtocolError(str(exc)) from None
        return self._round_trip(
            prepared.method,
            prepared.origin,
            prepared.headers,
            b"%sContent-Length: %d\r\n\r\n%s" % (prefix, len(body), body),
            True,
            {} if timeouts is None else timeouts,
            progress,
            resend,
        )

    def _origin(self, url: httpx.URL) -> _Origin:
        scheme = url.raw_scheme
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        return (scheme, url.host, url.port or (443 if scheme == b"https" else 80))

    async def _round_trip(
        self,
        method: str,
        origin: _Origin,
        headers: Sequence[tuple[bytes, bytes]],
        data: bytes,
        replayable: bool,
        timeouts: dict[str, float | None],
        progress: Callable[[], object] | None,
        resend: Callable[[str], Awaitable[object]] | None,
        body_stream: AsyncIterable[bytes] | None = None,
        chunked: bool = False,
    ) -> RawResponse:
        """Send one request (``data``: its head and in-memory body; then ``body_stream``); its response, body to read.

        ``replayable``: the whole body is in ``data`` (the request may be sent again on a new connection).
        """
        slots = self._slots
        if slots is not None:
            try:
                # The request blocks on the network anyway: no need for an extra checkpoint here.
                slots.acquire_nowait()
            except trio.WouldBlock:
                await _wait_for_slot(slots, timeouts.get("pool"))
        conn: _Connection | None = None
        head_request = method == "HEAD"
        try:
            while True:
                conn = self._reuse(origin)
                reused = conn is not None
                if conn is None:
                    conn = await self._connect(origin, timeouts.get("connect"), self._route(origin))
                self._active.add(conn)
                conn.progress = progress
                try:
                    fd = conn.fd
                    if fd >= 0 and body_stream is None:
                        sent = _write_now(fd, data)
                        if sent < len(data):
                            await self._send(conn, memoryview(data)[sent:], None, False, timeouts.get("write"))
                    else:
                        await self._send(conn, data, body_stream, chunked, timeouts.get("write"))
                    reader = conn.reader
                    read_timeout = timeouts.get("read")
                    try:
                        while (head := reader.head(head_request)) is None:
                            await conn.receive(read_timeout)
                    except ProtocolError as exc:
                        raise httpx.RemoteProtocolError(str(exc) or "malformed response from the server") from None
                    except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
                        raise httpx.ReadError(_describe(exc)) from exc
                    break
                except (httpx.WriteError, httpx.ReadError, httpx.RemoteProtocolError) as exc:
                    # A kept-alive connection the server closed just as it was reused.
                    started = conn.reader.started
                    reason = _resend_reason(method, headers, replayable, exc) if reused and not started else None
                    if reason is None:
                        if reused and not started:
                            raise type(exc)(
                                f"{exc} (a reused connection, closed after the whole request was sent:"
                                " the server may have processed it, so it is not sent again here)"
                            ) from exc
                        raise
                    self._forget(conn)
                    conn = None
                    logger.info("%s %s: %s", method, origin[1], reason)
                    if resend is not None:
                        await resend(reason)
        except BaseException as exc:
            if conn is not None:
                self._discard(conn)
            elif slots is not None:
                slots.release()
            if isinstance(exc, (httpx.HTTPError, trio.Cancelled)):
                raise
            if isinstance(exc, Exception):
                raise _translate(exc) from exc
            raise
        return RawResponse(head, _ResponseStream(self, conn, timeouts.get("read")))

    def _reuse(self, origin: _Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        deadline = trio.current_time() - self._expiry
        while idle:
            conn = idle.pop()
            self._idle_count -= 1
            if conn.idle_since >= deadline and not conn.looks_closed():
                return conn
            conn.close()
        return None

    def _route(self, origin: _Origin) -> Proxy | None:
        """The proxy requests to ``origin`` go through (``None``: direct), looked up once per origin."""
        if not self._proxies:
            return None
        try:
            return self._routes[origin]
        except KeyError:
            scheme, host, port = origin
            proxy = self._routes[origin] = self._proxies.lookup(scheme.decode("ascii"), host, port)
            return proxy

    async def _connect(self, origin: _Origin, timeout: float | None, proxy: Proxy | None = None) -> _Connection:
        scheme, host, port = origin
        where = f"{host}:{port}" if proxy is None else f"{host}:{port} through the proxy {proxy.label}"
        try:
            with trio.fail_after(timeout if timeout is not None else float("inf")):
                if proxy is None:
                    stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
                else:
                    stream = await trio.open_tcp_stream(proxy.host, proxy.port)
                try:
                    if proxy is not None and proxy.scheme == b"https":
                        context = proxy.ssl_context or self._ssl()
                        stream = trio.SSLStream(stream, context, server_hostname=proxy.host, https_compatible=True)
                        await stream.do_handshake()
                    if proxy is not None and scheme == b"http":
                        return _Connection(origin, stream, self._timer, proxy)
                    if proxy is not None:
                        await _tunnel(stream, proxy, host, port)
                    if scheme == b"https":
                        tls = trio.SSLStream(stream, self._ssl(), server_hostname=host, https_compatible=True)
                        await tls.do_handshake()
                        stream = tls
                except BaseException:
                    _close_now(stream)
                    raise
        except trio.TooSlowError:
            raise httpx.ConnectTimeout(f"timed out connecting to {where}") from None
        except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"cannot connect to {where}: {_describe(exc)}") from exc
        except ProtocolError as exc:
            raise httpx.ProxyError(f"cannot connect to {where}: the proxy's answer is malformed: {exc}") from None
        return _Connection(origin, stream, self._timer)

    def _encode_head(
        self,
        method: str,
        url: httpx.URL,
        headers: Sequence[tuple[bytes, bytes]],
        via: Proxy | None = None,
    ) -> bytes:
        """The request line and header lines (without the blank line ending the head; ``via``: to a forward proxy)."""
        target = url.raw_path
        agent = encoding = False
        for name, _ in headers:
            # One pass over the raw names: httpx's ``in`` decodes every value, twice.
            size = len(name)
            if size == 10 and name.lower() == b"user-agent":
                agent = True
            elif size == 15 and name.lower() == b"accept-encoding":
                encoding = True
        if not (agent and encoding):
            headers = [*headers, *(() if agent else (self._user_agent,)), *(() if encoding else (_ACCEPT_ENCODING,))]
        if via is not None:
            # A forward proxy takes the absolute form, and its own credentials.
            target = url.raw_scheme + b"://" + url.netloc + target
            headers = [*headers, *via.headers]
        try:
            return encode_head(method.encode("ascii"), target, headers)
        except ProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from None

    async def _send(
        self,
        conn: _Connection,
        data: bytes | memoryview,
        body_stream: AsyncIterable[bytes] | None,
        chunked: bool,
        timeout: float | None,
    ) -> None:
        """Write the request: ``data`` (head and in-memory body) in a single ``send_all``, then a streamed body.

        ``timeout`` bounds each write (not the wait for a streamed body's next chunk).
        """
        try:
            await _send_all(conn.stream, data, timeout)
            if body_stream is not None:
                await self._send_body(conn, body_stream, chunked, timeout)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError) as exc:
            raise httpx.WriteError(_describe(exc)) from exc

    async def _send_body(
        self, conn: _Connection, body_stream: AsyncIterable[bytes], chunked: bool, timeout: float | None
    ) -> None:
        async for chunk in body_stream:
            if chunk:
                if chunked:
                    chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)
                await _send_all(conn.stream, chunk, timeout)
        if chunked:
            await _send_all(conn.stream, b"0\r\n\r\n", timeout)

    def _release(self, conn: _Connection) -> None:
        """A response was read to its end: keep the connection if it can be reused."""
        self._active.discard(conn)
        conn.progress = None
        if self._slots is not None:
            self._slots.release()
        if not self._closed and conn.reader.next_response() and self._idle_count < self._max_idle:
            conn.idle_since = trio.current_time()
            self._idle.setdefault(conn.origin, deque()).append(conn)
            self._idle_count += 1
        else:
            conn.close()

    def _forget(self, conn: _Connection) -> None:
        """Close a connection but keep its request's slot (the request goes on elsewhere)."""
        self._active.discard(conn)
        conn.close()

    def _discard(self, conn: _Connection) -> None:
        """Close a connection that cannot be reused (cancelled, failed, half-read)."""
        if conn in self._active:
            self._active.discard(conn)
            if self._slots is not None:
                self._slots.release()
        conn.close()

    async def aclose(self) -> None:
        """Close every idle connection; later requests fail. In-flight responses close as they end.

        The closing happens before its only checkpoint: a cancelled ``aclose``
        has closed them all when it raises ``trio.Cancelled``.
        """
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        self._idle_count = 0
        await trio.lowlevel.checkpoint()
