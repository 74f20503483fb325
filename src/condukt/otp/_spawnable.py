"""Typing for starting processes: a server class is known by the handle it makes.

``node.spawn(cls, ...)`` returns an instance of ``cls.handle_class``. The
:class:`Spawnable` protocol lets a type checker read that class attribute off
the class passed in, so a plain ``class Counter(condukt.Server)`` gives a
``Handle`` and a behaviour whose ``handle_class`` is a subclass with more
methods (``condukt.Agent`` and its ``AgentHandle``) gives that subclass, with
no type parameters written by the user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

from ._handle import Handle

__all__ = ["H", "H_co", "Spawnable"]

if TYPE_CHECKING:
    # The default makes a bare ``ChildSpec`` mean ``ChildSpec[Handle]``, so
    # annotations written before ChildSpec was generic still pass ``--strict``.
    # Type checkers bundle ``typing_extensions``; at run time it is not
    # needed (nor a dependency: ``typing.TypeVar`` takes ``default`` only from 3.13).
    from typing_extensions import TypeVar as _TypeVarWithDefault

    H_co = _TypeVarWithDefault("H_co", bound=Handle, covariant=True, default=Handle)
else:
    H_co = TypeVar("H_co", bound=Handle, covariant=True)

#: The handle type a start function returns (bound to :class:`Handle`).
H = TypeVar("H", bound=Handle)


class Spawnable(Protocol[H_co]):
    """What the start functions accept: a class whose ``handle_class`` is ``type[H_co]``.

    Every :class:`~condukt.Server` subclass matches, with ``H_co`` read from
    its ``handle_class``. Use it to type a wrapper that starts processes::

        async def start(cls: type[Spawnable[H]], *args: Any) -> H:
            return await node.spawn(cls, *args)

    For type checkers only: the start functions check at run time that the
    class is a ``Server`` subclass.
    """

    @property
    def handle_class(self) -> type[H_co]:
        """The handle class the runtime instantiates for each incarnation."""
        ...
