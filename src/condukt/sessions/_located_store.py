"""What the file-based stores share: a location, bound to the agent's cwd when not given."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Self

from ._engine import JournaledStore
from ._errors import StoreNotBound

__all__ = ["LocatedStore"]


class LocatedStore(JournaledStore):
    """A journaled store at a file-system location, or unbound until :meth:`bind` gives it one.

    Subclasses give :attr:`default_location` (relative to the agent's cwd).
    Leases are timed by ``clock`` (default :func:`time.time`, which every
    process on the machine shares).
    """

    #: Where an unbound store goes, relative to the ``cwd`` given to :meth:`bind`.
    default_location: ClassVar[Path]

    def __init__(
        self,
        location: str | os.PathLike[str] | None = None,
        *,
        lease_ttl: float = 30.0,
        run_events: int = 10_000,
        runs: int = 16,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(lease_ttl=lease_ttl, run_events=run_events, runs=runs, clock=clock)
        self._location = None if location is None else Path(location)
        self._options: dict[str, Any] = {"lease_ttl": lease_ttl, "run_events": run_events, "runs": runs, "clock": clock}
        # The stores this unbound store made, by absolute cwd: every agent
        # (and every restart of one) in a directory shares one store, its
        # locks, its leases and, for SQLite, its connection.
        self._bound: dict[Path, Self] = {}

    def bind(self, cwd: Path) -> Self:
        """This store if it has a location, else the one at ``cwd / default_location``.

        An unbound store returns the same bound store for every call with the
        same ``cwd``, so agents working there share it.
        """
        if self._location is not None:
            return self
        cwd = Path(cwd).absolute()
        if cwd not in self._bound:
            self._bound[cwd] = type(self)(cwd / self.default_location, **self._options)
        return self._bound[cwd]

    def _bound_location(self) -> Path:
        if self._location is None:
            name = type(self).__name__
            raise StoreNotBound(f"{name}() has no location: pass one, or bind(cwd) the store first")
        return self._location
