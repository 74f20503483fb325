"""The errors a provider raises: one hierarchy under :class:`~condukt.providers.ModelError`.

Catch :class:`ProviderError` for every failure of a provider request, or a
subclass for one kind. None of them ever holds an API key: the provider's
own message is redacted before it is stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._model import ModelError

if TYPE_CHECKING:
    from ..messages import AssistantMessage

__all__ = [
    "AuthenticationFailed",
    "CorruptFrame",
    "EmptyPrompt",
    "InvalidRequest",
    "InvalidResponse",
    "MissingApiKey",
    "MissingCredentials",
    "ModelRefused",
    "ProviderError",
    "ProviderUnavailable",
    "RateLimited",
    "StreamError",
    "UnsupportedContent",
    "UnsupportedSetting",
]


class MissingApiKey(ModelError, ValueError):
    """No API key was given and the provider's environment variable is not set.

    Raised when the model is resolved (at agent start), never at the first request.
    """


class MissingCredentials(MissingApiKey):
    """Cloud credentials (AWS, Google Cloud, Azure) could not be found, or expired and could not be renewed.

    The message names what to set (``AWS_ACCESS_KEY_ID`` or ``AWS_PROFILE``,
    ``GOOGLE_APPLICATION_CREDENTIALS``...), never a secret. Raised at agent
    start when nothing could be found, or before a request when credentials
    that were found expired: that request is never sent.
    """


class ProviderError(ModelError):
    """A provider request failed.

    ``provider`` is the provider prefix (``"anthropic"``, ``"openai"``...),
    ``status_code`` the HTTP status (``None`` for a connection failure or an
    error reported inside a stream), ``error_type`` the provider's error type
    when it sent one, ``provider_message`` its message, ``request_id`` its
    request id header, ``retry_after`` the wait it asked for (seconds), and
    ``attempts`` how many requests were made before giving up.
    """

    #: Whether a request failing this way may succeed when sent again.
    retryable: bool = False

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        status_code: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.provider_message = message
        self.status_code = status_code
        self.error_type = error_type
        self.request_id = request_id
        self.retry_after = retry_after
        self.attempts = 1

    @property
    def reason(self) -> str:
        """A short description: status, error type and message (no provider prefix)."""
        parts = []
        if self.status_code is not None:
            parts.append(f"HTTP {self.status_code}")
        if self.error_type:
            parts.append(self.error_type)
        head = " ".join(parts)
        return f"{head}: {self.provider_message}" if head else self.provider_message

    def __str__(self) -> str:
        text = f"{self.provider}: {self.reason}"
        if self.attempts > 1:
            text += f" (gave up after {self.attempts} attempts)"
        if self.request_id:
            text += f" [request id {self.request_id}]"
        return text


class InvalidRequest(ProviderError):
    """The provider rejected the request (HTTP 400, 404, 413, 422...): sending it again will not help."""


class EmptyPrompt(InvalidRequest, ValueError):
    """The request has nothing to answer: no messages, or a last user message without text, images or documents.

    Raised by the model before any request is sent (an empty prompt would be
    an HTTP 400 from Anthropic and a silent prefill or a wasted request
    elsewhere). A ``ValueError`` too, as it is a mistake in the caller's input.
    """


class UnsupportedContent(InvalidRequest, ValueError):
    """The prompt holds content the provider's protocol cannot carry (a document type it does not take).

    Raised by the model before any request is sent, naming the block and
    what the protocol takes, instead of the HTTP 400 the provider would
    answer. A ``ValueError`` too, as it is a mistake in the caller's input.
    Such content already in the history (a tool's result) is sent as a
    note instead (:meth:`~condukt.providers.lowlevel.HttpModel.document_problem`).
    """


class UnsupportedSetting(InvalidRequest, ValueError):
    """A :class:`~condukt.ModelSettings` setting the provider's protocol cannot take (``seed`` on Anthropic's).

    Raised by the model before any request is sent; the message names the
    protocol and the setting (``setting``). A ``ValueError`` too, as it is a
    mistake in the caller's settings.
    """

    def __init__(self, provider: str, message: str, *, setting: str) -> None:
        super().__init__(provider, message)
        self.setting = setting


class ModelRefused(ProviderError):
    """The model declined to answer, or the provider's content filter withheld the answer.

    ``stop_reason`` is :attr:`~condukt.messages.StopReason.REFUSAL` (an
    OpenAI ``refusal``, an Anthropic ``"refusal"`` stop reason) or
    :attr:`~condukt.messages.StopReason.CONTENT_FILTER` (OpenAI's
    ``finish_reason: "content_filter"``); the message is the refusal text the
    model gave, if any. ``response`` is the message as received (partial text
    included), which is not added to the history. Not retried: the same
    request is likely refused again.
    """

    def __init__(self, provider: str, message: str, *, stop_reason: str, response: AssistantMessage) -> None:
        super().__init__(provider, message, error_type=str(stop_reason))
        self.stop_reason = stop_reason
        self.response = response


class AuthenticationFailed(ProviderError):
    """The provider refused the API key (HTTP 401) or its permissions (HTTP 403)."""


class RateLimited(ProviderError):
    """The provider said to slow down (HTTP 429). Retried after its ``Retry-After``."""

    retryable = True


class ProviderUnavailable(ProviderError):
    """The provider is down, overloaded, timed out or unreachable (5xx, 529, connection errors)."""

    retryable = True


class InvalidResponse(ProviderError):
    """The provider answered with something that is not the protocol (bad JSON, missing fields)."""


class StreamError(InvalidResponse):
    """A streamed response was cut or malformed mid-way.

    The partial answer is dropped (the run fails, nothing half-finished lands
    in the history); it is retried only if nothing had been streamed yet.
    """

    retryable = True


class CorruptFrame(StreamError):
    """A frame of a binary event stream (AWS's ``application/vnd.amazon.eventstream``) failed its checks.

    Its prelude or message CRC32 does not match, or its lengths are
    impossible: the bytes were damaged on the way (or the server is not
    speaking the protocol). Like any :class:`StreamError`, the request is
    retried only if nothing had been streamed yet.
    """

