"""Server definitions: :func:`stdio`, :func:`http`, :func:`sse` — tool sources for an agent's tools list."""

from __future__ import annotations

import logging
import os
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..tools import Tool, ToolSet, ToolSource, ToolSourceContext
from ._connection import Channel
from ._tool import McpTool

__all__ = ["McpServer", "http", "sse", "stdio"]

logger = logging.getLogger("condukt.mcp")

_NO_TOOLS: tuple[Tool, ...] = ()


def _pairs(value: Mapping[str, Any] | None, what: str) -> tuple[tuple[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping of names to strings or condukt secrets, got {type(value).__name__}")
    pairs = []
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what} names must be non-empty strings, got {name!r}")
        if not isinstance(item, str) and not hasattr(item, "resolve") and not callable(item):
            raise TypeError(f"{what}[{name!r}] must be a string or a condukt secret (condukt.secrets.env(...))")
        pairs.append((name, item))
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


@attrs.frozen(repr=False, eq=False)
class McpServer(ToolSource):
    """An MCP server an agent takes tools from (build one with :func:`stdio`, :func:`http` or :func:`sse`).

    Put it in an agent's tools list: the agent offers the model the
    server's tools, named as the server names them (``<prefix>_<name>``
    with ``prefix``), with their input schemas. Agents on a node that use
    equal definitions (everything but ``prefix``) share one connection,
    a supervised process; ``shared=False`` gives each agent its own.
    """

    transport: str
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, Any], ...] = ()
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, Any], ...] = ()
    prefix: str | None = None
    shared: bool = True
    connect_timeout: float = 30.0
    max_restarts: int = 3
    max_seconds: float = 5.0
    reap: bool = True

    def key(self) -> Hashable:
        """What makes two definitions one connection: all but ``prefix`` (and ``shared``)."""
        return (self.transport, self.command, self.env, self.cwd, self.url, self.headers, self.reap)

    def path(self) -> Path:
        """The working directory of a stdio server (the node's own when ``cwd`` is None)."""
        return Path(self.cwd) if self.cwd is not None else Path.cwd()

    async def open(self, context: ToolSourceContext) -> ToolSet:
        """Connect (or join the node's connection) and return the agent's view of the tools.

        Raises :class:`McpConnectError` if the server cannot be started or
        does not answer within ``connect_timeout``. Cancelling it gives up
        the connection (stopped unless another agent uses it).
        """
        channel = await Channel.acquire(context.node, self)
        return _Tools(channel, self.prefix)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, McpServer):
            return NotImplemented
        return self.key() == other.key() and self.prefix == other.prefix and self.shared == other.shared

    def __hash__(self) -> int:
        return hash((self.key(), self.prefix, self.shared))

    def __repr__(self) -> str:
        # Names only: env and header values may be secrets.
        where = " ".join(self.command) if self.transport == "stdio" else self.url
        extra = [
            f"{label}={[name for name, _ in items]}"
            for label, items in (("env", self.env), ("headers", self.headers))
            if items
        ]
        if self.prefix:
            extra.append(f"prefix={self.prefix!r}")
        return f"<MCP {self.transport} server {where!r}{' ' + ' '.join(extra) if extra else ''}>"


class _Tools(ToolSet):
    """One agent's view of a connection: its tools, prefixed, rebuilt when the listing changes."""

    def __init__(self, channel: Channel, prefix: str | None) -> None:
        self.channel = channel
        self.prefix = prefix
        self.version = -1
        self.current: tuple[Tool, ...] = ()

    def tools(self) -> tuple[Tool, ...]:
        """The server's tools as listed last; none once the connection is gone for good."""
        channel = self.channel
        if not channel.running:
            return _NO_TOOLS
        if channel.version != self.version:
            self.version = channel.version
            self.current = _usable(channel, self.prefix)
        return self.current

    async def sync(self) -> None:
        """Wait (5 s at most) for the listing a ``list_changed`` announced. Cancellation: stops waiting."""
        await self.channel.synced(5.0)

    async def aclose(self) -> None:
        """Leave the connection (the last agent to leave stops it). Cancellation: the stop is shielded."""
        await self.channel.release()


def _usable(channel: Channel, prefix: str | None) -> tuple[Tool, ...]:
    """The listing's tools as condukt tools; one whose schema is unusable, or whose name repeats, is left out (logged).

    A server's odd tool must not take the agent down with it: the other tools stay usable.
    """
    tools: dict[str, Tool] = {}
    for remote in channel.listing:
        try:
            tool = McpTool(channel, remote, prefix)
            tool.check()
        except (TypeError, ValueError) as exc:
            logger.warning("%r: tool %r left out: %s", channel.definition, remote.name, exc)
            continue
        if tool.name in tools:
            logger.warning(
                "%r: tool %r left out: a tool is already named %r", channel.definition, remote.name, tool.name
            )
            continue
        tools[tool.name] = tool
    return tuple(tools.values())


def _check_prefix(prefix: str | None) -> str | None:
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise TypeError(f"prefix must be a non-empty string or None, got {prefix!r}")
    return prefix


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    allowed = {"shared", "connect_timeout", "max_restarts", "max_seconds"}
    unknown = set(options) - allowed
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; expected some of {sorted(allowed)}")
    return dict(options)


def stdio(
    command: str,
    *args: str,
    env: Mapping[str, Any] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    prefix: str | None = None,
    reap: bool = True,
    **options: Any,
) -> McpServer:
    """An MCP server started as a subprocess and spoken to over its stdin and stdout.

    ``env`` adds variables (values are strings or condukt secrets such as
    ``condukt.secrets.env("GH_TOKEN")``, resolved when the connection
    starts and redacted from the server's results and errors) to the
    SDK's small default environment (``HOME``, ``PATH``, ``USER``...).
    The server runs under condukt's reaping launcher (``reap=True``, see
    :class:`condukt.sandbox.Local`), so when the connection stops, every
    process it started goes too. ``options``: ``shared`` (default True),
    ``connect_timeout`` (30 s), ``max_restarts`` and ``max_seconds`` (the
    connection supervisor's intensity: 3 in 5 s).
    """
    if not isinstance(command, str) or not command:
        raise TypeError(f"command must be a non-empty string, got {command!r}")
    if not all(isinstance(arg, str) for arg in args):
        raise TypeError("stdio() arguments must be strings")
    return McpServer(
        "stdio",
        command=(command, *args),
        env=_pairs(env, "env"),
        cwd=os.fspath(cwd) if cwd is not None else None,
        prefix=_check_prefix(prefix),
        reap=reap,
        **_options(options),
    )


def _url(url: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
    return url


def http(url: str, *, headers: Mapping[str, Any] | None = None, prefix: str | None = None, **options: Any) -> McpServer:
    """An MCP server at ``url`` spoken to over streamable HTTP (the current MCP HTTP transport).

    ``headers`` values are strings or condukt secrets (redacted from the
    server's results and errors). ``options`` as for :func:`stdio`.
    """
    return McpServer(
        "http", url=_url(url), headers=_pairs(headers, "headers"), prefix=_check_prefix(prefix), **_options(options)
    )


def sse(url: str, *, headers: Mapping[str, Any] | None = None, prefix: str | None = None, **options: Any) -> McpServer:
    """An MCP server at ``url`` spoken to over the older HTTP+SSE transport. As :func:`http` otherwise."""
    return McpServer(
        "sse", url=_url(url), headers=_pairs(headers, "headers"), prefix=_check_prefix(prefix), **_options(options)
    )
