"""Sessions: one agent process per conversation, under one dynamic supervisor per app.

A session id is 32 hex digits: 24 random ones, then 8 that name its agent
route (of the SHA-256 of the route's name). The id is also the agent's key
in its session store, so with a store a session outlives the process: after
a restart (or once idle expiry stopped it), a request naming the id finds
its route from the id, its conversation in the store, and starts its agent
again, which resumes the runs that were waiting for approvals.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import re
import uuid
from pathlib import Path
from typing import Any

import anyio
import attrs

from ..agent import Agent, AgentConfig
from ..otp import ChildNotFound, ChildSpec, ConduktError, NoProc, TooManyChildren

__all__ = ["AgentRoute", "SessionsFull", "Sessions"]

#: How long a request waits for a crashed session's agent to be restarted before calling the session gone.
RESTART_WAIT = 2.0

_apps = itertools.count()


class SessionsFull(ConduktError):
    """The app already holds ``max_sessions`` live sessions (HTTP 503 with ``Retry-After``)."""


#: What a session id looks like: 24 random hex digits and 8 naming its route.
_SESSION_ID = re.compile(r"[0-9a-f]{32}")


def route_tag(name: str) -> str:
    """The last 8 hex digits of the ids of route ``name``'s sessions."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


@attrs.frozen
class AgentRoute:
    """What ``POST /agents/{name}/runs`` starts: an agent class and its start options."""

    name: str
    agent: type[Agent]
    options: dict[str, Any]
    #: The last 8 hex digits of its sessions' ids (:func:`route_tag`).
    tag: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "tag", route_tag(self.name))

    def store(self) -> tuple[Any, Path] | None:
        """The session store of this route's agents and their cwd, or None (no store, or one key for all)."""
        config = AgentConfig.build(self.agent, self.options)
        if config.session_store is None or config.session_store_key is not None:
            return None
        return config.session_store, config.cwd

    @classmethod
    def of(cls, name: str, value: Any) -> AgentRoute:
        if isinstance(value, ChildSpec):
            start = value.start
            if not (isinstance(start, type) and issubclass(start, Agent)):
                raise TypeError(f"agents[{name!r}]: the ChildSpec must start an Agent subclass, got {start!r}")
            return cls(name, start, dict(value.kwargs))
        if isinstance(value, type) and issubclass(value, Agent):
            return cls(name, value, {})
        raise TypeError(f"agents[{name!r}] must be an Agent subclass or a ChildSpec of one, got {value!r}")


@attrs.define
class _Session:
    route: str
    name: tuple[str, int, str]
    last_used: float
    #: The incarnation last seen; looked up again by name once it is dead (a restart).
    handle: Any = None
    #: Set by ``DELETE``: a run of this session that fails afterwards failed because of it.
    deleted: bool = False


async def _maybe(value: Any) -> Any:
    # The trio API's sync methods are awaitable on condukt.asyncio's proxies.
    if inspect.isawaitable(value):
        return await value
    return value


