"""Compaction as a capability: the history shortened after every run and on ``compact()``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..compaction import Compactor, compact_with
from ._capability import Capability

if TYPE_CHECKING:
    from ._run import Run
    from ._session import Session

__all__ = ["Compaction"]

logger = logging.getLogger("condukt.agent")


class Compaction(Capability):
    """Runs ``compactor`` over the history after each run."""

    def __init__(self, compactor: Compactor) -> None:
        self.compactor = compactor

    async def compact(self, session: Session, *, strict: bool) -> None:
        """Compact ``session.messages`` in place.

        ``strict``: a failing compactor raises (``agent.compact()`` reports it
        to its caller); otherwise it is logged and the history left as is.
        """
        try:
            session.messages[:] = await compact_with(self.compactor, session.messages)
        except Exception as exc:
            if strict:
                raise
            # The run succeeded or failed on its own; a broken compactor must
            # not turn that into a crash (or a restart loop).
            logger.error("%r: compaction failed; history left as is", session.handle, exc_info=exc)

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """Compact after every run, whatever its outcome."""
        await self.compact(run.session, strict=False)
