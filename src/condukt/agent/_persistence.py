"""Persistence as a capability: the conversation saved after every turn, reloaded on restart."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs

from ..sessions import SessionStore, Snapshot
from ._capability import Capability

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
        await self.store.save(
            self.key,
            Snapshot(
                id=session.id,
                messages=tuple(session.messages),
                model=config.model if isinstance(config.model, str) else None,
                thinking_level=config.thinking_level,
                system_prompt=config.system_prompt,
                created_at=session.created_at,
                updated_at=time.time(),
            ),
        )
