"""A connection to an MCP server: a supervised process shared by the agents that use it.

One :class:`Channel` per server definition and node (or per agent, with
``shared=False``) holds what the agents read: the current
``ClientSession`` and tool listing. The :class:`Connection` process owns
the transport and the session for one incarnation: it connects, lists the
tools, re-lists them on ``notifications/tools/list_changed``, and crashes
when the transport ends (the server exited), so its supervisor restarts it
within its intensity. When the supervisor gives up, the channel's
:class:`Keeper` starts a new one after a back-off (doubling up to
``max_retry_delay``), so a server that is down for a while is retried, not
given up on. Tool calls do not go through the process's mailbox: they are
requests on the session, made from the calling tool's task, so a call costs
what the SDK's own client costs. A stdio server's stderr is kept (its last
:data:`STDERR_TAIL` bytes) to say why it failed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import mcp_types as types
import trio
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ..otp import CallError, ChildSpec, Down, Node, NoProc, Server, SupervisorHandle
from ..sandbox import Local
from ..secrets import NO_SECRETS, Secrets, resolve_secrets
from ..tools import ToolError
from ._errors import ConnectionLost, McpConnectError, McpRequestError

if TYPE_CHECKING:
    from ._definition import McpServer

__all__ = ["STDERR_TAIL", "Channel", "Connection", "ConnectionLost", "Keeper", "McpConnectError", "McpRequestError"]

logger = logging.getLogger("condukt.mcp")

#: Channels by node, then by connection key.
_CHANNELS: weakref.WeakKeyDictionary[Node, dict[Hashable, Channel]] = weakref.WeakKeyDictionary()
#: How much of a stdio server's stderr a connection keeps (its end), to say why the server failed.
STDERR_TAIL = 4096
#: A stdio server's whole tree goes with its launcher (a child subreaper on Linux; see condukt.sandbox.Local).
_LAUNCHER = Local()


class Channel:
    """What the agents using one MCP connection share: its session, tool listing and secrets."""

    def __init__(self, node: Node, definition: McpServer, key: Hashable) -> None:
        self.node = node
        self.definition = definition
        self.key = key
        self.users = 0
        self.supervisor: SupervisorHandle | None = None
        self.started = trio.Event()
        self.current: ClientSession | None = None
        self.listing: tuple[types.Tool, ...] = ()
        #: Bumped on every new listing (a connection, a restart, a list_changed).
        self.version = 0
        self.error: BaseException | None = None
        self.up = trio.Event()
        #: Set while a ``list_changed`` awaits its listing.
        self.refreshing: trio.Event | None = None
        self.secrets: Secrets = NO_SECRETS
        self.env: dict[str, str] = {}
        self.headers: dict[str, str] = {}
        #: What the server said it can do (``initialize``), once connected.
        self.capabilities: types.ServerCapabilities | None = None
        #: The end of a stdio server's stderr (every incarnation's, the latest last).
        self.stderr = bytearray()
        #: Successful connections so far (the keeper's back-off starts over after one).
        self.connects = 0
        #: When the keeper starts the connection again (trio time), while it waits to.
        self.retry_at: float | None = None
        self.keeper: Any = None

    # ------------------------------------------------------------------ sharing

    @classmethod
    async def acquire(cls, node: Node, definition: McpServer) -> Channel:
        """The channel for ``definition`` on ``node``, connected; started on first use.

        Raises :class:`McpConnectError` if the server cannot be started or
        does not answer within ``connect_timeout``. Cancelling it gives the
        use up (the connection stops if nobody else uses it).
        """
        table = _CHANNELS.setdefault(node, {})
        key: Hashable = definition.key() if definition.shared else object()
        channel = table.get(key)
        first = channel is None
        if channel is None:
            channel = table[key] = cls(node, definition, key)
        channel.users += 1
        try:
            if first:
                await channel._start()
            else:
                await channel.started.wait()
            with trio.move_on_after(definition.connect_timeout) as scope:
                await channel.session()
            if scope.cancelled_caught:
                why = f": {channel.why()}" if channel.error is not None or channel.stderr else ""
                raise McpConnectError(channel.redact(
                    f"{definition!r} did not connect within {definition.connect_timeout:g}s{why}"))
        except ToolError as exc:
            await channel.release()
            raise McpConnectError(str(exc)) from None
        except BaseException:
            with trio.CancelScope(shield=True):
                await channel.release()
            raise
        return channel

    async def _start(self) -> None:
        try:
            definition = self.definition
            spec: dict[str, Any] = {}
            for kind, items in (("env", definition.env), ("header", definition.headers)):
                for name, value in items:
                    if not isinstance(value, str):
                        spec[f"MCP_{kind.upper()}_{_label(name)}"] = value
            self.secrets = await resolve_secrets(spec) if spec else NO_SECRETS
            values = self.secrets.env

            def resolved(kind: str, items: tuple[tuple[str, Any], ...]) -> dict[str, str]:
                return {
                    name: value if isinstance(value, str) else values[f"MCP_{kind.upper()}_{_label(name)}"]
                    for name, value in items
                }

            self.env = resolved("env", definition.env)
            self.headers = resolved("header", definition.headers)
            self.keeper = await self.node.spawn(Keeper, self)
        finally:
            self.started.set()

    async def release(self) -> None:
        """One user fewer; the last one stops the connection (and a stdio server's process tree).

        Cancellation: the stop is shielded; it is bounded by the SDK's own
        shutdown timeouts (a server that ignores its closed stdin is killed).
        """
        self.users -= 1
        if self.users > 0:
            return
        table = _CHANNELS.get(self.node)
        if table is not None and table.get(self.key) is self:
            del table[self.key]
        keeper = self.keeper
        if keeper is not None and keeper.alive:
            # NoProc/CallError: it exited meanwhile (the node is closing): nothing to stop.
            with trio.CancelScope(shield=True), contextlib.suppress(NoProc, CallError):
                await keeper.stop("shutdown", timeout=None)
        supervisor = self.supervisor
        if supervisor is not None and supervisor.alive:
            with trio.CancelScope(shield=True), contextlib.suppress(NoProc, CallError):
                await supervisor.stop("shutdown", timeout=None)

    # ------------------------------------------------------------------ state

    @property
    def running(self) -> bool:
        """Whether the connection is up or being (re)started (its supervisor has not given up)."""
        supervisor = self.supervisor
        return supervisor is not None and supervisor.alive

    async def session(self) -> ClientSession:
        """The connected session; waits while the connection is being (re)started.

        Raises :class:`~condukt.tools.ToolError` if the connection is gone
        for good (its supervisor gave up). Cancellation: stops waiting.
        """
        while True:
            current = self.current
            if current is not None:
                return current
            supervisor = self.supervisor
            if supervisor is None or not supervisor.alive:
                raise ToolError(self.redact(f"{self.definition!r} is not running: {self.why()}"))
            async with trio.open_nursery() as race:
                race.start_soon(_first, race, self.up.wait)
                race.start_soon(_first, race, supervisor.wait)

    def why(self) -> str:
        """Why the connection is down: the last error, the server's stderr tail, when it is tried again."""
        error = self.error
        if error is None:
            text = "stopped"
        else:
            while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
                error = error.exceptions[0]
            text = f"{type(error).__name__}: {error}"
        tail = self.stderr.decode("utf-8", "replace").strip()
        if tail:
            text += f"; its stderr ends with:\n{tail}"
        if self.retry_at is not None:
            text += f"\n(tried again in {max(0.0, self.retry_at - trio.current_time()):.0f} s)"
        return text

    def connected(self, session: ClientSession, listing: tuple[types.Tool, ...],
                  capabilities: types.ServerCapabilities | None = None) -> None:
        """A connection is up with ``listing``."""
        self.current = session
        self.capabilities = capabilities
        self.connects += 1
        self.listed(listing)
        self.up.set()

    def listed(self, listing: tuple[types.Tool, ...]) -> None:
        """The server listed ``listing`` (after a ``list_changed``)."""
        self.listing = listing
        self.version += 1
        refreshed, self.refreshing = self.refreshing, None
        if refreshed is not None:
            refreshed.set()

    def changing(self) -> None:
        """The server said its tools changed: :meth:`synced` waits until they are listed again."""
        if self.refreshing is None:
            self.refreshing = trio.Event()

    async def synced(self, timeout: float) -> None:
        """Wait (``timeout`` at most) for a listing announced by ``list_changed``. Cancellation: stops waiting."""
        refreshing = self.refreshing
        if refreshing is not None:
            with trio.move_on_after(timeout):
                await refreshing.wait()

    def disconnected(self, error: BaseException | None) -> None:
        """The connection ended (``error`` is why, unless it was stopped)."""
        self.current = None
        refreshed, self.refreshing = self.refreshing, None
        if refreshed is not None:
            refreshed.set()
        if self.up.is_set():
            self.up = trio.Event()
        if error is not None and not isinstance(error, trio.Cancelled):
            self.error = error

    def redact(self, text: str) -> str:
        """``text`` without the values of the definition's secret env and headers."""
        return self.secrets.redact(text)


async def _first(race: trio.Nursery, wait: Callable[[], Awaitable[object]]) -> None:
    await wait()
    race.cancel_scope.cancel()


def _label(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).upper()


class Keeper(Server):
    """Keeps a connection's supervisor going: when it gives up, a new one after a back-off.

    OTP's intensity (``max_restarts`` in ``max_seconds``) stops a server
    that crashes in a loop; a server that is *down* (a service restarting,
    a network outage) is another matter: after the supervisor gave up, the
    keeper starts a new one after ``retry_delay`` seconds, doubling each
    time up to ``max_retry_delay`` (the delay starts over once a connection
    succeeded). Meanwhile the agents offer none of the server's tools and a
    call gets an error result saying why and when it is tried again. With
    ``retry_delay=None``, or for a server that never connected (the agent's
    start fails then, saying why), the keeper gives up with the supervisor.
    """

    async def init(self, channel: Channel) -> None:
        self.channel = channel
        self.failures = 0
        self.seen_connects = 0
        await self._start()

    async def _start(self) -> None:
        channel = self.channel
        definition = channel.definition
        channel.retry_at = None
        supervisor = await self.node.start_supervisor(
            [ChildSpec("connection", Connection, args=(channel,), restart="permanent")],
            max_restarts=definition.max_restarts,
            max_seconds=definition.max_seconds,
        )
        channel.supervisor = supervisor
        self.monitor(supervisor)

    async def handle_info(self, message: Any) -> None:
        channel = self.channel
        if type(message) is Down and message.handle == channel.supervisor:
            definition = channel.definition
            if definition.retry_delay is None or not channel.connects:
                return  # never up: the agent's start fails with why (McpConnectError), nothing to retry for
            if channel.connects != self.seen_connects:  # it was up since the last give-up: start over
                self.seen_connects = channel.connects
                self.failures = 0
            delay = min(definition.retry_delay * 2**self.failures, definition.max_retry_delay)
            self.failures += 1
            channel.retry_at = trio.current_time() + delay
            logger.warning("%r gave up after %d restarts; trying again in %g s: %s", definition,
                           definition.max_restarts, delay, channel.redact(channel.why()))
            self.send_after(delay, _RETRY)
        elif message is _RETRY:
            await self._start()
        else:
            await super().handle_info(message)

    async def terminate(self, reason: Any) -> None:
        supervisor = self.channel.supervisor
        if supervisor is not None and supervisor.alive:
            with contextlib.suppress(NoProc, CallError):
                await supervisor.stop("shutdown", timeout=None)


_RETRY = "condukt.mcp:retry"


class Connection(Server):
    """One incarnation of a connection: transport, session, tool listing.

    It crashes with :class:`ConnectionLost` when the server closes the
    connection, and with the transport's error when it cannot connect: its
    supervisor restarts it (``max_restarts`` in ``max_seconds``, as in
    OTP), then gives up, and the agents stop offering the server's tools.
    """

    async def init(self, channel: Channel) -> None:
        self.channel = channel
        self.wake = trio.Event()
        self.lost = False
        self.start_soon(self._serve)

    async def _serve(self) -> None:
        channel = self.channel
        try:
            await self._connect()
        except BaseException as exc:
            channel.disconnected(exc)
            raise
        channel.disconnected(None)
        raise ConnectionLost(f"{channel.definition!r} closed the connection")

    async def _connect(self) -> None:
        channel = self.channel
        async with _transport(channel) as (read, write):
            async with ClientSession(
                _Watched(read, self._ended),
                write,
                message_handler=self._on_message,
                client_info=types.Implementation(name="condukt", version=_version()),
            ) as session:
                initialized = await session.initialize()
                channel.connected(session, await _list_tools(session), initialized.capabilities)
                while True:
                    await self.wake.wait()
                    self.wake = trio.Event()
                    if self.lost:
                        break
                    channel.listed(await _list_tools(session))

    def _ended(self) -> None:
        self.lost = True
        self.channel.disconnected(None)  # calls from now on wait for the restart
        self.wake.set()

    async def _on_message(self, message: Any) -> None:
        # Called by the session's receive loop: never a request from here (it would wait on itself).
        if isinstance(message, types.ToolListChangedNotification):
            self.channel.changing()
            self.wake.set()
        elif isinstance(message, Exception):
            channel = self.channel
            logger.warning("MCP transport error from %r: %s", channel.definition, channel.redact(str(message)))


class _Watched:
    """The transport's read stream, as the session reads it, calling ``on_end`` when it ends.

    The session does not say when its transport ends, and that is how a
    stdio server's exit is seen (the connection then crashes and is
    restarted). A wrapper rather than a relay task between transport and
    session (the first version): no extra task switch per message.
    """

    def __init__(self, stream: Any, on_end: Callable[[], None]) -> None:
        self.stream = stream
        self.on_end = on_end

    @property
    def last_context(self) -> Any:
        """The sender's context, for streams that carry one (the SDK reads it with getattr)."""
        return getattr(self.stream, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self.stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.on_end()
            raise

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _list_tools(session: ClientSession) -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor:
            return tuple(tools)


@contextlib.asynccontextmanager
async def _transport(channel: Channel) -> AsyncIterator[tuple[Any, Any]]:
    definition = channel.definition
    if definition.transport == "stdio":
        command = list(definition.command)
        if definition.reap:
            command = _LAUNCHER.command(
                command, cwd=definition.path(), env=channel.env, stdin_grace=definition.close_timeout
            )
        parameters = StdioServerParameters(
            command=command[0], args=command[1:], env=channel.env or None, cwd=definition.cwd
        )
        # The server's stderr through a pipe: passed on to ours (as the SDK does), its end kept.
        channel.stderr.clear()  # this attempt's, to say why it failed
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        drained = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, read_fd, channel, drained)
            try:
                async with stdio_client(parameters, errlog=errlog) as streams:
                    errlog.close()  # the server has its own copy: its exit ends the pipe
                    yield streams
            finally:
                errlog.close()
                with trio.move_on_after(1.0) as grace:
                    grace.shield = True
                    await drained.wait()  # what the server wrote as it failed
                nursery.cancel_scope.cancel()
    elif definition.transport == "http":
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with httpx2.AsyncClient(headers=channel.headers, timeout=timeout) as client:
            async with streamable_http_client(definition.url, http_client=client) as streams:
                yield streams[0], streams[1]
    else:
        async with sse_client(definition.url, headers=channel.headers or None) as streams:
            yield streams[0], streams[1]


async def _drain(fd: int, channel: Channel, drained: trio.Event) -> None:
    """Pass a stdio server's stderr on to ours, keeping its last :data:`STDERR_TAIL` bytes on the channel."""
    try:
        async with trio.lowlevel.FdStream(fd) as stream:
            while chunk := await stream.receive_some(65536):
                tail = channel.stderr
                tail += chunk
                if len(tail) > STDERR_TAIL:
                    del tail[: len(tail) - STDERR_TAIL]
                try:
                    sys.stderr.write(chunk.decode("utf-8", "replace"))
                except (OSError, ValueError):
                    pass  # no stderr of ours (closed): the tail is kept all the same
    finally:
        drained.set()


def _version() -> str:
    from .. import __version__

    return __version__
