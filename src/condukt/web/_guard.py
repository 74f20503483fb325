"""The guard of every condukt HTTP surface against requests a hostile web page makes a browser send.

Binding a server to 127.0.0.1 keeps other machines out, not the pages
open in a browser on the same machine. Such a page can (1) send "simple"
cross-site requests, which need no CORS preflight: a ``POST`` whose body
is ``text/plain``, a form, or no body at all, with ``Origin`` set to the
page's; and (2) rebind its own DNS name to 127.0.0.1, after which its
requests are same-origin to the browser, and their answers readable by the
page, but carry the attacker's name in ``Host``. :class:`BrowserGuard`
refuses both, as the MCP SDK's transport security does for MCP servers:

* ``Host`` must name this server: ``localhost`` (and ``*.localhost``),
  ``127.0.0.1``, ``::1``, the address the connection arrived at, or a name
  in ``allowed_hosts``; otherwise ``421 HostNotAllowed``;
* ``Origin``, when a browser sends one, must be this server's own origin
  (same host and port as ``Host``) or one of ``allowed_origins``;
  otherwise ``403 OriginNotAllowed``;
* a request that may carry a body (any method but ``GET``, ``HEAD`` and
  ``OPTIONS``) must declare it JSON (``application/json`` or
  ``application/*+json``) or carry none; otherwise
  ``415 UnsupportedMediaType``. A JSON body forces a browser to ask a CORS
  preflight first, which these apps never grant.

It holds with or without a bearer token, whichever server runs the app
(an ASGI middleware: hypercorn on trio, uvicorn on asyncio, mounted in
FastAPI).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.middleware import Middleware

from ._http import HTTPError

__all__ = ["LOCAL_HOSTS", "BrowserGuard", "guard_middleware"]

#: Host names always allowed: the loopback names and addresses.
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

_NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}

ASGIApp = Any


def _host_name(value: str) -> str:
    """A host name for comparison: lower case, no brackets around IPv6, no trailing dot."""
    name = value.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name.rstrip(".")


def _split_host(header: str) -> tuple[str, int | None] | None:
    """``Host`` as (name, port or None); None if it cannot be a host."""
    header = header.strip()
    if header.startswith("["):  # [IPv6]:port
        end = header.find("]")
        if end < 0:
            return None
        name, rest = header[1:end], header[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        name, _, port_text = header.partition(":")
    if port_text:
        if not (port_text.isascii() and port_text.isdigit()) or len(port_text) > 5:
            return None
        port: int | None = int(port_text)
    else:
        port = None
    if not name:
        return None
    return _host_name(name), port


def _check_hosts(hosts: Iterable[str]) -> frozenset[str]:
    if isinstance(hosts, str):
        raise TypeError("allowed_hosts must be a list of host names, not a str")
    checked = set()
    for host in hosts:
        if not isinstance(host, str) or not host.strip():
            raise ValueError(f"allowed_hosts entries must be non-empty host names, got {host!r}")
        name = _host_name(host)
        if ":" in name:
            try:
                ipaddress.IPv6Address(name)
            except ValueError:
                raise ValueError(
                    f"allowed_hosts entries are host names without a port (any port is allowed), got {host!r}"
                ) from None
        if "/" in name or (name.startswith("*") and name != "*" and not name.startswith("*.")):
            raise ValueError(f"allowed_hosts entries are host names, '*.<domain>' or '*', got {host!r}")
        checked.add(name)
    return frozenset(checked)


def _check_origins(origins: Iterable[str]) -> frozenset[str]:
    if isinstance(origins, str):
        raise TypeError("allowed_origins must be a list of origins, not a str")
    checked = set()
    for origin in origins:
        if not isinstance(origin, str):
            raise ValueError(f"allowed_origins entries must be strings, got {origin!r}")
        if origin == "*":
            checked.add(origin)
            continue
        parts = urlsplit(origin.strip().lower())
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") or parts.query:
            raise ValueError(f"allowed_origins entries are 'scheme://host[:port]' (or '*'), got {origin!r}")
        checked.add(f"{parts.scheme}://{parts.netloc}")
    return frozenset(checked)


class BrowserGuard:
    """An ASGI middleware refusing foreign ``Host``, foreign ``Origin`` and non-JSON bodies (see the module).

    ``allowed_hosts``: more host names this server answers to (its public
    name behind a proxy: ``["api.example.com"]``), ``"*.example.com"`` for a
    domain and its subdomains, or ``"*"`` for any (no DNS-rebinding
    protection: only behind a proxy that checks ``Host`` itself). Ports are
    not compared. ``allowed_origins``: more origins whose pages may call the
    app (``["https://app.example.com"]``; ``"*"``: any). ``json_only=False``
    lets bodies of other types through (for a surface that takes forms).
    Refusals are JSON: ``{"error", "message"}``.

    Wrap any ASGI app (``BrowserGuard(app, allowed_hosts=[...])``) or give
    it to Starlette as ``Middleware(BrowserGuard, ...)``; every condukt
    surface does. Raises ``TypeError``/``ValueError`` for bad options.
    Cancellation: it only reads the request's headers, so it adds nothing.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        json_only: bool = True,
    ) -> None:
        if not isinstance(json_only, bool):
            raise TypeError(f"json_only must be a bool, got {json_only!r}")
        self.app = app
        self.allowed_hosts = _check_hosts(allowed_hosts)
        self.allowed_origins = _check_origins(allowed_origins)
        self.json_only = json_only
        self._any_host = "*" in self.allowed_hosts
        self._domains = tuple(name[1:] for name in self.allowed_hosts if name.startswith("*."))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http" or kind == "websocket":
            refusal = self.refusal(scope)
            if refusal is not None:
                if kind == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": refusal.body["error"]})
                    return
                await refusal.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def host_allowed(self, name: str, scope: Any) -> bool:
        """Whether the host name ``name`` (lower case, no port) is this server's (see the class)."""
        if self._any_host or name in LOCAL_HOSTS or name.endswith(".localhost") or name in self.allowed_hosts:
            return True
        server = scope.get("server")
        if server and isinstance(server[0], str) and _host_name(server[0]) == name:
            return True
        return any(name.endswith(domain) or name == domain[1:] for domain in self._domains)

    def refusal(self, scope: Any) -> HTTPError | None:
        """The error answer for the request of ``scope``, or None to let it through."""
        host_header = origin = content_type = None
        length = chunked = False
        for key, value in scope.get("headers", ()):
            if key == b"host":
                host_header = value.decode("latin-1")
            elif key == b"origin":
                origin = value.decode("latin-1")
            elif key == b"content-type":
                content_type = value.decode("latin-1")
            elif key == b"content-length":
                length = value.strip() not in (b"", b"0")
            elif key == b"transfer-encoding":
                chunked = True
        host = None
        if host_header is not None:
            host = _split_host(host_header)
            if host is None or not self.host_allowed(host[0], scope):
                return HTTPError(
                    421, "HostNotAllowed",
                    f"this server does not answer to Host {host_header[:200]!r}: allow the name with "
                    "allowed_hosts=[...] (a page that rebinds its own name to this address sends its name)",
                )
        if origin is not None and not self._origin_allowed(origin, host, scope):
            return HTTPError(
                403, "OriginNotAllowed",
                f"requests from pages of {origin[:200]!r} are not allowed: allow that origin with "
                "allowed_origins=[...]",
            )
        if self.json_only and scope["type"] == "http" and scope.get("method", "GET") not in _NO_BODY_METHODS:
            if content_type is not None:
                media = content_type.partition(";")[0].strip().lower()
                if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
                    return None
            elif not (length or chunked):
                return None
            return HTTPError(
                415, "UnsupportedMediaType",
                f"request bodies must be JSON (Content-Type: application/json), got {content_type!r}",
            )
        return None

    def _origin_allowed(self, origin: str, host: tuple[str, int | None] | None, scope: Any) -> bool:
        origin = origin.strip().lower()
        if origin in self.allowed_origins or "*" in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        try:
            origin_port = parts.port
        except ValueError:
            return False
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path or parts.query:
            return False  # "null" (a sandboxed frame, a file), or not an origin at all
        origin_port = origin_port or _DEFAULT_PORTS[parts.scheme]
        if host is None:  # no Host header (HTTP/1.0): the address the connection arrived at
            server = scope.get("server")
            if not server:
                return False
            host = (_host_name(str(server[0])), server[1])
        name, port = host
        # Same origin: the page's host and port are those the request was sent to.
        return _host_name(parts.hostname) == name and origin_port == (port or _DEFAULT_PORTS[parts.scheme])


def guard_middleware(allowed_hosts: Iterable[str], allowed_origins: Iterable[str]) -> Middleware:
    """Starlette's ``Middleware`` entry of a :class:`BrowserGuard`, its options checked now (``ValueError``)."""
    checked = BrowserGuard(None, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
    return Middleware(BrowserGuard, allowed_hosts=checked.allowed_hosts, allowed_origins=checked.allowed_origins)
