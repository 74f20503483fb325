"""Which proxy a request goes through: ``proxy=``, or ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY``.

The same rules as ``httpx.AsyncClient(trust_env=True)``, which the node's
client cannot use itself (httpx reads the environment only for its own
default transport): an explicit ``proxy`` is used for every request and the
environment is then ignored; otherwise ``urllib.request.getproxies()`` (the
environment, lower-case names first, and the system settings on Windows and
macOS) gives a proxy for ``http://`` URLs, one for ``https://`` URLs and
one for both (``all``), and ``NO_PROXY`` names the hosts that go direct:
``*`` (no proxy at all), a host name (itself and its subdomains), a name
with a leading dot (its subdomains only), ``localhost``, IP addresses and
networks (``10.0.0.0/8``), each optionally with ``:port``, or a
``scheme://host`` entry. A proxy URL without a scheme is ``http://``.
Unlike httpx, a proxy from the environment never applies to loopback
addresses (``localhost``, ``127.0.0.0/8``, ``::1``): a local model server
(Ollama, vLLM, a test server) is reached directly even when the machine's
environment names a proxy for the internet; an explicit ``proxy=`` applies
to every request.

Only ``http://`` and ``https://`` proxies are spoken (a plain forward proxy
for ``http://`` URLs, a ``CONNECT`` tunnel for ``https://`` ones); the
credentials in a proxy URL's userinfo become a ``Proxy-Authorization:
Basic`` header sent to the proxy alone and never shown (:attr:`Proxy.label`
has no userinfo).
"""

from __future__ import annotations

import base64
import ipaddress
import urllib.request
from collections.abc import Mapping

import httpx

__all__ = ["Proxy", "ProxyMap"]


class Proxy:
    """One proxy: where it is, and the headers every request to it carries."""

    __slots__ = ("headers", "host", "label", "port", "scheme", "ssl_context")

    def __init__(self, proxy: httpx.Proxy | httpx.URL | str) -> None:
        if not isinstance(proxy, httpx.Proxy):
            text = str(proxy)
            proxy = httpx.Proxy(text if "://" in text else "http://" + text)
        url = proxy.url
        if url.scheme not in ("http", "https"):
            raise ValueError(
                f"proxy {url.scheme}://{url.host}: only http:// and https:// proxies are supported by"
                " TrioTransport; for SOCKS give the node another transport"
                " (configure_http(node, transport=httpx.AsyncHTTPTransport(proxy=...)), with httpx[socks])"
            )
        self.scheme = url.raw_scheme
        self.host = url.host
        self.port = url.port or (443 if self.scheme == b"https" else 80)
        self.ssl_context = proxy.ssl_context
        #: ``scheme://host:port``, without credentials: for messages and logs.
        self.label = f"{url.scheme}://{self.host}:{self.port}"
        headers = [(name, value) for name, value in proxy.headers.raw if name.lower() != b"proxy-authorization"]
        auth = proxy.raw_auth
        if auth is not None:
            token = base64.b64encode(auth[0] + b":" + auth[1])
            headers.append((b"Proxy-Authorization", b"Basic " + token))
        else:
            headers.extend((name, value) for name, value in proxy.headers.raw if name.lower() == b"proxy-authorization")
        #: Sent to the proxy with every forwarded request and every ``CONNECT``.
        self.headers = headers

    def __repr__(self) -> str:
        return f"<Proxy {self.label}>"


class _Bypass:
    """One ``NO_PROXY`` entry."""

    __slots__ = ("domain", "network", "port", "scheme", "subdomains_only")

    def __init__(self, entry: str) -> None:
        self.scheme: str | None = None
        if "://" in entry:
            scheme, entry = entry.split("://", 1)
            self.scheme = scheme.lower()
            entry = entry.rstrip("/")
        self.port: int | None = None
        host = entry
        if host.startswith("["):  # [v6]:port
            host, _, rest = host[1:].partition("]")
            if rest.startswith(":") and rest[1:].isdigit():
                self.port = int(rest[1:])
        elif host.count(":") == 1:
            name, _, port = host.partition(":")
            if port.isdigit():
                host, self.port = name, int(port)
        self.network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
        try:
            self.network = ipaddress.ip_network(host, strict=False)
        except ValueError:
            pass
        self.subdomains_only = host.startswith(".")
        self.domain = host.lstrip("*").lstrip(".").lower()

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if self.scheme is not None and self.scheme != scheme:
            return False
        if self.port is not None and self.port != port:
            return False
        host = host.lower()
        if self.network is not None:
            try:
                return ipaddress.ip_address(host) in self.network
            except ValueError:
                return False
        if host.endswith("." + self.domain):
            return True
        return host == self.domain and not self.subdomains_only


class ProxyMap:
    """The proxy of each request: see the module's docstring for the rules."""

    __slots__ = ("_bypass", "_explicit", "_schemes")

    def __init__(self, proxy: httpx.Proxy | httpx.URL | str | None = None, *, trust_env: bool = True) -> None:
        self._schemes: dict[str, Proxy] = {}
        self._bypass: list[_Bypass] = []
        self._explicit = proxy is not None
        if proxy is not None:
            self._schemes["http"] = self._schemes["https"] = Proxy(proxy)
        elif trust_env:
            self._from(urllib.request.getproxies())

    def _from(self, settings: Mapping[str, str]) -> None:
        entries = [entry.strip() for entry in settings.get("no", "").split(",")]
        if "*" in entries:
            return
        every = settings.get("all")
        for scheme in ("http", "https"):
            url = settings.get(scheme) or every
            if url:
                self._schemes[scheme] = Proxy(url)
        self._bypass = [_Bypass(entry) for entry in entries if entry]

    def __bool__(self) -> bool:
        return bool(self._schemes)

    def lookup(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy for a request to ``scheme://host:port``, or ``None`` to go direct."""
        proxy = self._schemes.get(scheme)
        if proxy is None or any(bypass.matches(scheme, host, port) for bypass in self._bypass):
            return None
        if not self._explicit and _loopback(host):
            return None
        return proxy


def _loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost``, ``127.x.x.x``, ``::1``)."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
