"""Project instructions as a capability: ``AGENTS.md`` and skills appended to the system prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ..instructions import load_project_instructions
from ._capability import Capability

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["ProjectInstructions"]


class ProjectInstructions(Capability):
    """Appends the working directory's instructions to the system prompt at start (not to what is saved)."""

    async def setup(self, session: Session) -> None:
        """Read the files (in a worker thread) and extend ``session.system_prompt``."""
        extra = await trio.to_thread.run_sync(load_project_instructions, session.cwd)
        if extra:
            base = session.system_prompt
            session.system_prompt = f"{base}\n\n{extra}" if base else extra
