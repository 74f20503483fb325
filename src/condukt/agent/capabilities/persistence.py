"""Persistence as a capability: the conversation saved after every turn, reloaded on restart."""

from __future__ import annotations

import time
from typing import Any

import attrs

from ...sessions import SessionStore, Snapshot
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._run import resumed_turn

__all__ = ["Persistence"]

#: Settings a snapshot restores unless the start options give them.
_RESTORED = ("system_prompt", "model", "thinking_level")


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

    async def history_changed(self, ctx: AgentContext) -> None:
        """Save the conversation (file I/O runs in the store's worker threads).

        Cancelled with the run it saves for (the next save carries what this one missed).
        """
        if not ctx.messages:
            await self.store.delete(self.key)
            return
        config = ctx.config
        run = ctx.checkpoint()
        messages = ctx.messages
        if run is None and resumed_turn(messages) is not None:
            messages = messages[:-1]  # a turn in flight is stored only with the checkpoint that finishes it
        await self.store.save(
            self.key,
            Snapshot(
                id=ctx.id,
                messages=tuple(messages),
                model=config.model if isinstance(config.model, str) else None,
                thinking_level=config.thinking_level,
                system_prompt=config.system_prompt,
                created_at=ctx.created_at,
                updated_at=time.time(),
                run=run,
            ),
        )
