"""Persistence as a capability: the conversation saved after every turn, reloaded on restart, one owner per key.

With a store that gives one owner per key (every shipped store: a
:class:`~condukt.sessions.LeasingStore`), the agent owns its session key
from its start to its exit: :meth:`Persistence.setup` acquires the key's
:class:`~condukt.sessions.Lease` (a second agent on a live key gets
:class:`~condukt.sessions.SessionOwned` from its spawn, and does not start),
every write goes through the lease (fenced), and the lease is released when
the agent exits. The store renews the leases of all its agents with one
heartbeat per node (``docs/sessions.md``, "Ownership"), not a timer per agent.

An agent killed without its ``terminate`` (``handle.kill()``) cannot release
its lease: the next incarnation its supervisor starts on the same store
takes that lease over at once (its holder is known to be dead, which no
other node could know before ``lease_ttl``), and a sweep every
``lease_ttl / 3`` releases the leases of dead holders nobody restarted.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio

from ...otp import Handle
from ...sessions import Lease, LeasingStore, SessionOwned, SessionStore, Snapshot, StoreUnavailable
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._errors import SessionLost
from .._run import resumed_turn

__all__ = ["Persistence", "retrying"]

logger = logging.getLogger("condukt.agent")

T = TypeVar("T")

#: Settings a snapshot restores unless the start options give them.
_RESTORED = ("system_prompt", "model", "thinking_level")


class Persistence(Builtin):
    """Saves a :class:`~condukt.sessions.Snapshot` whenever the history changes; restores it at start.

    The key is ``session_store_key``, else ``id``, else the agent's
    registered name, else its session id. An empty history (after
    ``clear()``) deletes the snapshot.

    With a :class:`~condukt.sessions.LeasingStore` the agent owns the key
    (see the module's documentation): ``ctx.lease`` is its lease. A write the
    store refuses because another owner took the key over raises
    :class:`~condukt.agent.SessionLost` (the run fails with it); nothing is
    written after that, and the agent exits with it as its reason once the
    run has settled. A store that cannot be reached
    (:class:`~condukt.sessions.StoreUnavailable`) is retried with backoff for
    up to the store's ``lease_ttl`` before the error is raised.

    The snapshot carries the run in progress (:class:`~condukt.sessions.RunCheckpoint`).
    On restart it is resumed when it was waiting for approvals, or when the
    agent has ``resume=True``; otherwise its turn in flight is dropped and
    its completed turns stay in the history. Built in when ``session_store``
    is set.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.key = ""
        self.lease: Lease | None = None
        self.lost: SessionLost | None = None

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """One for an agent with a ``session_store``."""
        store = ctx.config.session_store
        return None if store is None else cls(store)

    async def setup(self, ctx: AgentContext) -> None:
        """Bind the store to the agent's cwd, own the key (a leasing store), and reload a saved conversation.

        Raises :class:`~condukt.sessions.SessionOwned` when a live owner
        holds the key and :class:`~condukt.sessions.StoreUnavailable` when
        the store cannot be reached: the agent does not start. Runs in the
        task that starts the agent: cancelling the start cancels it (no lease
        is kept).
        """
        config = ctx.config
        store = self.store = self.store.bind(ctx.cwd)
        name = ctx.handle.name
        self.key = str(config.session_store_key or config.id or (name if name is not None else ctx.id))
        if isinstance(store, LeasingStore):
            lease = await _own(store, self.key, ctx.handle)
            self.lease = ctx.lease = lease
            try:
                snapshot = await retrying(store, lease.load)
            except BaseException:
                await _disown(store, self.key, ctx.handle)
                self.lease = ctx.lease = None
                raise
        else:
            snapshot = await self.store.load(self.key)
        if snapshot is None:
            return
        ctx.messages[:] = snapshot.messages
        run = snapshot.run
        if run is not None and 0 <= run.prompt_index < len(ctx.messages) and (run.approvals or config.resume):
            ctx.restored_run = run  # the agent resumes it once started
        else:  # not resumed: the turn in flight goes, as after an abort, and a prompt no turn answered
            if resumed_turn(ctx.messages) is not None:
                ctx.messages.pop()
            if run is not None and len(ctx.messages) == run.prompt_index + 1:
                ctx.messages.pop()
        if config.id is None:
            ctx.id = snapshot.id
        ctx.created_at = snapshot.created_at or ctx.created_at
        restored: dict[str, Any] = {"thinking_level": snapshot.thinking_level}
        if snapshot.system_prompt is not None:
            restored["system_prompt"] = snapshot.system_prompt
        if snapshot.model is not None:
            restored["model"] = snapshot.model
        keep = {k: v for k, v in restored.items() if k in _RESTORED and not config.given(k)}
        if keep:
            ctx.config = attrs.evolve(config, **keep)
            ctx.system_prompt = ctx.config.system_prompt

    async def history_changed(self, ctx: AgentContext) -> None:
        """Save the conversation (file I/O runs in the store's worker threads).

        Cancelled with the run it saves for (the next save carries what this
        one missed). Raises :class:`~condukt.agent.SessionLost` once the key
        was taken over (the first time, and in every later run), writing nothing.
        """
        lease = self.lease
        if lease is not None and self.lost is not None:
            if ctx.checkpoint() is None:
                await trio.lowlevel.checkpoint()
                return  # outside a run (its settle, a clear): nothing to fail, nothing written
            raise self.lost
        try:
            await self._save(ctx)
        except SessionOwned as exc:
            if lease is None:
                raise
            lost = self._lose(ctx, exc)
            if ctx.checkpoint() is None:
                return  # outside a run: nothing to fail; the agent exits
            raise lost from exc

    async def _save(self, ctx: AgentContext) -> None:
        lease = self.lease
        if not ctx.messages:
            if lease is None:
                await self.store.delete(self.key)
            else:
                await retrying(self.store, lease.delete)
            return
        config = ctx.config
        run = ctx.checkpoint()
        messages = ctx.messages
        if run is None and resumed_turn(messages) is not None:
            messages = messages[:-1]  # a turn in flight is stored only with the checkpoint that finishes it
        snapshot = Snapshot(
            id=ctx.id,
            messages=tuple(messages),
            model=config.model if isinstance(config.model, str) else None,
            thinking_level=config.thinking_level,
            system_prompt=config.system_prompt,
            created_at=ctx.created_at,
            updated_at=time.time(),
            run=run,
        )
        if lease is None:
            await self.store.save(self.key, snapshot)
        else:
            await retrying(self.store, lease.save, snapshot)

    def _lose(self, ctx: AgentContext, refusal: SessionOwned | None) -> SessionLost:
        """The key was taken over: the error the run fails with; the agent exits once it has settled."""
        lost = self.lost
        if lost is None:
            owner = refusal.owner if refusal is not None else None
            node = refusal.node if refusal is not None else None
            lost = self.lost = SessionLost(self.key, owner=owner, node=node)
            lost.__cause__ = refusal
            logger.warning("%r: %s; it stops", ctx.handle, lost)
            ctx.exit(lost)
        return lost

    async def stop(self, ctx: AgentContext, reason: Any) -> None:
        """Release the key's lease (the agent exits, or its start failed after setup). Never raises.

        Cancellation does not interrupt the release (it is bounded by the store's ``lease_ttl``).
        """
        if self.lease is not None:
            await _disown(self.store, self.key, ctx.handle)


# ---------------------------------------------------------------------- retries


async def retrying(store: Any, operation: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``await operation(*args)``, retried with backoff while the store is unavailable, for up to its ``lease_ttl``.

    A store that stays unreachable longer than that may have let another node
    take the key over (this node's heartbeat fails too): the last
    :class:`~condukt.sessions.StoreUnavailable` is raised then. Other errors
    are raised at once. Cancellation stops the retries.
    """
    budget = float(getattr(store, "lease_ttl", 0.0))
    deadline: float | None = None
    delay = 0.05
    while True:
        try:
            return await operation(*args)
        except StoreUnavailable as exc:
            now = trio.current_time()
            if deadline is None:
                deadline = now + budget
            if now + delay > deadline:
                raise
            logger.warning("session store unavailable, retrying in %.2f s: %s", delay, exc)
            await trio.sleep(delay)
            delay = min(delay * 2, 2.0)


# ---------------------------------------------------------------------- who holds which lease in this process


@attrs.define(eq=False)
class _Owned:
    """A lease an agent of this process holds, and that agent's process."""

    lease: Lease
    holder: Handle


class _Keeper:
    """The leases this process's agents hold in one store, and the sweep that frees those of dead holders."""

    def __init__(self, store: LeasingStore) -> None:
        self.store = weakref.ref(store)
        self.owned: dict[str, _Owned] = {}
        self.sweeper: trio.lowlevel.TrioToken | None = None

    def watch(self, store: LeasingStore) -> None:
        """Start the sweep in this trio run unless it runs."""
        token = trio.lowlevel.current_trio_token()
        if self.sweeper is token:
            return
        self.sweeper = token
        interval = max(store.lease_ttl / 3, 0.001)
        trio.lowlevel.spawn_system_task(self._sweep, token, interval, name="condukt session lease sweep")

    async def _sweep(self, token: trio.lowlevel.TrioToken, interval: float) -> None:
        # One task per store and trio run, whatever the number of agents:
        # ``benchmarks/sessions_leases.py`` measures its cost with 10,000 owned keys.
        try:
            while self.owned:
                await trio.sleep(interval)
                dead = [key for key, owned in self.owned.items() if not owned.holder.alive]
                for key in dead:
                    owned = self.owned.get(key)
                    if owned is None or owned.holder.alive:
                        continue  # adopted by a new incarnation meanwhile
                    del self.owned[key]
                    try:
                        await owned.lease.release()
                    except Exception:  # never raises by contract; a system task must not crash the run
                        logger.exception("releasing the lease of session %r failed", key)
        finally:
            if self.sweeper is token:
                self.sweeper = None


_keepers: weakref.WeakKeyDictionary[Any, _Keeper] = weakref.WeakKeyDictionary()


def _keeper(store: LeasingStore) -> _Keeper:
    keeper = _keepers.get(store)
    if keeper is None:
        keeper = _keepers[store] = _Keeper(store)
    return keeper


async def _own(store: LeasingStore, key: str, holder: Handle) -> Lease:
    """The key's lease for ``holder``: acquired, or taken over from a dead agent of this process."""
    keeper = _keeper(store)
    held = keeper.owned.get(key)
    if held is not None:
        lease = held.lease
        if held.holder.alive:
            raise SessionOwned(key, owner=lease.owner, node=_node(store))
        if not (lease.released or lease.lost):
            # Killed without releasing it: the restarted incarnation carries on with its lease.
            held.holder = holder
            await trio.lowlevel.checkpoint()
            return lease
        del keeper.owned[key]
    lease = await retrying(store, _acquire, store, key, repr(holder))
    keeper.owned[key] = _Owned(lease, holder)
    keeper.watch(store)
    return lease


async def _acquire(store: LeasingStore, key: str, owner: str) -> Lease:
    return await store.acquire(key, owner=owner)


async def _disown(store: Any, key: str, holder: Handle) -> None:
    keeper = _keepers.get(store)
    owned = None if keeper is None else keeper.owned.get(key)
    if owned is None or owned.holder is not holder:
        await trio.lowlevel.checkpoint()
        return
    del keeper.owned[key]  # type: ignore[union-attr]
    await owned.lease.release()


def _node(store: Any) -> str | None:
    node = getattr(store, "node", None)
    return node if isinstance(node, str) else None
