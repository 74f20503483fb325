"""The node's HTTP services: one shared ``httpx.AsyncClient`` and the per-provider limits.

Every model resolved on a node sends through the same client (one
connection pool) and shares :class:`~condukt.providers.ProviderLimits` with
every other model of the same provider endpoint. Both are created lazily,
on first use, and the client is closed when the node closes.
"""

from __future__ import annotations

import http.cookiejar
import ssl
from typing import Any

import attrs
import httpx

from .limits import ProviderLimits
from .transport import TrioTransport

__all__ = [
    "DEFAULT_BASE_URLS",
    "HttpSettings",
    "NodeHttp",
    "configure_http",
    "endpoint_name",
    "node_http",
    "provider_limits",
]

_KEY = "condukt.providers"

#: Each provider prefix's default base URL (filled in as providers register).
DEFAULT_BASE_URLS: dict[str, str] = {}


def endpoint_name(provider: str, base_url: str | None) -> str:
    """The key limits are shared under: the provider prefix and its base URL."""
    url = (base_url or DEFAULT_BASE_URLS.get(provider, "")).rstrip("/")
    return f"{provider} {url}" if url else provider


@attrs.frozen
class HttpSettings:
    """How a node's shared HTTP client is built.

    ``max_connections`` bounds requests in flight through the client (each
    holds one HTTP/1.1 connection), ``max_keepalive_connections`` the idle
    connections kept for reuse, ``keepalive_expiry`` how long one is kept.
    ``connect_timeout``, ``read_timeout`` (between two chunks of a response,
    so a long stream is fine) and ``write_timeout`` are seconds. Waiting for
    a free connection has no timeout of its own: it runs under the caller's
    cancel scope (the run's timeout). ``transport`` replaces the built-in
    :class:`~condukt.providers.TrioTransport` (proxies, HTTP/2, tests);
    ``verify`` is passed to httpx's TLS set-up. Requests say
    ``User-Agent: condukt/<version>`` and ``Accept-Encoding: gzip, deflate``
    unless they set these headers themselves.

    ``proxy`` (a URL, ``"http://user:pass@proxy:3128"``, or an
    ``httpx.Proxy``) sends every request through that proxy: plain HTTP as
    a forward proxy, HTTPS through a ``CONNECT`` tunnel, the URL's
    credentials as ``Proxy-Authorization`` to the proxy only. Without it,
    and with ``trust_env`` (the default, as in httpx), ``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` are read from the
    environment when the client is built, by httpx's rules. Both apply to
    the built-in transport only.
    """

    max_connections: int | None = 1000
    max_keepalive_connections: int | None = 1000
    keepalive_expiry: float = 30.0
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    write_timeout: float = 60.0
    transport: httpx.AsyncBaseTransport | None = None
    verify: ssl.SSLContext | bool = True
    proxy: httpx.Proxy | str | None = None
    trust_env: bool = True

    def timeout(self) -> httpx.Timeout:
        """The client's default per-request timeouts."""
        return httpx.Timeout(
            connect=self.connect_timeout, read=self.read_timeout, write=self.write_timeout, pool=None
        )

    def build_client(self) -> httpx.AsyncClient:
        """A new client with these settings (the caller closes it)."""
        return self.build_client_and_transport()[0]

    def build_client_and_transport(self) -> tuple[httpx.AsyncClient, httpx.AsyncBaseTransport]:
        """A new client with these settings, and the transport it sends through (the caller closes the client)."""
        transport = self.transport
        if transport is None:
            context = None if self.verify is True else httpx.create_ssl_context(verify=self.verify)
            transport = TrioTransport(
                max_connections=self.max_connections,
                max_keepalive_connections=self.max_keepalive_connections,
                keepalive_expiry=self.keepalive_expiry,
                ssl_context=context,
                proxy=self.proxy,
                trust_env=self.trust_env,
            )
        from ... import __version__  # here: the package is still importing this module at import time

        client = httpx.AsyncClient(
            transport=transport,
            timeout=self.timeout(),
            follow_redirects=False,
            cookies=_NoCookies(),
            headers={"User-Agent": f"condukt/{__version__}", "Accept-Encoding": "gzip, deflate"},
        )
        return client, transport


class _NoCookies(http.cookiejar.CookieJar):
    """Model APIs need no cookies: skip the cookie jar's work on every response."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def add_cookie_header(self, request: Any) -> None:
        return None


class NodeHttp:
    """The HTTP client and provider limits of one node (or of one model outside a node)."""

    def __init__(self, settings: HttpSettings | None = None) -> None:
        self.settings = settings or HttpSettings()
        self._client: httpx.AsyncClient | None = None
        self._transport: httpx.AsyncBaseTransport | None = None
        self.limits: dict[str, ProviderLimits] = {}

    @property
    def started(self) -> bool:
        """Whether the client was created already."""
        return self._client is not None

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        """The shared client's transport (its connection pool)."""
        if self._transport is None:
            self.client  # noqa: B018  (creates the client and its transport)
        assert self._transport is not None
        return self._transport

    @property
    def client(self) -> httpx.AsyncClient:
        """The shared client, created on first use."""
        client = self._client
        if client is None:
            client, self._transport = self.settings.build_client_and_transport()
            self._client = client
        return client

    def limits_for(self, name: str) -> ProviderLimits:
        """The limits of provider endpoint ``name``, created with the defaults on first use."""
        limits = self.limits.get(name)
        if limits is None:
            limits = self.limits[name] = ProviderLimits(name)
        return limits

    async def aclose(self) -> None:
        """Close the client (a later request opens a new one).

        With the built-in :class:`~condukt.providers.lowlevel.TrioTransport`
        everything is closed before a cancellation is raised, so a cancelled
        close still closes; another transport's ``aclose`` may be cut short.
        The client is forgotten either way.
        """
        client, self._client, self._transport = self._client, None, None
        if client is not None:
            await client.aclose()


def node_http(node: Any) -> NodeHttp:
    """The HTTP services of ``node``, created (and registered to close with it) on first use."""
    services: NodeHttp | None = node.extensions.get(_KEY)
    if services is None:
        services = node.extensions[_KEY] = NodeHttp()
        node.on_close(services.aclose)
    return services


def configure_http(node: Any, settings: HttpSettings | None = None, **changes: Any) -> HttpSettings:
    """Set how ``node``'s shared HTTP client is built: an :class:`HttpSettings` or its fields.

    ``configure_http(node, max_connections=2000, read_timeout=120)``. Call it
    before the node's first provider request; raises ``RuntimeError`` once
    the client exists. Returns the settings in force.
    """
    services = node_http(node)
    if services.started:
        raise RuntimeError("the node's HTTP client is already in use; configure it before the first request")
    base = settings or services.settings
    services.settings = attrs.evolve(base, **changes) if changes else base
    return services.settings


def provider_limits(node: Any, provider: str, base_url: str | None = None) -> ProviderLimits:
    """The :class:`ProviderLimits` ``node`` applies to ``provider`` at ``base_url``.

    ``base_url`` defaults to the provider's default. Configure them with
    ``provider_limits(node, "anthropic").configure(max_concurrency=8)`` or
    with the ``max_concurrency``, ``requests_per_minute`` and
    ``tokens_per_minute`` model options.
    """
    return node_http(node).limits_for(endpoint_name(provider, base_url))
