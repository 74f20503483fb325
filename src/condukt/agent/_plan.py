"""Which capabilities an agent, and each of its runs, get: :data:`condukt.agent.capabilities.ORDER` applied.

The kernel calls three functions, one per moment a built-in may join (see
:class:`~condukt.agent.capabilities.Builtin`): :func:`at_start`,
:func:`once_resolved` and :func:`run_hooks`. Every capability keeps its
place in ``ORDER`` (the agent's own share the place of ``OWN``, in the
order given), so hooks run in that order whichever moment added them.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

from ._capability import Builtin, Capability, Hooks
from ._context import AgentContext
from ._run import Run
from .capabilities import ORDER, OWN

__all__ = ["Lineup", "at_start", "once_resolved", "run_hooks"]


def _overriding(name: str) -> tuple[tuple[int, Callable[..., Capability | None]], ...]:
    """The places in ``ORDER`` of the built-ins that override the class method ``name``, and it bound."""
    default = getattr(Builtin, name).__func__
    return tuple(
        (place, getattr(entry, name))
        for place, entry in enumerate(ORDER)
        if isinstance(entry, type) and getattr(entry, name).__func__ is not default
    )


_AT_START = _overriding("at_start")
_ONCE_RESOLVED = _overriding("once_resolved")
_FOR_RUN = _overriding("for_run")
_OWN = ORDER.index(OWN)


class Lineup:
    """An agent's capabilities in hook order, each with its place in ``ORDER``.

    Tuples, rebuilt on :meth:`add` (a few times per start, never per run):
    exact-size, and shared empty for an agent without capabilities.
    """

    __slots__ = ("capabilities", "places")

    def __init__(self) -> None:
        self.capabilities: tuple[Capability, ...] = ()
        self.places: tuple[int, ...] = ()

    def add(self, place: int, capability: Capability) -> None:
        """Put ``capability`` after those whose place is not after ``place``."""
        index = bisect.bisect_right(self.places, place)
        self.places = (*self.places[:index], place, *self.places[index:])
        self.capabilities = (*self.capabilities[:index], capability, *self.capabilities[index:])


def at_start(ctx: AgentContext, own: Sequence[Any], lineup: Lineup) -> None:
    """Add the built-ins that apply before setup, and the agent's ``own`` capabilities, to ``lineup``.

    Raises ``TypeError`` for an entry of ``own`` that is not a
    :class:`~condukt.agent.Capability`, and what a built-in raises (a bad
    role, say): the start fails.
    """
    for place, build in _AT_START:
        capability = build(ctx)
        if capability is not None:
            lineup.add(place, capability)
    for capability in own:
        if not isinstance(capability, Capability):
            raise TypeError(f"capabilities must be condukt.agent.Capability instances, got {capability!r}")
        lineup.add(_OWN, capability)


def once_resolved(ctx: AgentContext, lineup: Lineup) -> bool:
    """Add the built-ins that apply once the tools and model are resolved; whether any did."""
    added = False
    for place, build in _ONCE_RESOLVED:
        capability = build(ctx)
        if capability is not None:
            lineup.add(place, capability)
            added = True
    return added


def run_hooks(run: Run, lineup: Lineup, hooks: Hooks) -> Hooks:
    """The hooks for ``run``: the agent's ``hooks``, or, when built-ins or the run's own join, all in order.

    The run's own capabilities (``RunRequest.capabilities``) take the place
    of ``OWN``, after the agent's own.
    """
    ctx = run.context
    joined: list[tuple[int, Capability]] | None = None
    for place, build in _FOR_RUN:
        capability = build(ctx, run)
        if capability is not None:
            if joined is None:
                joined = []
            joined.append((place, capability))
    own = run.request.capabilities  # the run's own (``capabilities=`` of run/stream/iter): after the agent's
    if own:
        joined = [*(joined or ()), *((_OWN, capability) for capability in own)]
    if joined is None:
        return hooks
    merged = Lineup()
    merged.capabilities = lineup.capabilities  # tuples: adding to the copy leaves the agent's as they are
    merged.places = lineup.places
    for place, capability in joined:
        merged.add(place, capability)
    return Hooks(merged.capabilities)