class Sessions:
    """The app's live sessions: id -> agent process (found by its registered name, so restarts keep it).

    Works on a trio :class:`condukt.Node` and on a :class:`condukt.asyncio.Node`
    alike: it only calls methods both have (those that are sync on trio are
    awaited through :func:`_maybe`).
    """

    def __init__(
        self,
        routes: dict[str, AgentRoute],
        *,
        max_sessions: int,
        idle_timeout: float | None,
        max_restarts: int,
        max_seconds: float,
    ) -> None:
        self.routes = routes
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._app = next(_apps)
        self._table: dict[str, _Session] = {}
        self._starting = 0
        self._last_sweep = 0.0
        self._node: Any = None
        self._sup: Any = None
        self._lock: anyio.Lock | None = None
        self._restoring: anyio.Lock | None = None
        self._stores = {name: route.store() for name, route in routes.items()}
        self._tags = {route.tag: route for route in routes.values()}

    def __len__(self) -> int:
        return len(self._table)

    def attach(self, node: Any) -> None:
        """Use ``node`` (trio or asyncio) from now on; forgets the previous node's sessions."""
        self._node = node
        self._sup = None
        self._table.clear()

    async def supervisor(self) -> Any:
        """The dynamic supervisor of the sessions, started on first use.

        Cancelled while it starts the supervisor, nothing is left running (the next call starts it).
        """
        if self._sup is not None and self._sup.alive:
            return self._sup
        if self._node is None:
            raise RuntimeError("condukt.web: the app has no node (its lifespan did not run; pass create_app(node))")
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._sup is None or not self._sup.alive:
                self._table.clear()
                self._sup = await self._node.start_dynamic_supervisor(
                    max_children=self.max_sessions,
                    max_restarts=self._max_restarts,
                    max_seconds=self._max_seconds,
                    intensity="per_child",
                )
        return self._sup

    async def open(self, route: AgentRoute, session_id: str | None = None) -> tuple[str, Any]:
        """Start a new session's agent; returns its id and handle. Raises :class:`SessionsFull`.

        ``session_id`` names the session (a protocol's conversation id), a new
        id by default; starting one that is live raises :class:`~condukt.NameTaken`.
        Cancelled while the agent starts, no session is left behind.
        """
        if session_id is None:
            session_id = uuid.uuid4().hex[:24] + route.tag
        return await self._start(route, session_id)

    async def _start(self, route: AgentRoute, session_id: str) -> tuple[str, Any]:
        sup = await self.supervisor()
        if self.idle_timeout is not None and anyio.current_time() - self._last_sweep > min(self.idle_timeout / 4, 30.0):
            await self.sweep()  # also where no lifespan runs the periodic sweep (a mounted app)
        if len(self._table) + self._starting >= self.max_sessions:
            await self.sweep()
            if len(self._table) + self._starting >= self.max_sessions:
                raise SessionsFull(f"the endpoint already holds {self.max_sessions} sessions")
        name = ("condukt.web", self._app, session_id)
        spec = ChildSpec(None, route.agent, kwargs={**route.options, "id": session_id}, restart="transient", name=name)
        self._starting += 1
        try:
            handle = await sup.start_child(spec)
        except TooManyChildren as exc:
            raise SessionsFull(str(exc)) from None
        finally:
            self._starting -= 1
        self._table[session_id] = _Session(route.name, name, anyio.current_time(), handle)
        return session_id, handle

    async def get(self, session_id: str, route: str | None = None) -> Any:
        """The live agent of ``session_id`` (of agent ``route`` if given), or ``None``.

        A session whose agent crashed is restarted by the supervisor: this
        waits up to :data:`RESTART_WAIT` seconds for the new incarnation.
        Cancellation only stops the wait.
        """
        session = self._table.get(session_id)
        if session is None:
            return await self._restore(session_id, route)
        if route is not None and session.route != route:
            return None
        if session.handle is not None and session.handle.alive:
            # Reading ``alive`` needs no trip into trio on asyncio (whereis would).
            session.last_used = anyio.current_time()
            return session.handle
        handle = await _maybe(self._node.whereis(session.name))
        if handle is None:
            with anyio.move_on_after(RESTART_WAIT):
                while handle is None and session_id in self._table:
                    await anyio.sleep(0.01)
                    handle = await _maybe(self._node.whereis(session.name))
        if handle is None:
            self._table.pop(session_id, None)
            return None
        session.last_used = anyio.current_time()
        session.handle = handle
        return handle

    def _stored(self, session_id: str, route: str | None) -> tuple[AgentRoute, Any, Path] | None:
        """The route of ``session_id`` (by its last 8 digits) when its agents keep a store; else None."""
        if not _SESSION_ID.fullmatch(session_id):
            return None
        found = self._tags.get(session_id[24:])
        if found is None or (route is not None and found.name != route):
            return None
        store = self._stores.get(found.name)
        return None if store is None else (found, *store)

    async def _in_trio(self, fn: Any, *args: Any) -> Any:
        call_in_trio = getattr(self._node, "call_in_trio", None)  # a condukt.asyncio node
        return await (call_in_trio(fn, *args) if call_in_trio is not None else fn(*args))

    async def _restore(self, session_id: str, route: str | None) -> Any:
        """Start again the agent of a session kept in its route's store (after a restart, or expiry); None if none.

        Raises :class:`SessionsFull` when there is no room for it, and what
        the store raises for data it cannot read.
        """
        stored = self._stored(session_id, route)
        if stored is None:
            return None
        found, store, cwd = stored
        if self._restoring is None:
            self._restoring = anyio.Lock()
        async with self._restoring:  # one start per session, however many requests name it at once
            if session_id in self._table:
                return await self.get(session_id, route)
            if await self._in_trio(_load, store, cwd, session_id) is None:
                return None
            _, handle = await self._start(found, session_id)
        return handle

    def entry(self, session_id: str) -> _Session | None:
        """The table's record of ``session_id`` (its ``deleted`` flag tells a run why it failed)."""
        return self._table.get(session_id)

    def touch(self, session_id: str) -> None:
        """Mark the session used now (a run just ended)."""
        session = self._table.get(session_id)
        if session is not None:
            session.last_used = anyio.current_time()

    async def close(self, session_id: str) -> bool:
        """Stop the session's agent, forget it and delete what its store keeps of it; whether it existed.

        Cancelled while the agent stops, it is stopped or stopping.
        """
        session = self._table.get(session_id)
        stored = self._stored(session_id, None)
        if session is None and stored is not None:  # kept in the store, not running: nothing to stop
            _, store, cwd = stored
            return bool(await self._in_trio(_delete, store, cwd, session_id))
        handle = await self.get(session_id)
        if handle is None:
            return False
        session = self._table.pop(session_id, None)
        if session is not None:
            session.deleted = True
        await self._terminate(handle)
        if stored is not None:
            _, store, cwd = stored
            await self._in_trio(_delete, store, cwd, session_id)
        return True

    async def _terminate(self, handle: Any) -> None:
        """Stop ``handle`` for good; an agent that exited meanwhile is fine, one still alive is an error."""
        try:
            await self._sup.terminate_child(handle)
        except ChildNotFound:
            if handle.alive:  # not a child of this supervisor, yet running: never answer "stopped"
                raise
        except NoProc:
            pass  # the supervisor is gone, and its children with it

    async def sweep(self) -> int:
        """Stop sessions idle for longer than ``idle_timeout`` (not while a run is in progress); how many.

        Cancellation stops the sweep between sessions (the rest are swept next time).
        """
        if self.idle_timeout is None or self._sup is None:
            return 0
        self._last_sweep = anyio.current_time()
        horizon = anyio.current_time() - self.idle_timeout
        stale = [sid for sid, session in self._table.items() if session.last_used < horizon]
        stopped = 0
        for session_id in stale:
            session = self._table.get(session_id)
            if session is None:
                continue
            handle = await _maybe(self._node.whereis(session.name))
            if handle is not None and (handle.running or handle.queued):
                session.last_used = anyio.current_time()
                continue
            self._table.pop(session_id, None)
            if handle is not None:
                await self._terminate(handle)
            stopped += 1
        return stopped

    async def aclose(self) -> None:
        """Stop every session (the supervisor). Cancelled, the supervisor may still be stopping."""
        sup, self._sup = self._sup, None
        self._table.clear()
        if sup is not None and sup.alive:
            await sup.stop()


async def _load(store: Any, cwd: Path, key: str) -> Any:
    # In trio: stores do their I/O in trio's worker threads.
    return await store.bind(cwd).load(key)


async def _delete(store: Any, cwd: Path, key: str) -> bool:
    bound = store.bind(cwd)
    if await bound.load(key) is None:
        return False
    await bound.delete(key)
    return True
