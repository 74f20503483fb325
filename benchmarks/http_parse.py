"""HTTP/1.1 response parsing: the hand-written codec condukt had, llhttp (httptools), h11; and whole requests.

Two measurements, each printed with its ratio to a baseline measured in the
same run:

1. Parse cost per response, no I/O: the same bytes fed to the response
   reader condukt used until 2026-12 (kept below, only for this comparison),
   to today's reader on httptools (llhttp), and to h11 (the codec of
   httpcore, httpx's default transport). Responses shaped like OpenAI's:
   a chat completion with Content-Length (about 20 headers), and a stream of
   40 server-sent events in 40 chunks, fed one network read per chunk (a
   live stream) or in one read (a buffered one).
2. Client CPU per request through ``httpx.AsyncClient``, one request after
   another on a kept-alive connection, against a server in its own process
   that writes the same responses (the stream one ``send_all`` per chunk):
   condukt's TrioTransport with each reader, and httpx's default transport
   (httpcore over anyio on trio).
3. and 4. With ``--instructions`` (needs valgrind; about 10 minutes): 1. and
   2. counted in CPU instructions, which load from other processes on the
   machine does not disturb (timings on a shared machine vary by 30% and
   more; instruction counts by well under 1%).

    python benchmarks/http_parse.py [--instructions]
"""

from __future__ import annotations

import datetime
import functools
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version

import h11
import httpx
import trio

from condukt.providers._http import transport as _transport
from condukt.providers._http.http11 import ProtocolError, ResponseReader
from condukt.providers.lowlevel import TrioTransport

# ---------------------------------------------------------------------------- the codec condukt had
# Copied from src/condukt/providers/_http11.py (now _http/http11.py) as of commit bc06eb0, for comparison only.

MAX_HEAD = 64 * 1024
_MAX_CHUNK_LINE = 4096

_HEX = re.compile(rb"^[0-9A-Fa-f]{1,16}$")
_STATUS = re.compile(rb"^HTTP/1\.([01]) (\d{3})(?: (.*))?$")


class OldResponseHead:
    """A parsed status line and headers."""

    __slots__ = ("headers", "keep_alive", "reason", "status_code")

    def __init__(self, status_code: int, reason: bytes, headers: list[tuple[bytes, bytes]], keep_alive: bool) -> None:
        self.status_code = status_code
        self.reason = reason
        self.headers = headers
        self.keep_alive = keep_alive


_LENGTH, _CHUNKED, _UNTIL_CLOSE, _DONE = range(4)


