"""Persistence as a capability: the conversation saved after every turn, reloaded on restart."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs

from ..sessions import SessionStore, Snapshot
from ._capability import Capability
from ._loop import resumed_turn

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["Persistence"]

#: Settings a snapshot restores unless the start options give them.
_RESTORED = ("system_prompt", "model", "thinking_level")


class Persistence(Capability):
    """Saves a :class:`~condukt.sessions.Snapshot` whenever the history changes; restores it at start.

    The key is ``session_store_key``, else ``id``, else the agent's
    registered name, else its session id. An empty history (after
    ``clear()``) deletes the snapshot.

    The snapshot carries the run in progress (:class:`~condukt.sessions.RunCheckpoint`).
    On restart it is resumed when it was waiting for approvals, or when the
    agent has ``resume=True``; otherwise its turn in flight is dropped and
    its completed turns stay in the history.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.key = ""

    async def setup(self, session: Session) -> None:
        """Bind the store to the agent's cwd and reload a saved conversation."""
        config = session.config
        self.store = self.store.bind(session.cwd)
        name = session.handle.name
        self.key = str(config.session_store_key or config.id or (name if name is not None else session.id))
        snapshot = await self.store.load(self.key)
        if snapshot is None:
            return
        session.messages[:] = snapshot.messages
        run = snapshot.run
        if run is not None and 0 <= run.prompt_index < len(session.messages) and (run.approvals or config.resume):
            session.restored_run = run  # the session resumes it once started
        elif resumed_turn(session.messages) is not None:
            session.messages.pop()  # not resumed: the turn in flight goes, as after an abort
        if config.id is None:
            session.id = snapshot.id
        session.created_at = snapshot.created_at or session.created_at
        restored: dict[str, Any] = {"thinking_level": snapshot.thinking_level}
        if snapshot.system_prompt is not None:
            restored["system_prompt"] = snapshot.system_prompt
        if snapshot.model is not None:
            restored["model"] = snapshot.model
        keep = {k: v for k, v in restored.items() if k in _RESTORED and not config.given(k)}
        if keep:
            session.config = attrs.evolve(config, **keep)
            session.system_prompt = session.config.system_prompt

    async def history_changed(self, session: Session) -> None:
        """Save the conversation (file I/O runs in the store's worker threads)."""
        if not session.messages:
            await self.store.delete(self.key)
            return
        config = session.config
        run = session.checkpoint()
        messages = session.messages
        if run is None and resumed_turn(messages) is not None:
            messages = messages[:-1]  # a turn in flight is stored only with the checkpoint that finishes it
        await self.store.save(
            self.key,
            Snapshot(
                id=session.id,
                messages=tuple(messages),
                model=config.model if isinstance(config.model, str) else None,
                thinking_level=config.thinking_level,
                system_prompt=config.system_prompt,
                created_at=session.created_at,
                updated_at=time.time(),
                run=run,
            ),
        )
