"""What every HTTP provider shares: keys, the request loop, retries, limits, errors.

A protocol module (:mod:`~condukt.providers.anthropic`,
:mod:`~condukt.providers.openai`) subclasses :class:`HttpModel` and supplies
the wire format: headers, request encoding, the response parser and a
stream assembler. Everything else (the node's shared client and limits,
retries with backoff, error mapping, cancellation) lives here, once.
"""

from __future__ import annotations

import abc
import logging
import math
import os
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
import trio

from ..events import Event, Retry, TextDelta, ThinkingDelta
from ..messages import AssistantMessage, TextBlock, ThinkingBlock
from ..otp import current_node
from ._errors import (
    AuthenticationFailed,
    InvalidRequest,
    InvalidResponse,
    MissingApiKey,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    StreamError,
)
from ._http import DEFAULT_BASE_URLS, NodeHttp, endpoint_name, node_http
from ._model import Emit, ModelRequest
from ._retry import RETRY_STATUSES, RetryPolicy, parse_retry_after, retry_policy
from ._sse import ServerSentEvent, SSEDecoder
from ._wire import loads

__all__ = ["HttpModel", "StreamAssembler", "error_for_type", "resolve_api_key"]

logger = logging.getLogger("condukt.providers")

_UNSET: Any = object()
#: The most of a provider's error message kept in an exception.
_MAX_MESSAGE = 2000
#: Failures that mean "too much traffic": an adaptive concurrency limit backs off on them.
_OVERLOAD_STATUSES = frozenset({429, 503, 529})


def resolve_api_key(provider: str, api_key: str | None, env_var: str | None, *, required: bool = True) -> str | None:
    """``api_key``, else the environment variable ``env_var``; :class:`MissingApiKey` if required and neither is set."""
    if api_key:
        return api_key
    if env_var:
        value = os.environ.get(env_var)
        if value:
            return value
    if required:
        where = f"set {env_var} or " if env_var else ""
        raise MissingApiKey(f"{provider}: no API key: {where}pass api_key=... when starting the agent")
    return None


def error_for_type(
    provider: str,
    error_type: str | None,
    message: str,
    *,
    status_code: int | None = None,
    request_id: str | None = None,
    retry_after: float | None = None,
) -> ProviderError:
    """The typed error for a provider's error ``error_type`` and/or HTTP ``status_code``."""
    kind = (error_type or "").lower()
    cls: type[ProviderError]
    if status_code == 429 or "rate_limit" in kind:
        cls = RateLimited
    elif status_code in (401, 403) or kind in ("authentication_error", "permission_error", "invalid_api_key"):
        cls = AuthenticationFailed
    elif status_code in RETRY_STATUSES or kind in ("overloaded_error", "api_error", "server_error", "timeout_error"):
        cls = ProviderUnavailable
    elif status_code is not None and 400 <= status_code < 500 or kind == "invalid_request_error":
        cls = InvalidRequest
    else:
        cls = ProviderError
    return cls(
        provider,
        message,
        status_code=status_code,
        error_type=error_type,
        request_id=request_id,
        retry_after=retry_after,
    )


def error_details(payload: Any) -> tuple[str | None, str | None]:
    """``(type, message)`` from a provider's error body, whichever of the usual shapes it has.

    Anthropic: ``{"type": "error", "error": {"type", "message"}}``; OpenAI and
    compatibles: ``{"error": {"message", "type", "code"}}``; others put a
    string in ``error``, ``message`` or ``detail``.
    """
    if not isinstance(payload, dict):
        return None, None
    error = payload.get("error")
    if isinstance(error, dict):
        message = error.get("message")
        kind = error.get("type") or error.get("code")
        return (str(kind) if kind else None), (str(message) if message is not None else None)
    if isinstance(error, str):
        return None, error
    for key in ("message", "detail"):
        value = payload.get(key)
        if value is not None:
            return None, value if isinstance(value, str) else str(value)
    return None, None


