"""Bearer tokens that expire (Google Cloud OAuth, Microsoft Entra ID), renewed before they do.

A :class:`TokenSource` keeps the current token and its expiry; a request
asks it for the ``Authorization`` header. A token within
:data:`REFRESH_MARGIN` seconds of its expiry is renewed first, in a worker
thread (the credential libraries, google-auth and azure-identity, renew
over blocking HTTP), one renewal at a time however many requests wait.
Whatever fails there is a :class:`~condukt.providers.MissingCredentials`
saying what to set: the request is not sent.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import trio

from ._errors import MissingCredentials

__all__ = ["REFRESH_MARGIN", "TokenSource", "token_of"]

#: Seconds before its expiry a token is renewed (a request in flight must not outlive it).
REFRESH_MARGIN = 300.0

#: ``fetch()`` -> ``(token, expires_at)``: Unix time of expiry, ``None`` when unknown (never renewed).
Fetch = Callable[[], tuple[str, float | None]]


def token_of(value: Any) -> tuple[str, float | None]:
    """A token as a provider callable may give it: a ``str``, ``(token, expires_at)``, or an object
    with ``token`` and ``expires_on`` (azure-core's ``AccessToken``) or ``expiry`` (a ``datetime``)."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return value[0], None if value[1] is None else float(value[1])
    token = getattr(value, "token", None)
    if isinstance(token, str):
        expires = getattr(value, "expires_on", None)
        if expires is None:
            expiry = getattr(value, "expiry", None)
            expires = expiry.timestamp() if expiry is not None else None
        return token, None if expires is None else float(expires)
    raise TypeError(f"a token must be a str, (str, expires_at) or an object with .token, got {type(value).__name__}")


class TokenSource:
    """The current bearer token of one model's credentials, renewed before it expires.

    ``fetch`` is a blocking function (run in a worker thread) or, with
    ``is_async``, an async one (awaited); either returns
    ``(token, expires_at)`` and raises on failure. ``hint`` says what a
    user should set when it fails (``"run `gcloud auth application-default
    login` or set GOOGLE_APPLICATION_CREDENTIALS"``).
    """

    __slots__ = ("_expires_at", "_fetch", "_header", "_lock", "hint", "provider", "sync_inline")

    def __init__(
        self,
        provider: str,
        fetch: Callable[[], Any],
        hint: str,
        *,
        sync_inline: bool = False,
    ) -> None:
        self.provider = provider
        self.hint = hint
        #: Call a blocking ``fetch`` in the event loop rather than a thread (a user's quick callable).
        self.sync_inline = sync_inline
        self._fetch = fetch
        self._header: tuple[bytes, bytes] | None = None
        self._expires_at: float | None = None
        self._lock = trio.Lock()

    @classmethod
    def from_callable(cls, provider: str, function: Callable[[], Any], hint: str) -> TokenSource:
        """A source asking ``function`` (sync or async) for each token: what :func:`token_of` takes.

        A synchronous one is called in the event loop: it should be quick
        (cache its token, as azure-identity's ``get_bearer_token_provider`` does).
        """
        call = type(function).__call__ if not inspect.isroutine(function) else None
        if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call):

            async def fetch_async() -> tuple[str, float | None]:
                return token_of(await function())

            return cls(provider, fetch_async, hint)
        return cls(provider, lambda: token_of(function()), hint, sync_inline=True)

    @property
    def current(self) -> str | None:
        """The token in use, if one was had (for redaction)."""
        header = self._header
        return None if header is None else header[1][len(b"Bearer ") :].decode("ascii")

    def _fresh(self) -> bool:
        expires = self._expires_at
        return self._header is not None and (expires is None or expires - REFRESH_MARGIN > time.time())

    async def header(self) -> tuple[bytes, bytes]:
        """``(b"authorization", b"Bearer <token>")``, renewed first if it is about to expire.

        Raises :class:`~condukt.providers.MissingCredentials` when no token
        can be had (or the one given expired). Cancelling it while a
        renewal runs in a worker thread abandons the wait (the thread
        finishes on its own; the next request renews again).
        """
        if self._fresh():
            assert self._header is not None
            return self._header
        async with self._lock:
            if not self._fresh():
                await self._renew()
            assert self._header is not None
            return self._header

    async def _renew(self) -> None:
        fetch = self._fetch
        try:
            if inspect.iscoroutinefunction(fetch):
                token, expires = await fetch()
            elif self.sync_inline:
                token, expires = fetch()
            else:
                token, expires = await trio.to_thread.run_sync(fetch, abandon_on_cancel=True)
        except MissingCredentials:
            raise
        except Exception as exc:  # the credential library's own errors: no common base class
            raise MissingCredentials(
                f"{self.provider}: no valid credentials ({type(exc).__name__}: {_short(exc)}); {self.hint}"
            ) from None
        if not isinstance(token, str) or not token:
            raise MissingCredentials(f"{self.provider}: the credentials gave no token; {self.hint}")
        if expires is not None and expires <= time.time():
            raise MissingCredentials(f"{self.provider}: the token expired and could not be renewed; {self.hint}")
        if not token.isascii() or any(ord(c) < 0x21 or ord(c) == 0x7F for c in token):
            raise MissingCredentials(f"{self.provider}: the token holds characters an HTTP header cannot; {self.hint}")
        self._header = (b"authorization", b"Bearer " + token.encode("ascii"))
        self._expires_at = expires


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text[:300]