class OldResponseReader:
    """Parses one connection's responses from the bytes given to :meth:`feed`.

    Call :meth:`head` until it returns a head (``None``: feed more), then
    :meth:`body` until :attr:`done` (``b""`` with ``done`` false: feed
    more), then :meth:`next_response` to reuse the connection.
    """

    __slots__ = ("_awaiting_head", "_buffer", "_chunk_left", "_in_trailers", "_left", "_mode", "done", "keep_alive")

    def __init__(self) -> None:
        self._buffer = b""
        self._mode = _DONE
        self._left = 0
        self._chunk_left = -1
        self._in_trailers = False
        self._awaiting_head = True
        #: The body was read to its end.
        self.done = False
        #: The connection may carry another request once this response is done.
        self.keep_alive = False

    @property
    def started(self) -> bool:
        """Whether any byte of the current response arrived."""
        return not self._awaiting_head or bool(self._buffer)

    def feed(self, data: bytes) -> None:
        """Add bytes received from the server."""
        self._buffer = self._buffer + data if self._buffer else data

    def head(self, head_request: bool = False) -> OldResponseHead | None:
        """The next final response head, skipping ``1xx`` ones; ``None`` if incomplete."""
        while True:
            buffer = self._buffer
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD:
                    raise ProtocolError("response head too large")
                return None
            lines = buffer[:end].split(b"\r\n")
            self._buffer = buffer[end + 4 :]
            match = _STATUS.match(lines[0])
            if match is None:
                raise ProtocolError(f"malformed status line {lines[0][:100]!r}")
            minor, code, reason = match.groups()
            status = int(code)
            headers: list[tuple[bytes, bytes]] = []
            length: bytes | None = None
            chunked = False
            close = minor == b"0"
            for line in lines[1:]:
                name, colon, value = line.partition(b":")
                if not colon or not name or name[-1:] in b" \t" or name[:1] in b" \t":
                    raise ProtocolError(f"malformed header line {line[:100]!r}")
                value = value.strip(b" \t")
                headers.append((name, value))
                lowered = name.lower()
                if lowered == b"content-length":
                    if length is not None and length != value:
                        raise ProtocolError("conflicting Content-Length headers")
                    length = value
                elif lowered == b"transfer-encoding":
                    chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
                    if not chunked:
                        raise ProtocolError(f"unsupported Transfer-Encoding {value!r}")
                elif lowered == b"connection":
                    tokens = value.lower()
                    if b"close" in tokens:
                        close = True
                    elif b"keep-alive" in tokens and minor == b"0":
                        close = False
            if 100 <= status < 200:
                if status == 101:
                    raise ProtocolError("protocol switch (101) is not supported")
                continue
            self._awaiting_head = False
            self.done = False
            self.keep_alive = not close
            self._chunk_left = -1
            self._in_trailers = False
            if head_request or status in (204, 304):
                self._mode = _DONE
                self.done = True
            elif chunked:
                self._mode = _CHUNKED
            elif length is not None:
                if not length.isdigit():
                    raise ProtocolError(f"invalid Content-Length {length!r}")
                self._left = int(length)
                self._mode = _LENGTH
                self.done = self._left == 0
            else:
                self._mode = _UNTIL_CLOSE
                self.keep_alive = False
            return OldResponseHead(status, reason or b"", headers, self.keep_alive)

    def body(self) -> bytes:
        """The body bytes available now (``b""``: none; check :attr:`done`)."""
        mode = self._mode
        if mode == _LENGTH:
            buffer = self._buffer
            if len(buffer) <= self._left:
                self._buffer = b""
                self._left -= len(buffer)
                data = buffer
            else:
                data = buffer[: self._left]
                self._buffer = buffer[self._left :]
                self._left = 0
            if self._left == 0:
                self._finish()
            return data
        if mode == _CHUNKED:
            return self._chunks()
        if mode == _UNTIL_CLOSE:
            data, self._buffer = self._buffer, b""
            return data
        return b""

    def eof(self) -> None:
        """The server closed the connection: ends a close-delimited body, else :class:`ProtocolError`."""
        if self._awaiting_head:
            raise ProtocolError("the server closed the connection without sending a response")
        if self._mode == _UNTIL_CLOSE:
            self._finish()
            return
        if not self.done:
            raise ProtocolError("the server closed the connection before the response was complete")

    def next_response(self) -> bool:
        """Prepare for the next response on this connection; ``False`` if it cannot carry one."""
        if self.done and self.keep_alive and not self._buffer:
            self._awaiting_head = True
            return True
        return False

    def _finish(self) -> None:
        self._mode = _DONE
        self.done = True

    def _chunks(self) -> bytes:
        buffer = self._buffer
        pos = 0
        out: list[bytes] = []
        while True:
            if self._in_trailers:
                end = buffer.find(b"\r\n", pos)
                if end < 0:
                    break
                line_empty = end == pos
                pos = end + 2
                if line_empty:
                    self._finish()
                    break
                continue
            left = self._chunk_left
            if left < 0:
                end = buffer.find(b"\r\n", pos)
                if end < 0:
                    if len(buffer) - pos > _MAX_CHUNK_LINE:
                        raise ProtocolError("chunk size line too long")
                    break
                size_text = buffer[pos:end].split(b";", 1)[0].strip(b" \t")
                if not _HEX.match(size_text):
                    raise ProtocolError(f"invalid chunk size {size_text[:20]!r}")
                size = int(size_text, 16)
                pos = end + 2
                if size == 0:
                    self._in_trailers = True
                    continue
                self._chunk_left = left = size
            available = len(buffer) - pos
            if available <= 0:
                break
            if available < left:
                out.append(buffer[pos:])
                self._chunk_left = left - available
                pos = len(buffer)
                break
            out.append(buffer[pos : pos + left])
            pos += left
            # The CRLF after the chunk data.
            if len(buffer) - pos < 2:
                self._chunk_left = 0
                if len(buffer) - pos == 1 and buffer[pos : pos + 1] != b"\r":
                    raise ProtocolError("missing CRLF after chunk data")
                # Wait for the CRLF; keep what is there.
                self._buffer = buffer[pos:]
                return b"".join(out) if out else b""
            if buffer[pos : pos + 2] != b"\r\n":
                raise ProtocolError("missing CRLF after chunk data")
            pos += 2
            self._chunk_left = -1
        self._buffer = buffer[pos:]
        return b"".join(out) if len(out) != 1 else out[0]


