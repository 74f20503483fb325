"""Persistence as a capability: the conversation saved after every turn, reloaded on restart."""

from __future__ import annotations

import time
from typing import Any

import attrs

from ...otp import ExitReason
from ...sessions import Lease, LeasingStore, SessionStore, Snapshot
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._run import resumed_turn

__all__ = ["Persistence"]

#: Settings a snapshot restores unless the start options give them.
_RESTORED = ("system_prompt", "model", "thinking_level")

#: The leases agents of this process hold, by store and key, with the handle of the agent holding it:
#: an incarnation that was killed (no ``stop``) leaves its lease here, and its successor takes it over.
_HELD: dict[tuple[int, str], tuple[Lease, Any]] = {}


class Persistence(Builtin):
    """Saves a :class:`~condukt.sessions.Snapshot` whenever the history changes; restores it at start.

    The key is ``session_store_key``, else ``id``, else the agent's
    registered name, else its session id. An empty history (after
    ``clear()``) deletes the snapshot.

    The snapshot carries the run in progress (:class:`~condukt.sessions.RunCheckpoint`).
    On restart it is resumed when it was waiting for approvals, or when the
    agent has ``resume=True``; otherwise its turn in flight is dropped and
    its completed turns stay in the history. Built in when ``session_store``
    is set.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.key = ""
        #: The lease on the key, with a leasing store (every shipped store); also ``ctx.lease``.
        self.lease: Lease | None = None

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """One for an agent with a ``session_store``."""
        store = ctx.config.session_store
        return None if store is None else cls(store)

    async def setup(self, ctx: AgentContext) -> None:
        """Bind the store to the agent's cwd and reload a saved conversation.

        Runs in the task that starts the agent: cancelling the start cancels the load.
        """
        config = ctx.config
        self.store = self.store.bind(ctx.cwd)
        name = ctx.handle.name
        self.key = str(config.session_store_key or config.id or (name if name is not None else ctx.id))
        if isinstance(self.store, LeasingStore):
            # One owner per key: the lease is held until the agent stops (``stop``);
            # its saves and the detached runs' event logs are fenced by it.
            self.lease = ctx.lease = await self._acquire(self.store, ctx)
            snapshot = await self.lease.load()
        else:
            snapshot = await self.store.load(self.key)
        if snapshot is None:
            return
        ctx.messages[:] = snapshot.messages
        run = snapshot.run
        if run is not None and 0 <= run.prompt_index < len(ctx.messages) and (run.approvals or config.resume):
            ctx.restored_run = run  # the agent resumes it once started
        elif resumed_turn(ctx.messages) is not None:
            ctx.messages.pop()  # not resumed: the turn in flight goes, as after an abort
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

    async def _acquire(self, store: LeasingStore, ctx: AgentContext) -> Lease:
        """The key's lease: a killed predecessor's on this node (taken over), else a new one."""
        held = _HELD.get((id(store), self.key))
        if held is not None and not held[1].alive and not held[0].released and not held[0].lost:
            lease = held[0]
        else:
            lease = await store.acquire(self.key, owner=repr(ctx.handle))
        _HELD[(id(store), self.key)] = (lease, ctx.handle)
        return lease

    async def history_changed(self, ctx: AgentContext) -> None:
        """Save the conversation (file I/O runs in the store's worker threads).

        Cancelled with the run it saves for (the next save carries what this one missed).
        """
        lease = self.lease
        if not ctx.messages:
            await (lease.delete() if lease is not None else self.store.delete(self.key))
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
        await (lease.save(snapshot) if lease is not None else self.store.save(self.key, snapshot))

    async def stop(self, ctx: AgentContext, reason: ExitReason) -> None:
        """Release the key's lease (another owner may take it at once); never raises for an unreachable store.

        Cancellation does not interrupt the release (it is bounded by the store's ``lease_ttl``).
        """
        lease, self.lease = self.lease, None
        if lease is not None:
            ctx.lease = None
            held = _HELD.get((id(self.store), self.key))
            if held is not None and held[0] is lease:
                del _HELD[(id(self.store), self.key)]
            await lease.release()