class StreamAssembler(abc.ABC):
    """Builds one :class:`AssistantMessage` from a provider's server-sent events."""

    @abc.abstractmethod
    async def feed(self, event: ServerSentEvent, emit: Emit) -> None:
        """Take one event, emitting text and thinking deltas as they come.

        Raises :class:`ProviderError` for an error event, :class:`StreamError`
        for one that breaks the protocol. Its only checkpoints are in ``emit``:
        a cancellation there must propagate, and the assembler is then
        abandoned with its attempt.
        """

    @abc.abstractmethod
    def finish(self) -> AssistantMessage:
        """The message, once the body ended; :class:`StreamError` if the stream stopped short."""


class _Guard:
    """Passes events on and remembers whether any streamed content was emitted."""

    __slots__ = ("emit", "emitted")

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.emitted = False

    async def __call__(self, event: Event) -> None:
        self.emitted = True
        await self.emit(event)


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
    headers), ``extra_body`` (extra top-level request fields) and
    ``http_client`` (an ``httpx.AsyncClient`` to use instead of the node's).

    ``complete`` retries what is worth retrying (see
    :class:`~condukt.providers.RetryPolicy`) as long as nothing was streamed
    yet, emitting a :class:`~condukt.events.Retry` event before each new
    attempt. Cancelling it closes the request's connection at once.
    """

    #: The endpoint path appended to the base URL.
    path: ClassVar[str]

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
        self._url = httpx.URL(self.base_url + self.path)
        request_headers = {"content-type": "application/json", "accept": "application/json"}
        request_headers.update(self.auth_headers(api_key))
        if stream:
            request_headers["accept"] = "text/event-stream"
        request_headers.update(headers or {})
        self._headers = httpx.Headers(request_headers)
        self._timeout = timeout
        self._timeouts: dict[str, float | None] | None = None
        self._stall = math.inf
        self._head_key: tuple[Any, ...] | None = None
        self._head = b""

    # ------------------------------------------------------------------ protocol

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
        """The message in a non-streamed response body (:class:`InvalidResponse` if it is not one)."""

    @abc.abstractmethod
    def stream_assembler(self) -> StreamAssembler:
        """A fresh assembler for one streamed response."""

    def head(self, request: ModelRequest) -> bytes:
        """:meth:`encode_head`, re-encoded only when the system prompt, tools,
        thinking level or output cap change (the agent sends the same ones every turn)."""
        key = (request.system_prompt, request.tools, request.thinking_level, request.max_tokens)
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

        Raises a :class:`~condukt.providers.ProviderError` subclass on failure.
        Cancellation closes the connection of the request in flight.
        """
        body = self.encode_request(request)
        estimate = len(body) // 4
        attempt = 0
        while True:
            attempt += 1
            guard = _Guard(emit)
            try:
                return await self._attempt(body, estimate, guard)
            except ProviderError as exc:
                exc.attempts = attempt
                delay = None
                if exc.retryable and not guard.emitted:
                    delay = self.retry.delay(attempt, exc.retry_after)
                if delay is None:
                    raise
                if isinstance(exc, RateLimited):
                    self.limits.slow_down(delay)
                logger.info("%s: attempt %d failed (%s); retrying in %.2fs", self.name, attempt, exc.reason, delay)
                await emit(Retry(self.provider, attempt, exc.reason, delay))
                await trio.sleep(delay)

    def _request_timeouts(self) -> dict[str, float | None]:
        timeouts = self._timeouts
        if timeouts is None:
            timeout = httpx.Timeout(self._timeout, pool=None) if self._timeout is not None else self.client.timeout
            # Reads are timed here, by one cancel scope per attempt whose deadline
            # moves with every chunk, rather than by a timer per socket read.
            self._stall = timeout.read if timeout.read is not None else math.inf
            timeouts = self._timeouts = {"connect": timeout.connect, "read": None, "write": None, "pool": None}
        return timeouts

    async def _attempt(self, body: bytes, estimate: int, emit: _Guard) -> AssistantMessage:
        limits = self.limits
        borrower = object()
        await limits.acquire(borrower, estimate)
        generation = limits.generation
        try:
            request = httpx.Request(
                "POST", self._url, headers=self._headers, content=body, extensions={"timeout": self._request_timeouts()}
            )
            with trio.CancelScope(deadline=trio.current_time() + self._stall) as scope:
                message = await self._exchange(request, emit, scope)
            if scope.cancelled_caught:
                raise (StreamError if emit.emitted else ProviderUnavailable)(
                    self.provider, f"no data from the server for {self._stall:g}s"
                )
        except ProviderError as exc:
            if exc.status_code in _OVERLOAD_STATUSES or exc.error_type == "overloaded_error":
                limits.overloaded(generation)
            raise
        finally:
            limits.release(borrower)
        limits.charge(message.usage.input_tokens + message.usage.output_tokens, estimate)
        limits.succeeded()
        return message

    async def _send(self, request: httpx.Request) -> httpx.Response:
        if self._http_client is not None:
            sent: httpx.Response = await self._http_client.send(request, stream=True)
            return sent
        # The node's own client adds nothing a model API needs (cookies, auth
        # flows, redirects, hooks) but ~50 us a request: go to its transport.
        response = await self._services.transport.handle_async_request(request)
        response.request = request
        return response

    async def _exchange(self, request: httpx.Request, emit: _Guard, scope: trio.CancelScope) -> AssistantMessage:
        try:
            response = await self._send(request)
        except httpx.TimeoutException as exc:
            raise ProviderUnavailable(self.provider, f"timed out: {exc}") from None
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(self.provider, f"connection failed: {exc}") from None
        try:
            if response.status_code >= 400:
                raise await self._status_error(response)
            if self.stream and response.headers.get("content-type", "").startswith("text/event-stream"):
                return await self._read_stream(response, emit, scope)
            return await self._read_body(response, emit)
        finally:
            await response.aclose()

    async def _read_body(self, response: httpx.Response, emit: _Guard) -> AssistantMessage:
        try:
            await response.aread()
        except httpx.TimeoutException as exc:
            raise ProviderUnavailable(self.provider, f"timed out reading the response: {exc}") from None
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(self.provider, f"connection lost reading the response: {exc}") from None
        try:
            payload = loads(response.content)
        except ValueError as exc:
            raise InvalidResponse(self.provider, f"response is not JSON: {exc}") from None
        message = self.parse_response(payload)
        if self.stream:
            # The server ignored "stream": still give the reader its deltas.
            for block in message.content:
                if type(block) is ThinkingBlock and block.thinking:
                    await emit(ThinkingDelta(block.thinking))
                elif type(block) is TextBlock and block.text:
                    await emit(TextDelta(block.text))
        return message

    async def _read_stream(self, response: httpx.Response, emit: _Guard, scope: trio.CancelScope) -> AssistantMessage:
        decoder = SSEDecoder()
        assembler = self.stream_assembler()
        stall = self._stall
        # Without a content encoding the body needs no decoding: read the
        # stream itself rather than through two layers of async generators.
        chunks = response.aiter_bytes() if "content-encoding" in response.headers else response.stream
        try:
            async for chunk in chunks:  # type: ignore[union-attr]
                scope.deadline = trio.current_time() + stall
                for event in decoder.feed(chunk):
                    await assembler.feed(event, emit)
        except httpx.TimeoutException as exc:
            raise StreamError(self.provider, f"stream stalled: {exc}") from None
        except httpx.HTTPError as exc:
            raise StreamError(self.provider, f"stream cut: {exc}") from None
        return assembler.finish()

    async def _status_error(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        try:
            await response.aread()
            payload = loads(response.content) if response.content else None
        except (httpx.HTTPError, ValueError):
            payload = None
        error_type, message = error_details(payload)
        if message is None:
            text = response.text.strip() if response.is_closed else ""
            message = text or response.reason_phrase or "error"
        return error_for_type(
            self.provider,
            error_type,
            self.redact(message),
            status_code=status,
            request_id=response.headers.get("request-id") or response.headers.get("x-request-id"),
            retry_after=parse_retry_after(response.headers),
        )

    def redact(self, text: str) -> str:
        """``text`` without the API key in it, cut to a sane length."""
        key = self._api_key
        if key and key in text:
            text = text.replace(key, "[redacted]")
        if len(text) > _MAX_MESSAGE:
            text = text[:_MAX_MESSAGE] + "..."
        return text

    def error_event(self, payload: Any) -> ProviderError:
        """The typed error for an error reported inside a stream."""
        error_type, message = error_details(payload)
        return error_for_type(self.provider, error_type, self.redact(message or "error event in the stream"))