# ---------------------------------------------------------------------------- responses

HEAD_FIELDS = (
    b"Date: Tue, 01 Dec 2026 04:40:37 GMT\r\n"
    b"Content-Type: {type}\r\n"
    b"{framing}"
    b"Connection: keep-alive\r\n"
    b"access-control-expose-headers: X-Request-ID\r\n"
    b"openai-organization: user-abcdefghijklmnopqrstuvwx\r\n"
    b"openai-processing-ms: 412\r\n"
    b"openai-version: 2020-10-01\r\n"
    b"x-ratelimit-limit-requests: 10000\r\n"
    b"x-ratelimit-limit-tokens: 30000000\r\n"
    b"x-ratelimit-remaining-requests: 9999\r\n"
    b"x-ratelimit-remaining-tokens: 29999975\r\n"
    b"x-ratelimit-reset-requests: 6ms\r\n"
    b"x-ratelimit-reset-tokens: 0s\r\n"
    b"x-request-id: req_0123456789abcdef0123456789abcdef\r\n"
    b"strict-transport-security: max-age=31536000; includeSubDomains; preload\r\n"
    b"cf-cache-status: DYNAMIC\r\n"
    b"X-Content-Type-Options: nosniff\r\n"
    b"Server: cloudflare\r\n"
    b"CF-RAY: 8f0123456789abcd-AMS\r\n"
    b"alt-svc: h3=\":443\"; ma=86400\r\n"
)


