"""What every route of condukt's web apps shares: :class:`HTTPError` answers, the bearer-token guard, JSON errors."""

from __future__ import annotations

import hmac
import http
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..sessions import SessionOwned
from ._json import JSONResponse

__all__ = ["EXCEPTION_HANDLERS", "HTTPError", "Handler", "check_token", "guard"]

Handler = Callable[[Request], Awaitable[Response]]


class HTTPError(Exception):
    """An error answer: status, the JSON body ``{"error", "message", ...}`` and headers."""

    def __init__(self, status: int, error: str, message: str, *, headers: Mapping[str, str] | None = None,
                 **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": error, "message": message, **extra}
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        return JSONResponse(self.body, self.status, headers=self.headers)


def check_token(token: str | None) -> bytes | None:
    """``token`` as the bytes a request's header must carry; ``ValueError`` for a token no client can send.

    A header value travels as bytes that servers decode as latin-1, and
    clients encode a non-ASCII value each their own way: a token outside
    printable ASCII (or with spaces) could never match, so it is refused here.
    """
    if token is None:
        return None
    if not isinstance(token, str) or not token:
        raise ValueError("token must be None or a non-empty str")
    if not all("!" <= char <= "~" for char in token):
        raise ValueError("token must be printable ASCII without spaces (a header value every client sends alike)")
    return token.encode("ascii")


def guard(handler: Handler, token: bytes | None, *, public: bool = False) -> Handler:
    """Wrap ``handler``: bearer auth against ``token`` (unless ``public``) and :class:`HTTPError` answers."""

    async def guarded(request: Request) -> Response:
        try:
            if token is not None and not public:
                scheme, _, given = request.headers.get("authorization", "").partition(" ")
                # The scheme is case-insensitive (RFC 9110); the token is compared in constant time, as the
                # bytes that came (Starlette decodes headers as latin-1, which gives them back unchanged).
                matches = hmac.compare_digest(given.strip().encode("latin-1", "replace"), token)
                if scheme.lower() != "bearer" or not matches:
                    raise HTTPError(401, "Unauthorized", "a valid 'Authorization: Bearer <token>' header is needed",
                                    headers={"WWW-Authenticate": "Bearer"})
            return await handler(request)
        except HTTPError as exc:
            return exc.response()
        except SessionOwned as exc:
            # Another node owns the session (it lives, or died and its lease has not run out yet).
            retry = 1 if exc.retry_after is None else max(1, math.ceil(exc.retry_after))
            return HTTPError(503, "SessionOwned", str(exc), headers={"Retry-After": str(retry)}).response()

    return guarded


def _name(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase.replace(" ", "").replace("-", "")
    except ValueError:
        return "HTTPError"


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own answers (no such route, method not allowed...) as condukt's JSON errors."""
    assert isinstance(exc, HTTPException)
    messages = {404: f"no route {request.url.path!r}", 405: f"{request.method} is not allowed on this route"}
    message = messages.get(exc.status_code) or str(exc.detail)
    return HTTPError(exc.status_code, _name(exc.status_code), message, headers=exc.headers).response()


async def _server_error(request: Request, exc: Exception) -> Response:
    # Starlette logs the exception (the server's error log) after answering with this.
    return HTTPError(500, "InternalServerError", "the server failed to answer this request (see its log)").response()


#: Starlette ``exception_handlers`` giving every answer a condukt app did not write the JSON error shape.
EXCEPTION_HANDLERS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    HTTPException: _http_exception,
    Exception: _server_error,
}
