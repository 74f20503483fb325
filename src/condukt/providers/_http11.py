"""A minimal HTTP/1.1 client codec: request serialisation and an incremental response reader.

Why not h11: it is correct and well kept, but on condukt's hot path (two
small requests per agent run, and streamed bodies of many small chunks) it
cost about a quarter of the transport's CPU, mostly in per-event state
machinery and one event per chunk. This codec does only what a client
needs: it writes a request in one buffer, parses the status line and
headers, and reads bodies framed by ``Content-Length``, ``chunked`` (all
complete chunks already received are returned at once) or the connection
closing. It rejects what it does not understand (header folding, bad chunk
sizes, oversized heads) with :class:`ProtocolError`.
"""

from __future__ import annotations

import re

__all__ = ["MAX_HEAD", "ProtocolError", "ResponseHead", "ResponseReader", "encode_request"]

#: The largest response head (status line and headers) accepted.
MAX_HEAD = 64 * 1024
_MAX_CHUNK_LINE = 4096

_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")
_HEX = re.compile(rb"^[0-9A-Fa-f]{1,16}$")
_STATUS = re.compile(rb"^HTTP/1\.([01]) (\d{3})(?: (.*))?$")


class ProtocolError(Exception):
    """The peer broke HTTP/1.1 (or a request could not be written as HTTP/1.1)."""


def encode_request(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes | None) -> bytes:
    """The request's bytes: request line, headers and ``body`` (``None``: the body follows chunked).

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
    head = b"\r\n".join(lines) + b"\r\n"
    return head + body if body else head


class ResponseHead:
    """A parsed status line and headers."""

    __slots__ = ("headers", "keep_alive", "reason", "status_code")

    def __init__(self, status_code: int, reason: bytes, headers: list[tuple[bytes, bytes]], keep_alive: bool) -> None:
        self.status_code = status_code
        self.reason = reason
        self.headers = headers
        self.keep_alive = keep_alive


_LENGTH, _CHUNKED, _UNTIL_CLOSE, _DONE = range(4)


class ResponseReader:
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

    def head(self, head_request: bool = False) -> ResponseHead | None:
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
            return ResponseHead(status, reason or b"", headers, self.keep_alive)

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