def head(content_type: bytes, framing: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + HEAD_FIELDS.replace(b"{type}", content_type).replace(b"{framing}", framing) + b"\r\n"


COMPLETION = (
    b'{"id":"chatcmpl-0123456789","object":"chat.completion","created":1764564037,"model":"gpt-4o-2024-08-06",'
    b'"choices":[{"index":0,"message":{"role":"assistant","content":"' + b"Sure, here is the answer you asked for. " * 8 + b'",'
    b'"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":57,"completion_tokens":80,'
    b'"total_tokens":137},"system_fingerprint":"fp_0123456789"}'
)
NON_STREAMING = [head(b"application/json", b"Content-Length: %d\r\n" % len(COMPLETION)) + COMPLETION]


def sse_event(i: int) -> bytes:
    return (
        b'data: {"id":"chatcmpl-0123456789","object":"chat.completion.chunk","created":1764564037,'
        b'"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_0123456789","choices":[{"index":0,'
        b'"delta":{"content":" token%d"},"logprobs":null,"finish_reason":null}]}\n\n' % i
    )


EVENTS = [sse_event(i) for i in range(40)] + [b"data: [DONE]\n\n"]
CHUNKS = [b"%x\r\n%s\r\n" % (len(event), event) for event in EVENTS] + [b"0\r\n\r\n"]
STREAM_HEAD = head(b"text/event-stream; charset=utf-8", b"Transfer-Encoding: chunked\r\n")
# A live stream: the head with the first chunk, then one network read per chunk.
STREAMING_LIVE = [STREAM_HEAD + CHUNKS[0], *CHUNKS[1:]]
STREAMING_BUFFERED = [STREAM_HEAD + b"".join(CHUNKS)]
SHAPES = [
    ("chat completion, Content-Length, 1 read", NON_STREAMING),
    ("stream of 41 events, chunked, 1 read per chunk", STREAMING_LIVE),
    ("stream of 41 events, chunked, 1 read", STREAMING_BUFFERED),
]
BODY_SIZES = {name: None for name, _ in SHAPES}

# ---------------------------------------------------------------------------- parse cost


def parse_with(reader_class: type) -> Callable[[list[bytes]], int]:
    reader = reader_class()

    def parse(reads: list[bytes]) -> int:
        size = 0
        parsed = None
        for data in reads:
            reader.feed(data)
            if parsed is None:
                parsed = reader.head()
                if parsed is None:
                    continue
            size += len(reader.body())
        assert reader.done and reader.next_response()
        return size

    return parse


def parse_with_h11() -> Callable[[list[bytes]], int]:
    conn = h11.Connection(h11.CLIENT)
    request = h11.Request(method="POST", target="/v1/chat/completions", headers=[("Host", "api"), ("Content-Length", "0")])

    def parse(reads: list[bytes]) -> int:
        # Sending the request is h11's state machine, not parsing: untimed.
        conn.send(request)
        conn.send(h11.EndOfMessage())
        start = time.perf_counter_ns()
        size = 0
        for data in reads:
            conn.receive_data(data)
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    break
                if type(event) is h11.Data:
                    size += len(event.data)
                elif type(event) is h11.EndOfMessage:
                    break
        conn.start_next_cycle()
        parse.elapsed += time.perf_counter_ns() - start  # type: ignore[attr-defined]
        return size

    parse.elapsed = 0  # type: ignore[attr-defined]
    return parse


def time_parse(make: Callable[[], Callable[[list[bytes]], int]], reads: list[bytes], n: int, rounds: int = 5) -> tuple[float, int]:
    """Best of ``rounds``: microseconds per response, and the body size each gave."""
    best = float("inf")
    size = 0
    for _ in range(rounds):
        parse = make()
        parse(reads)  # warm-up
        if hasattr(parse, "elapsed"):
            parse.elapsed = 0
        start = time.perf_counter_ns()
        for _ in range(n):
            size = parse(reads)
        total = getattr(parse, "elapsed", None) or (time.perf_counter_ns() - start)
        best = min(best, total / n / 1000)
    return best, size


# ---------------------------------------------------------------------------- whole requests


async def serve_canned(stream: trio.SocketStream) -> None:
    """Answer each request with the canned responses above: ``/stream`` chunk by chunk, anything else the completion."""
    buffer = b""
    try:
        while True:
            while b"\r\n\r\n" not in buffer:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            end = buffer.index(b"\r\n\r\n") + 4
            match = re.search(rb"(?i)\r\ncontent-length: *(\d+)", buffer[:end])
            length = int(match.group(1)) if match else 0
            while len(buffer) < end + length:
                buffer += await stream.receive_some(65536)
            live = buffer.startswith(b"POST /stream ")
            buffer = buffer[end + length :]
            for data in STREAMING_LIVE if live else NON_STREAMING:
                await stream.send_all(data)
    except trio.BrokenResourceError:
        pass


async def serve_forever() -> None:
    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(functools.partial(trio.serve_tcp, serve_canned, 0, host="127.0.0.1"))
        print(listener.socket.getsockname()[1], flush=True)
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()


def start_server() -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    return process, int(process.stdout.readline())


class Client:
    """One ``httpx.AsyncClient`` on one transport, and its best CPU per request so far."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None, reader: type | None = None) -> None:
        self.client = httpx.AsyncClient(transport=transport) if transport is not None else httpx.AsyncClient()
        self.reader = reader
        self.best = float("inf")

    async def measure(self, url: str, n: int) -> None:
        """Send ``n`` requests one after another; keep this process's CPU microseconds per request if best."""
        body = {"model": "m", "messages": [{"role": "user", "content": "go"}]}
        client = self.client
        if self.reader is not None:
            _transport.ResponseReader = self.reader  # type: ignore[misc]
        try:
            cpu = time.process_time()
            for _ in range(n):
                async with client.stream("POST", url, json=body) as response:
                    async for _ in response.aiter_raw():
                        pass
                    assert response.status_code == 200
            self.best = min(self.best, (time.process_time() - cpu) / n * 1e6)
        finally:
            _transport.ResponseReader = ResponseReader  # type: ignore[misc]


async def whole_requests(rounds: int = 15, n: int = 300) -> list[tuple[str, float, float, float]]:
    """Rounds interleave the three clients, so load from elsewhere on the machine hits them alike."""
    process, port = start_server()
    rows = []
    try:
        for stream in (False, True):
            url = f"http://127.0.0.1:{port}/{'stream' if stream else 'complete'}"
            old, new, default = Client(TrioTransport(), OldResponseReader), Client(TrioTransport()), Client(None)
            for client in (old, new, default):
                await client.measure(url, 20)  # warm-up: the connection, caches
                client.best = float("inf")
            for _ in range(rounds):
                for client in (old, new, default):
                    await client.measure(url, n)
            for client in (old, new, default):
                await client.client.aclose()
            rows.append(("stream of 41 events, chunk by chunk" if stream else "chat completion, Content-Length", old.best, new.best, default.best))
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)
    return rows


