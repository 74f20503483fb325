"""The HTTP/1.1 client codec: request serialisation, and a response reader on llhttp.

Responses are parsed by httptools (llhttp, the parser behind Node.js and
uvicorn): it validates the status line, header names and values (no NUL, CR,
LF or other control characters), ``Content-Length`` (one value, digits only)
and chunked framing, and hands over body bytes without copying them through
Python line by line. This module adds what llhttp leaves to its caller: it
bounds the response head (:data:`MAX_HEAD`) and the bytes of chunk
extensions and trailers, fails at once on a head whose lines do not end in
CRLF (instead of waiting for a terminator that never comes), unfolds
obs-fold header lines into one value, accepts any ``HTTP/1.x`` status line
(``1.2`` and later as 1.1), skips ``1xx`` responses, and refuses every
transfer coding but ``chunked`` (a ``gzip`` transfer coding cannot be decoded
by httpx, whose decoders act on ``Content-Encoding``; passing its bytes on
as the body would hand garbage to the caller). Every refusal is a
:class:`ProtocolError`.

Requests are written by :func:`encode_request` (or :func:`encode_head`), in one buffer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import httptools

__all__ = [
    "MAX_FRAMING",
    "MAX_HEAD",
    "ProtocolError",
    "ResponseHead",
    "ResponseReader",
    "encode_head",
    "encode_request",
]

#: The largest response head (status line and headers) accepted, in bytes.
MAX_HEAD = 64 * 1024
#: The most bytes of chunk framing (size lines, extensions, trailers) accepted
#: between two pieces of body data; checked per network read, so the bound
#: is this plus one read.
MAX_FRAMING = 64 * 1024

_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")
_FOLD = re.compile(rb"[ \t]*\r\n[ \t]+")
_NO_BODY = (204, 304)


class ProtocolError(Exception):
    """The peer broke HTTP/1.1 (or a request could not be written as HTTP/1.1)."""


def encode_head(method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The request line and ``headers``, each line ending in CRLF, without the blank line that ends the head.

    Raises :class:`ProtocolError` for a header name that is not a token or a
    value or target holding CR, LF or NUL (no header injection).
    """
    if _BAD_VALUE.search(target) or b" " in target:
        raise ProtocolError(f"invalid request target {target!r}")
    lines = [method + b" " + target + b" HTTP/1.1"]
    for name, value in headers:
        if not _TOKEN.match(name) or _BAD_VALUE.search(value):
            raise ProtocolError(f"invalid header {name!r}")
        lines.append(name + b": " + value)
    lines.append(b"")
    return b"\r\n".join(lines)


