"""What every route of condukt's web apps shares: :class:`HTTPError` answers and the bearer-token guard."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["HTTPError", "Handler", "guard"]

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


def guard(handler: Handler, token: bytes | None, *, public: bool = False) -> Handler:
    """Wrap ``handler``: bearer auth against ``token`` (unless ``public``) and :class:`HTTPError` answers."""

    async def guarded(request: Request) -> Response:
        try:
            if token is not None and not public:
                scheme, _, given = request.headers.get("authorization", "").partition(" ")
                # The scheme is case-insensitive (RFC 9110); the token is compared in constant time.
                matches = hmac.compare_digest(given.strip().encode("utf-8", "replace"), token)
                if scheme.lower() != "bearer" or not matches:
                    raise HTTPError(401, "Unauthorized", "a valid 'Authorization: Bearer <token>' header is needed",
                                    headers={"WWW-Authenticate": "Bearer"})
            return await handler(request)
        except HTTPError as exc:
            return exc.response()

    return guarded
