"""Server definitions: :func:`stdio`, :func:`http`, :func:`sse` — tool sources for an agent's tools list."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..messages import AssistantMessage, DocumentBlock, ImageBlock, TextBlock, UserMessage
from ..otp import Node, current_node
from ..tools import Tool, ToolContext, ToolError, ToolSet, ToolSource, ToolSourceContext
from ._errors import McpRequestError

if TYPE_CHECKING:
    import mcp_types as types

    from ._connection import Channel

# The SDK (and the modules that import it) are imported where a connection or a result needs
# them, not with this module: `import condukt.mcp` stays cheap (benchmarks/mcp_servers.py).

__all__ = ["McpPrompt", "McpServer", "http", "render_resource", "sse", "stdio"]

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


def _check_close_timeout(instance: object, attribute: object, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
        raise ValueError(f"close_timeout must be a number of seconds >= 0 or None, got {value!r}")


@attrs.frozen(repr=False, eq=False)
class McpServer(ToolSource):
    """An MCP server an agent takes tools from (build one with :func:`stdio`, :func:`http` or :func:`sse`).

    Put it in an agent's tools list: the agent offers the model the
    server's tools, named as the server names them (``<prefix>_<name>``
    with ``prefix``), with their input schemas. Agents on a node that use
    equal definitions (everything but ``prefix`` and ``resources``) share
    one connection, a supervised process; ``shared=False`` gives each agent
    its own. Its prompts and resources are read with :meth:`list_prompts`,
    :meth:`get_prompt`, :meth:`list_resources` and :meth:`read_resource`.
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
    close_timeout: float | None = attrs.field(default=1.0, validator=_check_close_timeout)
    max_restarts: int = 3
    max_seconds: float = 5.0
    reap: bool = True
    retry_delay: float | None = 1.0
    max_retry_delay: float = 60.0
    resources: bool = False

    def key(self) -> Hashable:
        """What makes two definitions one connection: all but ``prefix``, ``resources`` (and ``shared``)."""
        return (self.transport, self.command, self.env, self.cwd, self.url, self.headers, self.reap,
                self.max_restarts, self.max_seconds, self.retry_delay, self.max_retry_delay)

    def path(self) -> Path:
        """The working directory of a stdio server (the node's own when ``cwd`` is None)."""
        return Path(self.cwd) if self.cwd is not None else Path.cwd()

    async def open(self, context: ToolSourceContext) -> ToolSet:
        """Connect (or join the node's connection) and return the agent's view of the tools.

        Raises :class:`McpConnectError` if the server cannot be started or
        does not answer within ``connect_timeout``. Cancelling it gives up
        the connection (stopped unless another agent uses it).
        """
        from ._connection import Channel

        channel = await Channel.acquire(context.node, self)
        return _Tools(channel, self.prefix, self.resources)

    # ------------------------------------------------------------------ prompts and resources

    @contextlib.asynccontextmanager
    async def _session(self, node: Node | None) -> AsyncIterator[tuple[Channel, Any]]:
        node = node if node is not None else current_node()
        if node is None:
            raise RuntimeError("no condukt node: call this inside `async with condukt.open_node()` or pass node=")
        from mcp.shared.exceptions import MCPError

        from ._connection import Channel

        channel = await Channel.acquire(node, self)
        try:
            try:
                session = await channel.session()
            except ToolError as exc:
                raise McpRequestError(str(exc)) from None
            yield channel, session
        except MCPError as exc:
            raise McpRequestError(channel.redact(f"MCP server error {exc.error.code}: {exc.error.message}")) from None
        finally:
            with trio.CancelScope(shield=True):
                await channel.release()

    async def list_prompts(self, *, node: Node | None = None) -> tuple[types.Prompt, ...]:
        """The server's prompts (the SDK's ``Prompt``: name, description, arguments), every page.

        Uses the node's connection to the server (the one its agents
        share, started for the call if none is). ``node`` defaults to the
        current one. Raises :class:`McpConnectError` if the server cannot
        be reached, :class:`McpRequestError` if it answers with an error
        (one without prompts does). Cancellation cancels the request.
        """
        import mcp_types as types

        async with self._session(node) as (_, session):
            found: list[types.Prompt] = []
            cursor: str | None = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                result = await session.list_prompts(params=params)
                found.extend(result.prompts)
                cursor = result.next_cursor
                if not cursor or len(found) >= _MAX_LISTED:
                    return tuple(found)

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None, *,
                         node: Node | None = None) -> McpPrompt:
        """The server's prompt ``name`` filled with ``arguments``, as condukt messages.

        Insert it into a run with ``await agent.run(prompt.text,
        images=prompt.images)``, or seed a conversation with
        ``prompt.messages``. Raises what :meth:`list_prompts` raises (an
        unknown prompt or a missing argument is the server's error).
        Cancellation cancels the request.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string, got {name!r}")
        async with self._session(node) as (channel, session):
            result = await session.get_prompt(name, dict(arguments or {}))
            return McpPrompt(name, result.description or "", _prompt_messages(result, channel.redact))

    async def list_resources(self, *, node: Node | None = None) -> tuple[types.Resource, ...]:
        """The server's resources (the SDK's ``Resource``: uri, name, mime type...), every page.

        Raises what :meth:`list_prompts` raises. Cancellation cancels the request.
        """
        async with self._session(node) as (_, session):
            return await _list_resources(session)

    async def read_resource(self, uri: str, *, node: Node | None = None
                            ) -> tuple[TextBlock | ImageBlock | DocumentBlock, ...]:
        """The resource at ``uri`` as content blocks (text, images, PDF documents; other bytes as a note).

        Raises what :meth:`list_prompts` raises. Cancellation cancels the request.
        """
        async with self._session(node) as (channel, session):
            result = await session.read_resource(uri)
            return render_resource(result, channel.redact)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, McpServer):
            return NotImplemented
        return (self.key() == other.key() and self.prefix == other.prefix and self.shared == other.shared
                and self.resources == other.resources)

    def __hash__(self) -> int:
        return hash((self.key(), self.prefix, self.shared, self.resources))

    def name_hint(self) -> str:
        """The server's command or URL (no env or header values), for descriptions."""
        return " ".join(self.command) if self.transport == "stdio" else self.url

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


