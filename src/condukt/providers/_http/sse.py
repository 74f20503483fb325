"""Server-sent events: an incremental decoder for ``text/event-stream`` bodies.

Follows the WHATWG event-stream grammar: lines end in CR, LF or CRLF
(``bytes.splitlines`` splits on exactly those), ``:`` starts a comment, a
blank line dispatches the event, ``data`` lines are joined with LF, one
space after the colon is dropped, and an event still open at the end of the
body is discarded. httpx has no SSE support of its own, and the one
maintained add-on (httpx-sse) re-decodes each line to ``str`` through
httpx's line decoder; this decoder splits bytes once per network chunk and
decodes only the fields, which is what the streaming hot path wants.
"""

from __future__ import annotations

import attrs

__all__ = ["SSEDecoder", "ServerSentEvent"]


@attrs.frozen(slots=True)
class ServerSentEvent:
    """One dispatched event: its type (``"message"`` unless named) and its data."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed body chunks with :meth:`feed`; get back the events they complete."""

    __slots__ = ("_after_cr", "_data", "_event", "_id", "_pending", "_retry")

    def __init__(self) -> None:
        self._pending = b""
        self._after_cr = False
        self._event = ""
        self._data: list[bytes] = []
        self._id: str | None = None
        self._retry: int | None = None

    @property
    def has_partial_event(self) -> bool:
        """Whether bytes or fields of an undispatched event are buffered."""
        return bool(self._pending or self._data or self._event)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events completed by ``chunk`` (which may end mid-line)."""
        if self._after_cr:
            # The previous chunk ended in CR: a LF starting this one belongs to it.
            self._after_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer = self._pending + chunk if self._pending else chunk
        lines = buffer.splitlines(keepends=True)
        if not lines:
            return []
        last = lines[-1]
        if last[-1:] == b"\n":
            self._pending = b""
        elif last[-1:] == b"\r":
            self._pending = b""
            self._after_cr = True
        else:
            self._pending = lines.pop()  # an unterminated line waits for the rest
        events: list[ServerSentEvent] = []
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            if not line:
                if self._data:
                    events.append(
                        ServerSentEvent(
                            self._event or "message",
                            b"\n".join(self._data).decode("utf-8", "replace"),
                            self._id,
                            self._retry,
                        )
                    )
                self._event = ""
                self._data = []
                continue
            field, colon, value = line.partition(b":")
            if not field:
                continue  # a comment (keep-alive)
            if colon and value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                self._data.append(value)
            elif field == b"event":
                self._event = value.decode("utf-8", "replace")
            elif field == b"id" and b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
            elif field == b"retry" and value.isdigit():
                self._retry = int(value)
        return events