def encode_headers(headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """Header lines, each ending in CRLF; :class:`ProtocolError` as :func:`encode_head` raises it."""
    lines = []
    for name, value in headers:
        if not _TOKEN.match(name) or _BAD_VALUE.search(value):
            raise ProtocolError(f"invalid header {name!r}")
        lines.append(name + b": " + value + b"\r\n")
    return b"".join(lines)


def encode_request(
    method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes | None
) -> bytes:
    """The request's bytes: request line, headers and ``body`` (``None``: the body follows chunked).

    Raises :class:`ProtocolError` as :func:`encode_head` does.
    """
    head = encode_head(method, target, headers) + b"\r\n"
    return head + body if body else head


class ResponseHead:
    """A parsed status line and headers."""

    __slots__ = ("headers", "keep_alive", "reason", "status_code")

    def __init__(self, status_code: int, reason: bytes, headers: list[tuple[bytes, bytes]], keep_alive: bool) -> None:
        self.status_code = status_code
        self.reason = reason
        self.headers = headers
        self.keep_alive = keep_alive


class _AfterResponse(Exception):
    """Raised from the parser's callback when bytes follow a complete response."""


class ResponseReader:
    """Parses one connection's responses from the bytes given to :meth:`feed`.

    Call :meth:`head` until it returns a head (``None``: feed more), then
    :meth:`body` until :attr:`done` (``b""`` with ``done`` false: feed
    more), then :meth:`next_response` to reuse the connection. A malformed
    response raises :class:`ProtocolError` from :meth:`head`, or from
    :meth:`body` once the body bytes before the fault were returned.

    The ``on_*`` methods are llhttp's callbacks, not for callers.
    """

    __slots__ = (
        "_awaiting_head",
        "_buffer",
        "_error",
        "_extra",
        "_framing",
        "_head_complete",
        "_head_only",
        "_headers",
        "_length",
        "_parser",
        "_pieces",
        "_reason",
        "_transfer_encoding",
        "_until_close",
        "done",
        "keep_alive",
    )

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._buffer = b""
        self._awaiting_head = True
        self._head_complete = False
        self._head_only = False
        self._headers: list[tuple[bytes, bytes]] = []
        self._reason = b""
        self._length = False
        self._transfer_encoding: bytes | None = None
        self._until_close = False
        self._pieces: list[bytes] = []
        self._framing = 0
        self._error: ProtocolError | None = None
        self._extra = False
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
        if self._awaiting_head:
            self._buffer = self._buffer + data if self._buffer else data
        elif self.done or self._error is not None:
            # Nothing may follow a response on a connection without pipelining.
            self._extra = True
        else:
            self._parse(data)

    def head(self, head_request: bool = False) -> ResponseHead | None:
        """The next final response head, skipping ``1xx`` ones; ``None`` if incomplete."""
        while self._awaiting_head:
            buffer = self._buffer
            if not buffer:
                return None
            end = buffer.find(b"\r\n\r\n") + 4
            if end < 4:
                _check_partial_head(buffer)
                return None
            if end > MAX_HEAD:
                raise ProtocolError("response head too large")
            raw = buffer[:end]
            head = _normalise_head(raw)
            self._buffer = b""
            self._headers = []
            self._reason = b""
            self._length = False
            self._transfer_encoding = None
            self._head_complete = False
            self.done = False
            self._head_only = head_request
            if head_request or raw[9:10] == b"1":
                # No body follows (a HEAD request, an interim response): the head alone.
                data, rest = head, buffer[end:]
            else:
                data, rest = (buffer if head is raw else head + buffer[end:]), b""
            self._parse(data, len(head))
            if self._error is not None and (data is head or not self._head_complete):
                raise self._error
            if not self._head_complete:
                raise ProtocolError("malformed response head")
            status = self._parser.get_status_code()
            if status < 200:
                # An interim response: the final one follows.
                self._buffer = rest
                continue
            self._awaiting_head = False
            if head_request:
                self.done = True
                self._extra = bool(rest)
            return ResponseHead(status, self._reason, self._headers, self.keep_alive)
        return None

    def body(self) -> bytes:
        """The body bytes available now (``b""``: none; check :attr:`done`)."""
        pieces = self._pieces
        if pieces:
            self._pieces = []
            return pieces[0] if len(pieces) == 1 else b"".join(pieces)
        if self._error is not None:
            raise self._error
        return b""

    def eof(self) -> None:
        """The server closed the connection: ends a close-delimited body, else :class:`ProtocolError`."""
        if self._awaiting_head:
            if self._buffer:
                raise ProtocolError("the server closed the connection in the middle of the response head")
            raise ProtocolError("the server closed the connection without sending a response")
        self._extra = True
        if self.done:
            return
        if self._error is not None:
            raise self._error
        if self._until_close:
            self.done = True
            return
        raise ProtocolError("the server closed the connection before the response was complete")

    def next_response(self) -> bool:
        """Prepare for the next response on this connection; ``False`` if it cannot carry one."""
        if not (self.done and self.keep_alive) or self._extra or self._error is not None:
            return False
        if self._head_only:
            # The parser still expects the body a HEAD response announces but never sends.
            self._parser = httptools.HttpResponseParser(self)
        self._awaiting_head = True
        self._pieces = []
        self._framing = 0
        return True

    def _parse(self, data: bytes, head: int = 0) -> None:
        """Feed llhttp; keep its complaint in :attr:`_error` (``head``: bytes of ``data`` that are the head)."""
        pieces = self._pieces
        before = len(pieces)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            error = _callback_error(exc)
            if isinstance(error, _AfterResponse):
                self._extra = True
            else:
                self._error = error
        except httptools.HttpParserError as exc:
            if self.done:
                self._extra = True  # junk after the response
            else:
                part = "body" if self._head_complete else "head"
                self._error = ProtocolError(f"malformed response {part}: {exc}")
        except httptools.HttpParserUpgrade:
            self._error = ProtocolError("protocol switch (101) is not supported")
        # Framing is bounded between pieces of data: chunk-size lines are
        # small, so only extensions and trailers can grow past the bound.
        if len(pieces) > before:
            self._framing = 0
        else:
            self._framing += len(data) - head
        if self._framing > MAX_FRAMING and self._error is None and not self.done:
            self._error = ProtocolError("chunk extensions or trailers too large")

    # llhttp callbacks

    def on_message_begin(self) -> None:
        if self.done:
            raise _AfterResponse

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._head_complete:
            return  # a trailer field: bounded, then dropped
        size = len(name)
        if size == 14 and name.lower() == b"content-length":
            self._length = True
        elif size == 17 and name.lower() == b"transfer-encoding":
            previous = self._transfer_encoding
            self._transfer_encoding = value if previous is None else previous + b", " + value
        self._headers.append((name, value.rstrip(b" \t")))

    def on_headers_complete(self) -> None:
        parser = self._parser
        status = parser.get_status_code()
        self.keep_alive = parser.should_keep_alive()
        if status < 200 or status in _NO_BODY or self._head_only:
            self._until_close = False
            self._head_complete = True
            return
        coding = self._transfer_encoding
        if coding is not None and coding.strip(b" \t").lower() != b"chunked":
            raise ProtocolError(
                f"unsupported Transfer-Encoding {coding.decode('latin-1')!r} (only chunked can be decoded)"
            )
        self._until_close = until_close = coding is None and not self._length
        if until_close:
            self.keep_alive = False
        self._head_complete = True

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        if self._head_complete and self._parser.get_status_code() >= 200:
            self.done = True


def _callback_error(exc: httptools.HttpParserCallbackError) -> ProtocolError | _AfterResponse:
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, (ProtocolError, _AfterResponse)):
        return cause
    return ProtocolError(f"malformed response: {cause or exc}")


