"""HTTP/1.1 response conformance of the trio transport: exact bytes from a raw server on 127.0.0.1.

Each row is one response case: the bytes a raw trio TCP server writes for
each request, and what the caller of ``httpx.AsyncClient`` must get: a body
(after httpx's content decoding) or a typed ``httpx`` error, before the
two-second read timeout (a case that waits for it gets ``ReadTimeout``, not
what its row expects).

``before`` records what the hand-written codec that preceded the llhttp one
did with the row (``None``: the same as now), measured by running this table
against it on 2026-12-01.
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Callable

import attrs
import httpx
import pytest
import trio

from condukt.providers.lowlevel import TrioTransport

READ_TIMEOUT = 2.0
#: The connect timeout and the bound on a whole case: nothing any row tests, only a guard
#: against a hang. (The connect once took the read timeout, and a loaded machine made a
#: loopback connect outlast 2 s: a ConnectTimeout where the row expected a protocol error.)
GUARD = 30.0


@attrs.frozen
class Step:
    """What the server does for one request: write ``data``, then close or keep the connection."""

    data: bytes
    close: bool = False


@attrs.frozen
class Case:
    id: str
    steps: tuple[Step, ...]
    #: Per request: the body expected, or the httpx error class.
    expect: tuple[bytes | type[httpx.HTTPError], ...]
    methods: tuple[str, ...] = ("GET",)
    #: Connections the server must have seen (``None``: not checked).
    connections: int | None = None
    check: Callable[[httpx.Response], bool] | None = None
    before: str | None = None


def ok(headers: bytes, body: bytes, version: bytes = b"HTTP/1.1") -> bytes:
    return version + b" 200 OK\r\n" + headers + b"\r\n" + body


def length(body: bytes, extra: bytes = b"") -> bytes:
    return ok(b"Content-Length: %d\r\n" % len(body) + extra, body)


GZIPPED = gzip.compress(b"decoded by httpx")
CHUNKED = b"Transfer-Encoding: chunked\r\n"
PROTOCOL = httpx.RemoteProtocolError

CASES = [
    Case(
        "chunked with extensions and trailers",
        (Step(ok(CHUNKED, b"5;name=value\r\nhello\r\n1;a=\"b\"\r\n \r\n5\r\nworld\r\n0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n")),),
        (b"hello world",),
    ),
    Case(
        "whitespace around a chunk extension (llhttp is strict here)",
        (Step(ok(CHUNKED, b"2 ; a=b\r\nok\r\n0\r\n\r\n")),),
        (PROTOCOL,),
        before="accepted: b'ok'",
    ),
    Case("Content-Length", (Step(length(b"exact")),), (b"exact",)),
    Case("Content-Length zero", (Step(length(b"")),), (b"",)),
    Case(
        "Content-Length conflicting duplicates",
        (Step(ok(b"Content-Length: 5\r\nContent-Length: 6\r\n", b"hello!")),),
        (PROTOCOL,),
    ),
    Case("Content-Length list of differing values", (Step(ok(b"Content-Length: 5, 6\r\n", b"hello!")),), (PROTOCOL,)),
    Case(
        "Content-Length identical duplicates (refused, as RFC 9110 8.6 allows)",
        (Step(ok(b"Content-Length: 5\r\nContent-Length: 5\r\n", b"hello")),),
        (PROTOCOL,),
        before="accepted: b'hello'",
    ),
    Case(
        "Content-Length and chunked together (smuggling)",
        (Step(ok(b"Content-Length: 3\r\n" + CHUNKED, b"5\r\nhello\r\n0\r\n\r\n")),),
        (PROTOCOL,),
        before="accepted: b'hello' (chunked won)",
    ),
    Case(
        "1xx before the final response",
        (Step(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + length(b"final")),),
        (b"final",),
    ),
    Case("101 switching protocols", (Step(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"),), (PROTOCOL,)),
    Case("close-delimited body", (Step(ok(b"", b"until the end"), close=True),), (b"until the end",)),
    Case(
        "keep-alive reuse of the connection",
        (Step(length(b"one")), Step(ok(CHUNKED, b"3\r\ntwo\r\n0\r\n\r\n")), Step(length(b"three"))),
        (b"one", b"two", b"three"),
        methods=("GET", "POST", "GET"),
        connections=1,
    ),
    Case(
        "HEAD response with Content-Length, then reuse",
        (Step(length(b"12345")[:-5]), Step(length(b"after head"))),
        (b"", b"after head"),
        methods=("HEAD", "GET"),
        connections=1,
    ),
    Case(
        "bytes after a complete response: not reused",
        (Step(length(b"first") + b"junk"), Step(length(b"second"))),
        (b"first", b"second"),
        methods=("GET", "GET"),
        connections=2,
    ),
    Case(
        "Connection: close is honoured",
        (Step(length(b"first", b"Connection: close\r\n")), Step(length(b"second"))),
        (b"first", b"second"),
        methods=("GET", "GET"),
        connections=2,
    ),
    Case("early close mid-body (Content-Length)", (Step(ok(b"Content-Length: 10\r\n", b"abc"), close=True),), (PROTOCOL,)),
    Case("early close mid-body (chunked)", (Step(ok(CHUNKED, b"5\r\nhel"), close=True),), (PROTOCOL,)),
    Case("close before any response", (Step(b"", close=True),), (PROTOCOL,)),
    Case(
        "gzip content-encoding (decoded by httpx)",
        (Step(length(GZIPPED, b"Content-Encoding: gzip\r\n")),),
        (b"decoded by httpx",),
    ),
    Case(
        "gzip content-encoding, chunked",
        (Step(ok(b"Content-Encoding: gzip\r\n" + CHUNKED, b"%x\r\n%s\r\n0\r\n\r\n" % (len(GZIPPED), GZIPPED))),),
        (b"decoded by httpx",),
    ),
    Case(
        "gzip transfer-coding before chunked (refused)",
        (Step(ok(b"Transfer-Encoding: gzip, chunked\r\n", b"%x\r\n%s\r\n0\r\n\r\n" % (len(GZIPPED), GZIPPED))),),
        (PROTOCOL,),
        before="accepted: the gzip bytes as the body",
    ),
    Case(
        "gzip and chunked in two Transfer-Encoding fields (refused)",
        (Step(ok(b"Transfer-Encoding: gzip\r\n" + CHUNKED, b"%x\r\n%s\r\n0\r\n\r\n" % (len(GZIPPED), GZIPPED))),),
        (PROTOCOL,),
    ),
    Case("gzip transfer-coding alone (refused)", (Step(ok(b"Transfer-Encoding: gzip\r\n", GZIPPED), close=True),), (PROTOCOL,)),
    Case("bare LF line ends", (Step(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"),), (PROTOCOL,), before="ReadTimeout (waited for CRLF CRLF)"),
    Case(
        "bare LF in one header line",
        (Step(b"HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 2\r\n\r\nok"),),
        (PROTOCOL,),
        before="ReadTimeout (waited for CRLF CRLF)",
    ),
    Case(
        "bare LF in chunk framing",
        (Step(ok(CHUNKED, b"2\nok\n0\n\n")),),
        (PROTOCOL,),
        before="ReadTimeout (waited for CRLF)",
    ),
    Case(
        "obs-fold (unfolded into one value)",
        (Step(length(b"ok", b"X-Folded: one\r\n  two\r\n\tthree\r\n")),),
        (b"ok",),
        check=lambda response: response.headers["x-folded"] == "one two three",
        before="RemoteProtocolError (header folding refused)",
    ),
    Case("whitespace before the first header", (Step(b"HTTP/1.1 200 OK\r\n X-A: 1\r\nContent-Length: 2\r\n\r\nok"),), (PROTOCOL,)),
    Case("HTTP/1.0 status line", (Step(ok(b"", b"old", version=b"HTTP/1.0"), close=True),), (b"old",)),
    Case(
        "HTTP/1.0 keep-alive: reused",
        (Step(ok(b"Connection: keep-alive\r\nContent-Length: 3\r\n", b"one", version=b"HTTP/1.0")), Step(length(b"two"))),
        (b"one", b"two"),
        methods=("GET", "GET"),
        connections=1,
    ),
    Case(
        "HTTP/1.2 status line (read as 1.1)",
        (Step(ok(b"Content-Length: 5\r\n", b"minor", version=b"HTTP/1.2")),),
        (b"minor",),
        before="RemoteProtocolError (malformed status line)",
    ),
    Case("HTTP/2.0 status line (refused)", (Step(ok(b"Content-Length: 2\r\n", b"h2", version=b"HTTP/2.0")),), (PROTOCOL,)),
    Case("not HTTP at all", (Step(b"SSH-2.0-OpenSSH_9.6\r\n"),), (PROTOCOL,), before="ReadTimeout (waited for CRLF CRLF)"),
    Case(
        "NUL in a header value",
        (Step(length(b"ok", b"X-A: a\x00b\r\n")),),
        (PROTOCOL,),
        before="accepted: b'ok', the NUL passed to httpx",
    ),
    Case(
        "CR in a header value",
        (Step(length(b"ok", b"X-A: a\rb\r\n")),),
        (PROTOCOL,),
        before="accepted: b'ok', the CR passed to httpx",
    ),
    Case("control character in a header value", (Step(length(b"ok", b"X-A: a\x01b\r\n")),), (PROTOCOL,), before="accepted: b'ok'"),
    Case("invalid header name", (Step(length(b"ok", b"X A: 1\r\n")),), (PROTOCOL,), before="accepted: b'ok'"),
    Case(
        "oversized head",
        (Step(ok(b"X-Big: " + b"a" * 70_000 + b"\r\nContent-Length: 2\r\n", b"ok")),),
        (PROTOCOL,),
        before="accepted: b'ok' (a head over 64 KiB completed by its second read was not measured)",
    ),
    Case(
        "huge trailers",
        (Step(ok(CHUNKED, b"2\r\nok\r\n0\r\nX-Huge: " + b"a" * 1_000_000 + b"\r\n\r\n")),),
        (PROTOCOL,),
        before="accepted: b'ok' (the trailer buffered without limit)",
    ),
    Case(
        "huge chunk extension",
        (Step(ok(CHUNKED, b"2;ext=" + b"a" * 1_000_000 + b"\r\nok\r\n0\r\n\r\n")),),
        (PROTOCOL,),
    ),
    Case("invalid chunk size", (Step(ok(CHUNKED, b"zz\r\nok\r\n0\r\n\r\n")),), (PROTOCOL,)),
    Case("204 with a Content-Length: no body read", (Step(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"), Step(length(b"next"))), (b"", b"next"), methods=("GET", "GET"), connections=1),
]


class RawServer:
    """Answers each request (read up to the end of its head) with the next step's exact bytes."""

    def __init__(self, steps: tuple[Step, ...]) -> None:
        self.steps = list(steps)
        self.connections = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        buffer = b""
        try:
            while self.steps:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                buffer = buffer[buffer.index(b"\r\n\r\n") + 4 :]
                step = self.steps.pop(0)
                if step.data:
                    await stream.send_all(step.data)
                if step.close:
                    return
            await trio.sleep_forever()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_response_conformance(case: Case, nursery: trio.Nursery) -> None:
    server = RawServer(case.steps)
    [listener] = await nursery.start(functools.partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
    url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}/"
    results: list[bytes | type[httpx.HTTPError]] = []
    with trio.fail_after(GUARD):
        async with httpx.AsyncClient(transport=TrioTransport(), timeout=httpx.Timeout(READ_TIMEOUT, connect=GUARD)) as client:
            for method in case.methods:
                try:
                    response = await client.request(method, url, content=b"{}" if method == "POST" else None)
                except httpx.HTTPError as exc:
                    print(f"{type(exc).__name__}: {exc}")
                    results.append(type(exc))
                    continue
                results.append(response.content)
                if case.check is not None:
                    assert case.check(response), response.headers
    assert results == list(case.expect)
    if case.connections is not None:
        assert server.connections == case.connections


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_response_conformance_without_httpx_objects(case: Case, nursery: trio.Nursery) -> None:
    """The same table through ``TrioTransport.exchange`` (what the providers send through): same bodies, same errors.

    An encoded body is read through ``RawResponse.to_httpx``, as the providers do.
    """
    server = RawServer(case.steps)
    [listener] = await nursery.start(functools.partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
    port = listener.socket.getsockname()[1]
    url = httpx.URL(f"http://127.0.0.1:{port}/")
    timeouts: dict[str, float | None] = {"connect": GUARD, "read": READ_TIMEOUT, "write": READ_TIMEOUT}
    results: list[bytes | type[httpx.HTTPError]] = []
    transport = TrioTransport()
    with trio.fail_after(GUARD):
        for method in case.methods:
            body = b"{}" if method == "POST" else b""
            try:
                response = await transport.exchange(
                    method, url, [(b"Host", b"127.0.0.1:%d" % port)], body, timeouts=timeouts
                )
                try:
                    if response.header(b"content-encoding") is not None:
                        results.append(await response.to_httpx().aread())
                    else:
                        results.append(await response.read())
                finally:
                    await response.aclose()
            except httpx.HTTPError as exc:
                print(f"{type(exc).__name__}: {exc}")
                results.append(type(exc))
                continue
            if case.check is not None:
                assert case.check(response.to_httpx()), response.headers
        await transport.aclose()
    assert results == list(case.expect)
    if case.connections is not None:
        assert server.connections == case.connections