@attrs.frozen
class McpPrompt:
    """A prompt an MCP server filled in (:meth:`McpServer.get_prompt`).

    ``messages`` are its messages as condukt's (user and assistant, text,
    images and embedded resources as content); ``text`` is the text of its
    user messages (joined by blank lines) and ``images`` their images: what
    ``agent.run(prompt.text, images=prompt.images)`` takes.
    """

    name: str
    description: str
    messages: tuple[UserMessage | AssistantMessage, ...]

    @property
    def text(self) -> str:
        """The user messages' text, joined by blank lines."""
        return "\n\n".join(m.text for m in self.messages if type(m) is UserMessage and m.text)

    @property
    def images(self) -> tuple[ImageBlock, ...]:
        """The user messages' images."""
        return tuple(b for m in self.messages if type(m) is UserMessage for b in m.content if type(b) is ImageBlock)


#: Entries a listing reads at most (pages are followed up to it).
_MAX_LISTED = 1000


def _prompt_messages(result: types.GetPromptResult, redact: Any) -> tuple[UserMessage | AssistantMessage, ...]:
    import mcp_types as types

    from ._tool import render

    messages: list[UserMessage | AssistantMessage] = []
    for message in result.messages:
        blocks = render(types.CallToolResult(content=[message.content]), redact)
        if message.role == "assistant":
            messages.append(AssistantMessage(tuple(b for b in blocks if type(b) is TextBlock)))
        else:
            messages.append(UserMessage(blocks))
    return tuple(messages)


async def _list_resources(session: Any) -> tuple[types.Resource, ...]:
    import mcp_types as types

    found: list[types.Resource] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_resources(params=params)
        found.extend(result.resources)
        cursor = result.next_cursor
        if not cursor or len(found) >= _MAX_LISTED:
            return tuple(found)


def render_resource(result: types.ReadResourceResult, redact: Any = None
                    ) -> tuple[TextBlock | ImageBlock | DocumentBlock, ...]:
    """A ``resources/read`` result as content blocks (as a tool result's embedded resources are rendered)."""
    import mcp_types as types

    from ._tool import render

    content = [types.EmbeddedResource(type="resource", resource=item) for item in result.contents]
    return render(types.CallToolResult(content=content), redact)  # type: ignore[arg-type]