def _check_partial_head(buffer: bytes) -> None:
    """Fail now, not at the read timeout, on a head that can never be complete."""
    if len(buffer) > MAX_HEAD:
        raise ProtocolError("response head too large")
    if buffer[:5] != b"HTTP/"[: len(buffer)]:
        raise ProtocolError(f"malformed status line {buffer[:100]!r}")
    crlf = buffer.count(b"\r\n")
    if buffer.count(b"\n") != crlf or buffer.count(b"\r") - buffer.endswith(b"\r") != crlf:
        raise ProtocolError("malformed response head: lines must end in CRLF")


def _normalise_head(head: bytes) -> bytes:
    """The head as llhttp accepts it: any ``HTTP/1.x`` read as 1.1, obs-fold unfolded."""
    if head[:7] != b"HTTP/1." or head[8:9] != b" " or not head[7:8].isdigit():
        line = head[: head.find(b"\r\n")]
        raise ProtocolError(f"unsupported or malformed status line {line[:100]!r}")
    if head[7] not in b"01":
        head = b"HTTP/1.1" + head[8:]
    if b"\n " in head or b"\n\t" in head:
        first = head.find(b"\r\n")
        if head[first + 2 : first + 3] in (b" ", b"\t"):
            raise ProtocolError("malformed response head: whitespace before the first header")
        head = _FOLD.sub(b" ", head)
    return head