def main() -> None:
    versions = ", ".join(
        f"{name} {version(name)}" for name in ("httptools", "h11", "httpcore", "httpx", "trio")
    )
    print(f"{datetime.date.today()}  Python {platform.python_version()}  {versions}")
    print("\n1. parse cost per response, microseconds (best of 5), ratio to the old codec")
    print(f"  {'response':<48} {'old codec':>10} {'httptools':>10} {'h11':>10}   {'old/httptools':>13} {'h11/httptools':>13}")
    for name, reads in SHAPES:
        n = 20000 if len(reads) == 1 and "completion" in name else 5000
        old, old_size = time_parse(lambda: parse_with(OldResponseReader), reads, n)
        new, new_size = time_parse(lambda: parse_with(ResponseReader), reads, n)
        h11_cost, h11_size = time_parse(parse_with_h11, reads, n)
        assert old_size == new_size == h11_size, (old_size, new_size, h11_size)
        print(f"  {name:<48} {old:10.2f} {new:10.2f} {h11_cost:10.2f}   {old / new:12.2f}x {h11_cost / new:12.2f}x")
    print("\n2. client CPU per request through httpx.AsyncClient, microseconds (best of 15 interleaved rounds of 300 sequential requests)")
    print(f"  {'request':<34} {'TrioTransport+old':>18} {'TrioTransport':>14} {'httpx default':>14}   {'old/new':>8} {'default/new':>11}")
    for name, old, new, httpcore in trio.run(whole_requests):
        print(f"  {name:<34} {old:18.1f} {new:14.1f} {httpcore:14.1f}   {old / new:7.2f}x {httpcore / new:10.2f}x")


async def client_only(variant: str, url: str, n: int) -> None:
    reader = OldResponseReader if variant == "old" else None
    client = Client(None if variant == "default" else TrioTransport(), reader)
    await client.measure(url, n)
    await client.client.aclose()


PARSERS: dict[str, Callable[[], Callable[[list[bytes]], int]]] = {
    "old codec": lambda: parse_with(OldResponseReader),
    "httptools": lambda: parse_with(ResponseReader),
    "h11": parse_with_h11,
}


def parse_only(parser: str, shape: int, n: int) -> None:
    parse = PARSERS[parser]()
    reads = SHAPES[shape][1]
    for _ in range(n):
        parse(reads)


def instructions(extra: int = 300) -> None:
    """Parsing and whole requests counted in CPU instructions under valgrind (callgrind).

    Each variant runs in a fresh process with 1 and with 1 + ``extra``
    requests (``extra`` x 10 parses); the difference over that number is its
    instructions per request (or response parsed).
    """

    def count(arguments: list[str]) -> int:
        result = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, *arguments],
            capture_output=True,
            text=True,
            check=True,
        )
        match = re.search(r"Collected : (\d+)", result.stderr)
        assert match, result.stderr[-2000:]
        return int(match.group(1))

    print(f"\n3. parse instructions per response (valgrind callgrind, {extra * 10} responses over 1), thousands")
    print(f"  {'response':<48} {'old codec':>10} {'httptools':>10} {'h11':>10}   {'old/httptools':>13} {'h11/httptools':>13}")
    parse_base = {p: count(["--parse", p, "0", "1"]) for p in PARSERS}
    for index, (name, _) in enumerate(SHAPES):
        cost = {p: (count(["--parse", p, str(index), str(1 + extra * 10)]) - parse_base[p]) / extra / 10 / 1000 for p in PARSERS}
        old, new, h11_cost = cost["old codec"], cost["httptools"], cost["h11"]
        print(f"  {name:<48} {old:10.1f} {new:10.1f} {h11_cost:10.1f}   {old / new:12.2f}x {h11_cost / new:12.2f}x")
    process, port = start_server()
    try:
        print(f"\n4. client instructions per request (valgrind callgrind, {extra} sequential requests over 1), thousands")
        print(f"  {'request':<34} {'TrioTransport+old':>18} {'TrioTransport':>14} {'httpx default':>14}   {'old/new':>8} {'default/new':>11}")
        variants = ("old", "new", "default")
        base = {v: count(["--client", v, f"http://127.0.0.1:{port}/complete", "1"]) for v in variants}
        for path, name in (("complete", "chat completion, Content-Length"), ("stream", "stream of 41 events, chunk by chunk")):
            url = f"http://127.0.0.1:{port}/{path}"
            per = {v: (count(["--client", v, url, str(1 + extra)]) - base[v]) / extra / 1000 for v in variants}
            old, new, default = per["old"], per["new"], per["default"]
            print(f"  {name:<34} {old:18.0f} {new:14.0f} {default:14.0f}   {old / new:7.2f}x {default / new:10.2f}x")
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        trio.run(serve_forever)
    elif sys.argv[1:2] == ["--client"]:
        trio.run(client_only, sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1:2] == ["--parse"]:
        parse_only(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1:] == ["--instructions"]:
        instructions()
    else:
        main()
