"""Building blocks for new provider protocols (like :mod:`trio.lowlevel`: public, weaker promises).

A provider for another wire protocol subclasses :class:`HttpModel` (one
module per protocol, as :mod:`condukt.providers.anthropic` and
:mod:`condukt.providers.openai` do), parses streams with
:class:`SSEDecoder` into :class:`ServerSentEvent`\\ s and builds the
response with a :class:`StreamAssembler`. :class:`TrioTransport` is the
HTTP/1.1 transport the node's shared ``httpx.AsyncClient`` uses; its
:meth:`~TrioTransport.exchange` returns a :class:`RawResponse` (no httpx objects),
and :meth:`~TrioTransport.exchange_prepared` does so for a head encoded once
(a :class:`PreparedRequest`). :func:`model_settings` checks a
``model_settings`` option (``None``, a :class:`~condukt.ModelSettings` or
a mapping of its fields).
"""

from ._http.model import HttpModel, StreamAssembler
from ._http.sse import ServerSentEvent, SSEDecoder
from ._http.transport import PreparedRequest, RawResponse, TrioTransport
from ._settings import model_settings

__all__ = [
    "HttpModel",
    "PreparedRequest",
    "RawResponse",
    "SSEDecoder",
    "ServerSentEvent",
    "StreamAssembler",
    "TrioTransport",
    "model_settings",
]