class _ListResources(Tool):
    """``<prefix>_list_resources``: the server's resources and resource templates, one per line."""

    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    idempotent = True  # read-only

    def __init__(self, channel: Channel, prefix: str | None) -> None:
        super().__init__()
        self.channel = channel
        from ._tool import tool_name

        self.name = tool_name(prefix, "list_resources")
        self.description = (f"Lists the resources of the MCP server {channel.definition.name_hint()} "
                            "(URIs to read with the read_resource tool), and its URI templates.")

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """List the resources. Cancelling it cancels the request."""
        from mcp.shared.exceptions import MCPError

        session = await self.channel.session()
        try:
            resources = await _list_resources(session)
            templates = (await session.list_resource_templates()).resource_templates
        except MCPError as exc:
            raise ToolError(self.channel.redact(f"MCP server error {exc.error.code}: {exc.error.message}")) from None
        lines = [f"{r.uri} | {r.name}" + (f" ({r.mime_type})" if r.mime_type else "")
                 + (f": {r.description}" if r.description else "") for r in resources]
        lines += [f"{t.uri_template} | {t.name} (template)" + (f": {t.description}" if t.description else "")
                  for t in templates]
        return self.channel.redact("\n".join(lines) or "(no resources)")


class _ReadResource(Tool):
    """``<prefix>_read_resource``: the resource at a URI, as content (text, images, PDF)."""

    idempotent = True  # read-only

    parameters = {
        "type": "object",
        "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
        "required": ["uri"],
        "additionalProperties": False,
    }

    def __init__(self, channel: Channel, prefix: str | None) -> None:
        super().__init__()
        self.channel = channel
        from ._tool import tool_name

        self.name = tool_name(prefix, "read_resource")
        self.description = f"Reads a resource of the MCP server {channel.definition.name_hint()} by its URI."

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Read the resource. Cancelling it cancels the request."""
        from mcp.shared.exceptions import MCPError

        session = await self.channel.session()
        try:
            result = await session.read_resource(args["uri"])
        except MCPError as exc:
            raise ToolError(self.channel.redact(f"MCP server error {exc.error.code}: {exc.error.message}")) from None
        blocks = render_resource(result, self.channel.redact)
        return list(blocks) if blocks else "(empty resource)"


class _Tools(ToolSet):
    """One agent's view of a connection: its tools, prefixed, rebuilt when the listing changes."""

    def __init__(self, channel: Channel, prefix: str | None, resources: bool = False) -> None:
        self.channel = channel
        self.prefix = prefix
        self.resources = resources
        self.version = -1
        self.current: tuple[Tool, ...] = ()

    def tools(self) -> tuple[Tool, ...]:
        """The server's tools as listed last; none once the connection is gone for good."""
        channel = self.channel
        if not channel.running:
            return _NO_TOOLS
        if channel.version != self.version:
            self.version = channel.version
            current = _usable(channel, self.prefix)
            capabilities = channel.capabilities
            if self.resources and capabilities is not None and capabilities.resources is not None:
                taken = {tool.name for tool in current}
                extra = [tool for tool in (_ListResources(channel, self.prefix), _ReadResource(channel, self.prefix))
                         if tool.name not in taken]  # a server's own tool of that name wins
                current = (*current, *extra)
            self.current = current
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
    from ._tool import McpTool

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
    allowed = {"shared", "connect_timeout", "close_timeout", "max_restarts", "max_seconds", "retry_delay",
               "max_retry_delay", "resources"}
    unknown = set(options) - allowed
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; expected some of {sorted(allowed)}")
    delay = options.get("retry_delay", 1.0)
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay > 0):
        raise ValueError(f"retry_delay must be None or a number > 0, got {delay!r}")
    longest = options.get("max_retry_delay", 60.0)
    if isinstance(longest, bool) or not isinstance(longest, (int, float)) or not longest > 0:
        raise ValueError(f"max_retry_delay must be a number > 0, got {longest!r}")
    if not isinstance(options.get("resources", False), bool):
        raise TypeError(f"resources must be a bool, got {options['resources']!r}")
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
    process it started goes too; its stderr is passed on, and its end is in
    the error when it fails. ``options``: ``shared`` (default True),
    ``connect_timeout`` (30 s), ``close_timeout`` (1 s: when the connection
    stops, its stdin is closed and the server gets that long to exit, then
    ``SIGTERM`` and as long again, then its tree is killed; ``None`` leaves
    it to the SDK's fixed 2 s, as does ``reap=False``), ``max_restarts`` and ``max_seconds`` (the
    connection supervisor's intensity: 3 in 5 s), ``retry_delay`` (1 s) and
    ``max_retry_delay`` (60 s): after the supervisor gave up, the connection
    is tried again after that delay, doubling (``retry_delay=None``: never),
    and ``resources`` (False): offer the model ``<prefix>_list_resources``
    and ``<prefix>_read_resource`` tools when the server has resources.
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
