"""uvicorn with a time limit on reading a request's headers (slowloris): :class:`HTTPProtocol`.

uvicorn has no such limit: a client that sends its headers a byte at a
time, or connects and sends nothing, holds its connection (a file
descriptor, a task) for as long as it likes; its ``timeout_keep_alive``
only runs between two requests. Measured in this project's hardening
report: 0 of 100 such connections closed after 12 s, where hypercorn
closed them all. :class:`HTTPProtocol` is uvicorn's own httptools
protocol (the one ``http="auto"`` picks, since httptools is a core
dependency of condukt) plus that limit: a connection whose request
headers are not complete :data:`HEADER_TIMEOUT` seconds after it opened,
or after the first byte of its next request, is closed::

    uvicorn myservice:app --http condukt.web.uvicorn:HTTPProtocol --limit-concurrency 1000

or ``uvicorn.run(app, http=condukt.web.uvicorn.HTTPProtocol, ...)``.
What it cannot do: limit a body sent slowly once the headers are in (the
endpoint's runs have ``run_timeout``; a reverse proxy such as nginx,
``client_body_timeout``, covers the rest), or bound the number of
connections (``--limit-concurrency`` does, with 503s beyond). In
production, a reverse proxy in front of uvicorn is the usual answer to all
of it. hypercorn (``condukt serve``) closes such connections itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("condukt.web.uvicorn needs uvicorn (with httptools, a condukt dependency): "
                      "`pip install uvicorn`") from exc

__all__ = ["HEADER_TIMEOUT", "HTTPProtocol"]

#: Seconds a client has to send a request's headers (what nginx's ``client_header_timeout`` is, 60 s, is for
#: clients across the internet; an API's clients send theirs in one packet).
HEADER_TIMEOUT = 10.0


class HTTPProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request headers take longer than ``header_timeout``.

    Subclass to change the limit: ``class Patient(HTTPProtocol): header_timeout = 30.0``.
    """

    header_timeout: float = HEADER_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a client that connects and sends nothing is timed too

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()  # the next request of a kept-alive connection

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()
