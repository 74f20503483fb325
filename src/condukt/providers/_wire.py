"""Wire JSON: compact encoding, and a per-model cache of each message's encoded form.

A conversation grows by a few messages per turn while the whole history is
sent every time; :class:`WireCache` keeps each message's encoded bytes (by
identity: messages are immutable) so a turn only encodes what is new.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["WireCache", "dumps", "loads"]

T = TypeVar("T")


def _default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# ensure_ascii: the bytes are plain ASCII whatever the text (lone surrogates included).
_encode = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), check_circular=False, default=_default).encode

#: Parse JSON text or bytes.
loads = json.loads


def dumps(value: Any) -> bytes:
    """Compact JSON for ``value`` as ASCII bytes."""
    return _encode(value).encode("ascii")


class WireCache(Generic[T]):
    """The encoded form of each message a model sent last, keyed by identity.

    :meth:`encode_all` returns ``encode(message)`` for every message, reusing
    what the previous call computed for the same message objects and
    forgetting messages that are gone (a cleared or compacted history).
    """

    __slots__ = ("_encode", "_entries")

    def __init__(self, encode: Callable[[Any], T]) -> None:
        self._encode = encode
        self._entries: dict[int, tuple[Any, T]] = {}

    def encode_all(self, messages: Iterable[Any]) -> list[T]:
        """The encoded form of each of ``messages``, in order."""
        old = self._entries
        new: dict[int, tuple[Any, T]] = {}
        out: list[T] = []
        encode = self._encode
        for message in messages:
            key = id(message)
            entry = old.get(key)
            if entry is None or entry[0] is not message:
                entry = (message, encode(message))
            new[key] = entry
            out.append(entry[1])
        self._entries = new
        return out
