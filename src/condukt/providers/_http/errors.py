"""A provider's error response, classified: which :class:`~condukt.providers.ProviderError` it is."""

from __future__ import annotations

from typing import Any

from .._errors import (
    AuthenticationFailed,
    InvalidRequest,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
)
from .retry import RETRY_STATUSES

__all__ = ["error_details", "error_for_type"]


#: Error ``type``/``code`` names, lower-cased, as Anthropic, OpenAI and the
#: compatible servers (LiteLLM and vLLM send exception class names, Ollama
#: OpenAI's) spell them; the HTTP status, when there is one, comes first.
_QUOTA_KINDS = frozenset({"insufficient_quota", "billing_error", "billing_hard_limit_reached", "quota_exceeded"})
_RATE_KINDS = frozenset(
    {
        "rate_limit_error",
        "rate_limit_exceeded",
        "ratelimiterror",
        "rate_limited",
        "too_many_requests",
        # AWS Bedrock's exception names (a stream's exceptions have no HTTP status).
        "throttlingexception",
        "modelnotreadyexception",
    }
)
_AUTH_KINDS = frozenset(
    {
        "authentication_error",
        "permission_error",
        "invalid_api_key",
        "authenticationerror",
        "permissiondeniederror",
        "unauthorized",
        "forbidden",
        # Google's status names, and the ErrorInfo reason of a bad key (sent with a 400).
        "unauthenticated",
        "permission_denied",
        "api_key_invalid",
        "accessdeniedexception",
        "unrecognizedclientexception",
        "expiredtokenexception",
        "invalidsignatureexception",
    }
)
_UNAVAILABLE_KINDS = frozenset(
    {
        "overloaded_error",
        "api_error",
        "server_error",
        "timeout_error",
        "internal_server_error",
        "internalservererror",
        "serviceunavailableerror",
        "service_unavailable",
        "apiconnectionerror",
        "apitimeouterror",
        "timeout",
        "overloaded",
        "internal",
        "unavailable",
        "deadline_exceeded",
        "serviceunavailableexception",
        "internalserverexception",
        "modelstreamerrorexception",
        "modeltimeoutexception",
    }
)
_INVALID_KINDS = frozenset(
    {
        "invalid_request_error",
        "not_found_error",
        "request_too_large",
        "context_length_exceeded",
        "model_not_found",
        "badrequesterror",
        "notfounderror",
        "unprocessableentityerror",
        "contextwindowexceedederror",
        "invalid_argument",
        "failed_precondition",
        "not_found",
        "validationexception",
        "resourcenotfoundexception",
        "modelerrorexception",
    }
)


def _status_of(code: Any) -> int | None:
    """An error ``code`` that is an HTTP status (``503``, ``"429"``), else ``None``."""
    if type(code) is str and code.isdigit() and len(code) == 3:
        code = int(code)
    if type(code) is int and 400 <= code <= 599:
        return code
    return None


def error_for_type(
    provider: str,
    error_type: str | None,
    message: str,
    *,
    status_code: int | None = None,
    request_id: str | None = None,
    retry_after: float | None = None,
    code: Any = None,
) -> ProviderError:
    """The typed error for a provider's error ``error_type``, ``code`` and/or HTTP ``status_code``.

    The HTTP status decides, then a numeric ``code`` (an error inside a
    stream has no status of its own: OpenRouter and LiteLLM put one there),
    then the ``type`` and a textual ``code``. An exhausted quota is never
    retried, whatever the status (OpenAI sends it as a 429).
    """
    kinds = {(error_type or "").lower()}
    if type(code) is str:
        kinds.add(code.lower())
    status = status_code if status_code is not None else _status_of(code)
    cls: type[ProviderError]
    if kinds & _QUOTA_KINDS:
        cls = ProviderError
    elif status == 429 or kinds & _RATE_KINDS or any("rate_limit" in kind for kind in kinds) or (
        "resource_exhausted" in kinds
    ):
        cls = RateLimited
    elif status in (401, 403) or status in (None, 400) and kinds & _AUTH_KINDS:
        cls = AuthenticationFailed
    elif status is not None:
        if status in RETRY_STATUSES or status >= 500 and kinds & _UNAVAILABLE_KINDS:
            cls = ProviderUnavailable
        elif 400 <= status < 500:
            cls = InvalidRequest
        else:
            cls = ProviderError
    elif kinds & _UNAVAILABLE_KINDS:
        cls = ProviderUnavailable
    elif kinds & _INVALID_KINDS:
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


def _scalar(value: Any) -> str | None:
    """A string, number or bool as text; ``None`` for anything else (no ``str()`` of deep JSON)."""
    if type(value) is str:
        return value
    if type(value) in (int, float, bool):
        return str(value) if type(value) is not int or value.bit_length() < 64 else None
    return None


def _google_reason(details: Any) -> str | None:
    """The ``reason`` of the first ``google.rpc.ErrorInfo`` in a Google error's ``details``."""
    if type(details) is not list:
        return None
    for detail in details[:8]:
        if type(detail) is dict and str(detail.get("@type", "")).endswith("google.rpc.ErrorInfo"):
            reason = detail.get("reason")
            if type(reason) is str and reason:
                return reason
    return None


def error_details(payload: Any) -> tuple[str | None, Any, str | None]:
    """``(type, code, message)`` from a provider's error body, whichever of the usual shapes it has.

    Anthropic: ``{"type": "error", "error": {"type", "message"}}``; OpenAI and
    compatibles: ``{"error": {"message", "type", "code"}}``; vLLM before
    0.9: the same fields at the top level (``"object": "error"``); others
    put a string in ``error``, ``message`` or ``detail``; Google (Gemini):
    ``{"error": {"code": 429, "message", "status": "RESOURCE_EXHAUSTED",
    "details": [...]}}``, whose ``status`` is taken as the type, or the
    ``reason`` of an ``ErrorInfo`` detail when there is one (a bad key is a
    400 with the reason ``API_KEY_INVALID``). Total: any JSON value gives a
    (possibly empty) answer. ``code`` is an ``int`` or ``str``.
    """
    if type(payload) is not dict:
        return None, None, None
    error = payload.get("error")
    if type(error) is not dict:
        if error is not None:
            return None, None, _scalar(error)
        if payload.get("object") != "error":
            for key in ("message", "detail"):
                message = _scalar(payload.get(key))
                if message is not None:
                    return None, None, message
            return None, None, None
        error = payload
    kind = _scalar(error.get("type"))
    if kind in ("", "None", "null"):  # LiteLLM spells a missing type "None"
        kind = None
    code = error.get("code")
    if type(code) not in (int, str) or type(code) is int and code.bit_length() > 16:
        code = None
    if kind is None and type(code) is str and not code.isdigit() and code:
        kind = code
    if kind is None:
        kind = _google_reason(error.get("details")) or _scalar(error.get("status"))
    return kind, code, _scalar(error.get("message"))
