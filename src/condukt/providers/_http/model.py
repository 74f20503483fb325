"""What every HTTP provider shares: the request loop, retries, limits, decoding, errors.

A protocol module (:mod:`~condukt.providers.anthropic`,
:mod:`~condukt.providers.openai`) subclasses :class:`HttpModel` and supplies
the wire format: headers, request encoding, the response parser and a
stream assembler. Everything else (the node's shared client and limits,
retries with backoff, error mapping, cancellation) lives here, once.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import attrs
import httpx
import trio

from ...events import Event, Retry, TextDelta, ThinkingDelta, ToolCallDelta
from ...messages import AssistantMessage, DocumentBlock, StopReason, TextBlock, ThinkingBlock, UserMessage
from ...otp import current_node
from .._errors import (
    EmptyPrompt,
    InvalidRequest,
    InvalidResponse,
    ModelRefused,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    StreamError,
    UnsupportedContent,
    UnsupportedSetting,
)
from .._model import Emit, ModelRequest
from .._prices import Price, cached_price, lookup_price, price_option
from .._wire import WireError, loads
from .errors import error_details, error_for_type
from .node import DEFAULT_BASE_URLS, NodeHttp, endpoint_name, node_http
from .retry import RetryPolicy, parse_retry_after, retry_policy
from .sse import ServerSentEvent, SSEDecoder
from .transport import PreparedRequest, TrioTransport

__all__ = ["HttpModel", "StreamAssembler", "StreamDecoder"]


class StreamDecoder(Protocol):
    """Cuts a streamed body into events: ``feed(chunk)`` returns the events ``chunk`` completes."""

    def feed(self, chunk: bytes) -> Sequence[Any]:
        """The events completed by ``chunk`` (which may end anywhere)."""
        ...

logger = logging.getLogger("condukt.providers")

_UNSET: Any = object()
#: The most of a provider's error message kept in an exception.
_MAX_MESSAGE = 2000
#: Failures that mean "too much traffic": an adaptive concurrency limit backs off on them.
_OVERLOAD_STATUSES = frozenset({429, 503, 529})
#: What a malformed response may raise while it is decoded, besides :class:`WireError`:
#: the catch-all of the decoding boundary (anything else is a bug and propagates).
_DECODE_ERRORS = (LookupError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError)
#: Stop reasons that are not an answer: :meth:`HttpModel.complete` raises :class:`ModelRefused`.
_REFUSALS = frozenset({StopReason.REFUSAL, StopReason.CONTENT_FILTER})


def _has_prompt(message: Any) -> bool:
    if type(message) is not UserMessage:
        return True
    # An image or a document is something to answer, even without text.
    return any(type(block) is not TextBlock or block.text.strip() for block in message.content)


class StreamAssembler(abc.ABC):
    """Builds one :class:`AssistantMessage` from a provider's server-sent events.

    :meth:`take` and :meth:`finish` only decode: on a malformed event they
    may raise a ``ValueError``, ``TypeError``, ``LookupError``... (ideally a
    ``ValueError`` naming the field), and :class:`HttpModel` turns that into
    a :class:`StreamError` (see :meth:`HttpModel.decode_event`).
    """

    @abc.abstractmethod
    def take(self, event: ServerSentEvent) -> Sequence[Event]:
        """Take one event; return the text and thinking deltas it carries, to be emitted in order.

        Raises :class:`ProviderError` for an error event.
        """

    @abc.abstractmethod
    def finish(self) -> AssistantMessage:
        """The message, once the body ended; :class:`StreamError` if the stream stopped short."""

    async def feed(self, event: ServerSentEvent, emit: Emit) -> None:
        """:meth:`take` ``event`` and emit its deltas (no decoding guard: see :meth:`HttpModel.decode_event`).

        Its only checkpoints are in ``emit``: a cancellation there propagates,
        and the assembler is then abandoned with its attempt.
        """
        for delta in self.take(event):
            await emit(delta)


class _Attempt:
    """One attempt at a request: how to emit its events, and whether it emitted content.

    One object per attempt, where closures would make a function, its cells
    and their tuple for each callback (objects the collector walks while
    the request waits on the network, thousands of times over with
    thousands of agents).
    """

    __slots__ = ("emit", "emitted", "number", "provider", "wanted")

    def __init__(self, emit: Emit, number: int, provider: str, wanted: tuple[str, ...] = ()) -> None:
        self.emit = emit
        #: The tools whose streamed arguments the request asked for (``ModelRequest.stream_arguments``).
        self.wanted = wanted
        #: Whether content (a delta) was emitted: the attempt can no longer be retried.
        self.emitted = False
        self.number = number
        self.provider = provider

    async def event(self, event: Event) -> None:
        """Emit a content event (and remember that one was); argument pieces only of the tools asked for."""
        if type(event) is ToolCallDelta and event.name not in self.wanted:
            return
        self.emitted = True
        await self.emit(event)

    async def resend(self, reason: str) -> None:
        """The transport sends the request again on a new connection: a :class:`Retry` event says so."""
        await self.emit(Retry(self.provider, self.number, reason, 0.0))


class HttpModel(abc.ABC):
    """A :class:`~condukt.providers.Model` spoken over HTTP through the node's shared client.

    Options (all keyword, also given as an agent's ``model_options``):
    ``stream`` (default ``True``: server-sent events, deltas emitted as they
    arrive), ``retry`` (``True``, ``False``, an attempt count, or a
    :class:`~condukt.providers.RetryPolicy`), ``max_concurrency``,
    ``requests_per_minute``, ``tokens_per_minute`` (node-wide limits for this
    provider endpoint; given here they reconfigure them), ``timeout``
    (seconds to connect and between two chunks of the response),
    ``max_tokens`` (default output cap), ``headers`` (extra request
    headers), ``extra_body`` (extra top-level request fields),
    ``http_client`` (an ``httpx.AsyncClient`` to use instead of the node's)
    and ``prices`` (a :class:`~condukt.providers.Price` or ``(input,
    output)`` dollars per million tokens for ``Usage.cost``; by default the
    ``genai-prices`` table's, when installed; ``False``: no cost).

    ``complete`` retries what is worth retrying (see
    :class:`~condukt.providers.RetryPolicy`) as long as nothing was streamed
    yet, emitting a :class:`~condukt.events.Retry` event before each new
    attempt. Cancelling it closes the request's connection at once.

    Decoding is total: whatever a server sends, ``complete`` returns a
    message or raises a :class:`~condukt.providers.ProviderError`
    (:class:`~condukt.providers.InvalidResponse` naming the field that broke
    the protocol). :meth:`decode_response`, :meth:`decode_event`,
    :meth:`decode_end` and :meth:`decode_stream` are that boundary, usable
    without a server.
    """

    #: The endpoint path appended to the base URL.
    path: ClassVar[str]
    #: The protocol's name, as errors about what it cannot carry say it.
    protocol: ClassVar[str] = "this protocol"

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: str | None = None,
        api_key: str | None = None,
        node: Any = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        retry: Any = True,
        max_concurrency: Any = _UNSET,
        requests_per_minute: Any = _UNSET,
        tokens_per_minute: Any = _UNSET,
        timeout: float | None = None,
        max_tokens: int | None = None,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        prices: Any = None,
    ) -> None:
        if not model:
            raise ValueError(f"{provider}: empty model name")
        #: The model's name at the provider (``"claude-sonnet-4-5"``).
        self.model = model
        #: The provider prefix (``"anthropic"``, ``"ollama"``...).
        self.provider = provider
        url = base_url or DEFAULT_BASE_URLS.get(provider)
        if not url:
            raise ValueError(f"{provider}: no base_url given and no default for this provider")
        #: Where requests go (``path`` is appended).
        self.base_url = url.rstrip("/")
        self.stream = bool(stream)
        self.retry: RetryPolicy = retry_policy(retry)
        self.max_tokens = max_tokens
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        #: The prices responses are costed at: given, ``None`` (the ``genai-prices`` table) or ``False`` (none).
        self.prices = price_option(prices)
        self._api_key = api_key
        if node is None:
            node = current_node()
        self._owns_services = node is None
        self._services: NodeHttp = NodeHttp() if node is None else node_http(node)
        self._http_client = http_client
        #: The node-wide limits this model shares with every model of its endpoint.
        self.limits = self._services.limits_for(endpoint_name(provider, self.base_url))
        changes = {
            key: value
            for key, value in (
                ("max_concurrency", max_concurrency),
                ("requests_per_minute", requests_per_minute),
                ("tokens_per_minute", tokens_per_minute),
            )
            if value is not _UNSET
        }
        if changes:
            self.limits.configure(**changes)
        self._url = httpx.URL(self.base_url + self.endpoint_path())
        request_headers = {"content-type": "application/json", "accept": "application/json"}
        request_headers.update(self.auth_headers(api_key))
        if stream:
            request_headers["accept"] = self.stream_content_type.decode("ascii")
        request_headers.update(headers or {})
        self._headers = httpx.Headers(request_headers)
        self._raw: list[tuple[bytes, bytes]] | None = None
        self._prepared: PreparedRequest | None = None
        self._timeout = timeout
        self._timeouts: dict[str, float | None] | None = None
        self._head_key: tuple[Any, ...] | None = None
        self._head = b""

    # ------------------------------------------------------------------ protocol

    def endpoint_path(self) -> str:
        """The path appended to the base URL: :attr:`path`, unless the protocol puts the model or
        the streaming mode in it (Gemini's ``/v1beta/models/{model}:streamGenerateContent?alt=sse``).

        Called once, at the end of ``__init__`` (``model`` and ``stream`` are set by then).
        """
        return self.path

    def document_problem(self, block: DocumentBlock) -> str | None:
        """Why this protocol cannot send the document ``block``; ``None`` when it can (the default: any type).

        :meth:`complete` raises :class:`~condukt.providers.UnsupportedContent`
        with this reason for a document of the new prompt, before any
        request; a protocol module sends a short note in place of one
        already in the history (a tool's result, a conversation continued
        from another provider), so the conversation is never stuck on it.
        """
        return None

    #: Whether each request carries headers made for it (:meth:`request_headers`).
    signs_requests: bool = False

    async def request_headers(self, body: bytes) -> Sequence[tuple[bytes, bytes]]:
        """Headers made for one request with ``body``: a signature, a token that expires (the default: none).

        Called before each attempt when :attr:`signs_requests` is set, before
        the request takes a slot of the endpoint's limits. It may wait (a
        credential refresh in a worker thread); cancelling it cancels the
        request before anything is sent. It raises
        :class:`~condukt.providers.MissingCredentials` when no credentials can
        be had: the request is not sent.
        """
        return ()

    #: The content type of a streamed response (the default: server-sent events).
    stream_content_type: ClassVar[bytes] = b"text/event-stream"

    def stream_decoder(self) -> StreamDecoder:
        """A fresh decoder for one streamed body: :class:`SSEDecoder` unless the protocol frames it otherwise.

        Its ``feed(chunk)`` returns the events ``chunk`` completes, each given
        to the assembler's ``take``; it raises a
        :class:`~condukt.providers.StreamError` for bytes that are not the framing.
        """
        return SSEDecoder()

    def describe_error(self, payload: Any, headers: httpx.Headers) -> tuple[str | None, Any, str | None]:
        """``(type, code, message)`` of an error response: its decoded JSON ``payload`` (any value) and its headers.

        The default reads the usual body shapes (:func:`error_details`); a
        protocol whose error type travels in a header overrides it.
        """
        return error_details(payload)

    def setting_problem(self, name: str, request: ModelRequest) -> str | None:
        """Why this protocol cannot take the :class:`~condukt.ModelSettings` setting ``name`` for ``request``;
        ``None`` when it can (the default: every setting).

        :meth:`complete` raises :class:`~condukt.providers.UnsupportedSetting`
        with this reason before any request.
        """
        return None

    def _check_settings(self, request: ModelRequest) -> None:
        settings = request.settings
        if settings is None:
            return
        for name in settings.given():
            reason = self.setting_problem(name, request)
            if reason is not None:
                raise UnsupportedSetting(self.provider, f"{self.protocol}: {reason}", setting=name)

    def _check_documents(self, message: UserMessage) -> None:
        for block in message.content:
            if type(block) is DocumentBlock:
                reason = self.document_problem(block)
                if reason is not None:
                    raise UnsupportedContent(self.provider, reason)

    @abc.abstractmethod
    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The headers that carry the key (and the protocol version)."""

    @abc.abstractmethod
    def encode_head(self, request: ModelRequest) -> bytes:
        """The start of the body, up to the messages: what only changes with the settings."""

    @abc.abstractmethod
    def encode_request(self, request: ModelRequest) -> bytes:
        """The JSON body for ``request`` (built from :meth:`head` and the encoded messages)."""

    @abc.abstractmethod
    def parse_response(self, payload: Any) -> AssistantMessage:
        """The message in a non-streamed response body, decoded JSON of any shape.

        On a malformed body it may raise a ``ValueError``, ``TypeError``,
        ``LookupError``... (ideally a ``ValueError`` naming the field):
        :meth:`decode_response` turns it into :class:`InvalidResponse`.
        """

    @abc.abstractmethod
    def stream_assembler(self) -> StreamAssembler:
        """A fresh assembler for one streamed response."""

    # ------------------------------------------------------------------ decoding

    def _invalid(self, cls: type[InvalidResponse], what: str, exc: BaseException) -> InvalidResponse:
        detail = str(exc) if isinstance(exc, WireError) else f"unexpected shape ({type(exc).__name__}: {exc})"
        return cls(self.provider, self.redact(f"{what}: {detail}"))

    def decode_response(self, body: bytes) -> AssistantMessage:
        """The message in a non-streamed response ``body``.

        Raises :class:`InvalidResponse` (naming the field) for a body that
        is not JSON or not the protocol; never any other exception.
        """
        try:
            payload = loads(body)
        except ValueError as exc:
            raise InvalidResponse(self.provider, f"response is not JSON: {exc}") from None
        try:
            return self.parse_response(payload)
        except ProviderError:
            raise
        except (WireError, *_DECODE_ERRORS) as exc:
            raise self._invalid(InvalidResponse, "invalid response", exc) from None

    def decode_event(self, assembler: StreamAssembler, event: ServerSentEvent) -> Sequence[Event]:
        """``assembler.take(event)``: the deltas to emit, :class:`ProviderError` for an error event,
        :class:`StreamError` (naming the field) for one that breaks the protocol; nothing else."""
        try:
            return assembler.take(event)
        except ProviderError:
            raise
        except (WireError, *_DECODE_ERRORS) as exc:
            raise self._invalid(StreamError, f"malformed {event.event!r} event", exc) from None

    def decode_end(self, assembler: StreamAssembler) -> AssistantMessage:
        """``assembler.finish()``: the message, or :class:`StreamError`; nothing else."""
        try:
            return assembler.finish()
        except ProviderError:
            raise
        except (WireError, *_DECODE_ERRORS) as exc:
            raise self._invalid(StreamError, "malformed stream", exc) from None

    def decode_stream(self, chunks: Iterable[bytes]) -> tuple[list[Event], AssistantMessage]:
        """A whole ``text/event-stream`` body, cut into ``chunks`` anywhere: its deltas and its message.

        What :meth:`complete` does with a streamed body, minus the network:
        raises a :class:`ProviderError` and nothing else.
        """
        decoder = self.stream_decoder()
        assembler = self.stream_assembler()
        deltas: list[Event] = []
        for chunk in chunks:
            for event in decoder.feed(chunk):
                deltas.extend(self.decode_event(assembler, event))
        return deltas, self.decode_end(assembler)

    def head(self, request: ModelRequest) -> bytes:
        """:meth:`encode_head`, re-encoded only when the system prompt, tools, thinking level,
        output cap or settings change (the agent sends the same ones every turn)."""
        key = (request.system_prompt, request.tools, request.thinking_level, request.max_tokens, request.settings)
        cached = self._head_key
        if cached is None or not all(a is b or a == b for a, b in zip(key, cached, strict=True)):
            self._head = self.encode_head(request)
            self._head_key = key
        return self._head

    # ------------------------------------------------------------------ model

    @property
    def name(self) -> str:
        """``"provider:model"``."""
        return f"{self.provider}:{self.model}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} at {self.base_url}>"

    @property
    def client(self) -> httpx.AsyncClient:
        """The client requests go through: the one given, else the node's shared one."""
        return self._http_client if self._http_client is not None else self._services.client

    async def aclose(self) -> None:
        """Close the client this model created for itself (only when it was resolved outside a node).

        A client given as ``http_client`` is left to its owner. The idle
        connections are closed at once, even when it is cancelled (then
        ``trio.Cancelled`` is raised after); responses in flight close as they end.
        """
        if self._owns_services:
            await self._services.aclose()

    async def complete(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Send ``request``, streaming deltas through ``emit``; retry per the policy.

        Raises a :class:`~condukt.providers.ProviderError` subclass on failure:
        :class:`~condukt.providers.EmptyPrompt` before any request when there
        is nothing to answer, :class:`~condukt.providers.ModelRefused` when the
        model refused or a content filter withheld the answer,
        :class:`~condukt.providers.UnsupportedContent` before any request
        when the conversation holds a document type the protocol cannot carry,
        :class:`~condukt.providers.UnsupportedSetting` before any request for
        a setting the protocol cannot take.
        Cancellation closes the connection of the request in flight.
        """
        messages = request.messages
        if not messages or not _has_prompt(messages[-1]):
            raise EmptyPrompt(self.provider, "the prompt is empty: nothing to send to the model")
        last = messages[-1]
        # A new prompt (or steers): its documents are checked, not noted. A prompt of one text
        # block (most of them) has none: no call on the path of every request. (_has_prompt
        # saw a block in it.)
        if type(last) is UserMessage and (len(last.content) > 1 or type(last.content[0]) is not TextBlock):
            self._check_documents(last)
        if request.settings is not None:
            self._check_settings(request)
        body = self.encode_request(request)
        estimate = len(body) // 4
        number = 0
        while True:  # the attempts
            number += 1
            attempt = _Attempt(emit, number, self.provider, request.stream_arguments)
            try:
                message = await self._attempt(body, estimate, attempt)
                break
            except ProviderError as exc:
                exc.attempts = number
                delay = None
                if exc.retryable and not attempt.emitted:
                    delay = self.retry.delay(number, exc.retry_after)
                if delay is None:
                    raise
                if isinstance(exc, RateLimited):
                    self.limits.slow_down(delay)
                logger.info("%s: attempt %d failed (%s); retrying in %.2fs", self.name, number, exc.reason, delay)
                await emit(Retry(self.provider, number, exc.reason, delay))
                await trio.sleep(delay)
        if self.prices is not False and message.usage.has_tokens:
            message = await self._priced(message)
        if message.stop_reason in _REFUSALS:
            refusal = message.text.strip()
            what = "the model refused to answer"
            if message.stop_reason == StopReason.CONTENT_FILTER:
                what = "the content filter withheld the answer"
            raise ModelRefused(
                self.provider,
                self.redact(f"{what}: {refusal}" if refusal else what),
                stop_reason=message.stop_reason,
                response=message,
            )
        return message

    async def _priced(self, message: AssistantMessage) -> AssistantMessage:
        """``message`` with its usage's ``cost``: from the given prices, else the table's for the model that
        answered (or the one asked for); unchanged when neither is known."""
        usage = message.usage
        prices = self.prices
        if isinstance(prices, Price):
            cost: float | None = prices.cost(usage)
        else:
            entry = None
            for model in dict.fromkeys((message.model or self.model, self.model)):
                known, entry = cached_price(self.provider, model)
                if not known:
                    entry = await lookup_price(self.provider, model)
                if entry is not None:
                    break
            cost = None if entry is None else entry.cost(usage)
        if cost is None:
            return message
        return attrs.evolve(message, usage=attrs.evolve(usage, cost=cost))

    def _request_timeouts(self) -> dict[str, float | None]:
        timeouts = self._timeouts
        if timeouts is None:
            timeout = httpx.Timeout(self._timeout, pool=None) if self._timeout is not None else self.client.timeout
            # ``read`` bounds each wait for bytes, head and body alike: an idle timeout that
            # resets while bytes move (the transport times it; see ``TrioTransport``).
            connect, read, write = timeout.connect, timeout.read, timeout.write
            timeouts = self._timeouts = {"connect": connect, "read": read, "write": write, "pool": None}
        return timeouts

    def _raw_headers(self) -> list[tuple[bytes, bytes]]:
        """The request headers as raw pairs, ``Host`` first (as httpx orders them), built once."""
        raw = self._raw
        if raw is None:
            raw = self._raw = list(self._headers.raw)
            if "host" not in self._headers:
                raw.insert(0, (b"Host", self._url.netloc))
        return raw

    async def _attempt(self, body: bytes, estimate: int, attempt: _Attempt) -> AssistantMessage:
        # Made before a slot is taken: a credential refresh may wait on the network.
        extra = await self.request_headers(body) if self.signs_requests else None
        limits = self.limits
        await limits.acquire(attempt, estimate)
        generation = limits.generation
        try:
            timeouts = self._request_timeouts()
            transport = self._services.transport if self._http_client is None else None
            if isinstance(transport, TrioTransport):
                # The node's own transport: no httpx request and response objects (their CPU
                # and their objects for the garbage collector), the head encoded
                # once per model; an error status or an encoded body still goes through
                # ``httpx.Response``. benchmarks/providers_openai.py measures the client path.
                try:
                    prepared = self._prepared
                    if prepared is None or prepared.transport is not transport:
                        prepared = self._prepared = transport.prepare("POST", self._url, self._raw_headers())
                    response = await transport.exchange_prepared(
                        prepared, body, timeouts=timeouts, resend=attempt.resend, headers=extra
                    )
                except httpx.TimeoutException as exc:
                    raise ProviderUnavailable(self.provider, f"timed out: {exc}") from None
                except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
                    raise self._unusable_url(exc) from None
                except httpx.HTTPError as exc:
                    raise ProviderUnavailable(self.provider, f"connection failed: {exc}") from None
                try:
                    if response.status_code >= 400 or response.header(b"content-encoding") is not None:
                        message = await self._handle(response.to_httpx(), attempt)
                    elif self.stream and (response.header(b"content-type") or b"").startswith(self.stream_content_type):
                        message = await self._read_events(response.stream, attempt)
                    else:
                        try:
                            content = await response.read()
                        except httpx.TimeoutException as exc:
                            raise ProviderUnavailable(self.provider, f"timed out reading the response: {exc}") from None
                        except httpx.HTTPError as exc:
                            raise ProviderUnavailable(
                                self.provider, f"connection lost reading the response: {exc}"
                            ) from None
                        message = await self._decode_body(content, attempt)
                finally:
                    await response.aclose()
            else:
                # The headers httpx would add (Host, Content-Length) are added here, and the body
                # given as a stream: half the cost of ``content=body`` (which re-checks every header).
                request = httpx.Request(
                    "POST",
                    self._url,
                    headers=[*self._raw_headers(), *(extra or ()), (b"Content-Length", b"%d" % len(body))],
                    stream=httpx.ByteStream(body),
                    extensions={"timeout": timeouts, "condukt.resend": attempt.resend},
                )
                request.read()
                message = await self._exchange(request, attempt)
        except ProviderError as exc:
            if exc.status_code in _OVERLOAD_STATUSES or exc.error_type == "overloaded_error":
                limits.overloaded(generation)
            raise
        finally:
            limits.release(attempt)
        limits.charge(message.usage.input_tokens + message.usage.output_tokens, estimate)
        limits.succeeded()
        return message

    async def _send(self, request: httpx.Request) -> httpx.Response:
        if self._http_client is not None:
            sent: httpx.Response = await self._http_client.send(request, stream=True)
            return sent
        # The node's own client adds nothing a model API needs (cookies, auth
        # flows, redirects, hooks) but CPU per request (benchmarks/providers_openai.py):
        # go to its transport.
        response = await self._services.transport.handle_async_request(request)
        response.request = request
        return response

    def _unusable_url(self, exc: Exception) -> InvalidRequest:
        # Sending again cannot help: fail at once rather than after the retries.
        return InvalidRequest(self.provider, f"{str(exc).rstrip('.')}: base_url must be an http:// or https:// URL")

    async def _exchange(self, request: httpx.Request, attempt: _Attempt) -> AssistantMessage:
        try:
            response = await self._send(request)
        except httpx.TimeoutException as exc:
            raise ProviderUnavailable(self.provider, f"timed out: {exc}") from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise self._unusable_url(exc) from None
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(self.provider, f"connection failed: {exc}") from None
        try:
            return await self._handle(response, attempt)
        finally:
            await response.aclose()

    async def _handle(self, response: httpx.Response, attempt: _Attempt) -> AssistantMessage:
        if response.status_code >= 400:
            raise await self._status_error(response)
        if self.stream and response.headers.get("content-type", "").startswith(self.stream_content_type.decode()):
            # Without a content encoding the body needs no decoding: read the
            # stream itself rather than through two layers of async generators.
            chunks = response.aiter_bytes() if "content-encoding" in response.headers else response.stream
            return await self._read_events(chunks, attempt)  # type: ignore[arg-type]
        try:
            await response.aread()
        except httpx.TimeoutException as exc:
            raise ProviderUnavailable(self.provider, f"timed out reading the response: {exc}") from None
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(self.provider, f"connection lost reading the response: {exc}") from None
        return await self._decode_body(response.content, attempt)

    async def _decode_body(self, content: bytes, attempt: _Attempt) -> AssistantMessage:
        message = self.decode_response(content)
        if self.stream:
            # The server ignored "stream": still give the reader its deltas.
            for block in message.content:
                if type(block) is ThinkingBlock and block.thinking:
                    await attempt.event(ThinkingDelta(block.thinking))
                elif type(block) is TextBlock and block.text:
                    await attempt.event(TextDelta(block.text))
        return message

    async def _read_events(self, chunks: AsyncIterable[bytes], attempt: _Attempt) -> AssistantMessage:
        decoder = self.stream_decoder()
        assembler = self.stream_assembler()
        try:
            async for chunk in chunks:
                for event in decoder.feed(chunk):
                    for delta in self.decode_event(assembler, event):
                        await attempt.event(delta)
        except httpx.TimeoutException as exc:
            # Silent before any content: a server that has not answered yet, not a stream cut mid-way.
            raise (StreamError if attempt.emitted else ProviderUnavailable)(
                self.provider, f"stream stalled: {exc}"
            ) from None
        except httpx.HTTPError as exc:
            raise StreamError(self.provider, f"stream cut: {exc}") from None
        return self.decode_end(assembler)

    async def _status_error(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        try:
            await response.aread()
            payload = loads(response.content) if response.content else None
        except (httpx.HTTPError, ValueError):
            payload = None
        error_type, code, message = self.describe_error(payload, response.headers)
        if message is None:
            text = response.text.strip() if response.is_closed else ""
            message = text or response.reason_phrase or "error"
        return error_for_type(
            self.provider,
            error_type,
            self.redact(message),
            code=code,
            status_code=status,
            request_id=response.headers.get("request-id")
            or response.headers.get("x-request-id")
            or response.headers.get("x-amzn-requestid"),
            retry_after=parse_retry_after(response.headers),
        )

    def secret_values(self) -> Sequence[str]:
        """The secrets this model sends (its API key; a token or signing key a protocol adds), for :meth:`redact`."""
        return (self._api_key,) if self._api_key else ()

    def redact(self, text: str) -> str:
        """``text`` without the API key (or any of :meth:`secret_values`) in it, cut to a sane length."""
        for key in self.secret_values():
            if key and key in text:
                text = text.replace(key, "[redacted]")
        if len(text) > _MAX_MESSAGE:
            text = text[:_MAX_MESSAGE] + "..."
        return text

    def error_event(self, payload: Any) -> ProviderError:
        """The typed error for an error reported inside a stream (any JSON value)."""
        error_type, code, message = error_details(payload)
        return error_for_type(self.provider, error_type, self.redact(message or "error event in the stream"), code=code)
