"""Proxies and the trio objects they stand for, translated both ways at the bridge.

What trio hands to asyncio (a method's result) has its nodes and handles
replaced by proxies (:func:`wrap`); what asyncio hands to trio (a method's
arguments) has its proxies replaced by the trio objects they stand for
(:func:`unwrap`). trio's tables are keyed by the real handle (a
supervisor's children, a node's monitors and links): a proxy handed to
``terminate_child`` would not be found there.

Each proxy class names the trio class it stands for
(``class Handle(..., stands_for=condukt.Handle)``); :func:`wrap` picks the
one registered for the nearest class in the object's MRO, so an agent's
handle becomes an agent-handle proxy and a handle of a user's own
``Handle`` subclass a plain handle proxy.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..otp import ChildSpec
from ._guest import Guest

__all__ = ["ProxyBase", "proxy_class", "unwrap", "unwrap_args", "unwrap_kwargs", "wrap"]

#: trio class -> the proxy class registered for it.
_registered: dict[type, type[ProxyBase]] = {}
#: Any class seen by :func:`wrap` -> its proxy class, or None (a lookup per result type, not per result).
_by_type: dict[type, type[ProxyBase] | None] = {}


class ProxyBase:
    """A trio object seen from asyncio: the object (``_inner``) and the trio run it lives in (``_guest``).

    Subclasses say which trio class they stand for with the class keyword
    ``stands_for``; :func:`wrap` then makes them.
    """

    _guest: Guest
    _inner: Any

    def __init_subclass__(cls, stands_for: type | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if stands_for is not None:
            _registered[stands_for] = cls
            _by_type.clear()

    def __init__(self, guest: Guest, inner: Any) -> None:
        self._guest = guest
        self._inner = inner


def proxy_class(kind: type) -> type[ProxyBase] | None:
    """The proxy class for instances of ``kind`` (that of its nearest registered base), or None."""
    try:
        return _by_type[kind]
    except KeyError:
        found = next((_registered[base] for base in kind.__mro__ if base in _registered), None)
        _by_type[kind] = found
        return found


def wrap(guest: Guest, value: Any) -> Any:
    """``value`` with trio nodes and handles as proxies (in lists, tuples, sets and dict values too)."""
    kind = type(value)
    proxy = proxy_class(kind)
    if proxy is not None:
        return proxy(guest, value)
    if kind is list or kind is tuple:
        items = [wrap(guest, item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else kind(items)
    if kind is dict and value:
        wrapped = {key: wrap(guest, item) for key, item in value.items()}
        return value if all(wrapped[key] is item for key, item in value.items()) else wrapped
    if (kind is set or kind is frozenset) and value:
        return kind(wrap(guest, item) for item in value)
    return value


def unwrap(value: Any) -> Any:
    """``value`` with proxies replaced by the trio objects they stand for, for a call into trio.

    Containers (lists, tuples, sets, dicts) and a :class:`~condukt.ChildSpec`'s
    arguments are unwrapped too; anything else is passed as it is.
    """
    if isinstance(value, ProxyBase):
        return value._inner
    kind = type(value)
    if kind is list or kind is tuple:
        items = [unwrap(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else kind(items)
    if kind is dict and value:
        return unwrap_kwargs(value)
    if (kind is set or kind is frozenset) and value:
        return kind(unwrap(item) for item in value)
    if kind is ChildSpec:
        args, kwargs = unwrap_args(value.args), unwrap_kwargs(dict(value.kwargs))
        if args is not value.args or any(kwargs[key] is not item for key, item in value.kwargs.items()):
            return attrs.evolve(value, args=args, kwargs=kwargs)
    return value


def unwrap_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` unwrapped; the same tuple when nothing in it needs it."""
    # The hot path of every call: most arguments are strings and numbers, left as they are.
    for item in args:
        if type(item) not in _PLAIN:
            return tuple(unwrap(item) for item in args)
    return args


def unwrap_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` unwrapped; the same dict when nothing in it needs it."""
    for item in kwargs.values():
        if type(item) not in _PLAIN:
            return {key: unwrap(item) for key, item in kwargs.items()}
    return kwargs


_PLAIN = frozenset({str, int, float, bool, type(None), bytes})
