"""Wire JSON: compact encoding, total decoding, and a per-model cache of each message's encoded form.

A conversation grows by a few messages per turn while the whole history is
sent every time; :class:`WireCache` keeps each message's encoded bytes (by
identity: messages are immutable) so a turn only encodes what is new.

Decoding is total: :func:`loads` raises only ``ValueError`` (nesting too
deep for Python included), and a protocol module reads decoded JSON only
through the accessors below (:func:`obj`, :func:`text`, :func:`count`...),
which check each field's type and raise :class:`WireError` naming the field
(``usage.output_tokens: expected a token count, got 'abc'``). The model turns
a :class:`WireError` into :class:`~condukt.providers.InvalidResponse` at one
place (:meth:`~condukt.providers.lowlevel.HttpModel.decode_response` and its
stream twins), so no response shape reaches the agent as a ``TypeError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "MAX_COUNT",
    "WireCache",
    "WireError",
    "array",
    "check_depth",
    "count",
    "dumps",
    "field",
    "loads",
    "obj",
    "opt_obj",
    "opt_text",
    "text",
    "tool_arguments",
]

T = TypeVar("T")


def _default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# ensure_ascii: the bytes are plain ASCII whatever the text (lone surrogates included).
_encode = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), check_circular=False, default=_default).encode

_json_loads = json.loads

#: The largest token count a response may report (the largest integer JSON
#: numbers carry exactly); more is an invalid response, not accounting.
MAX_COUNT = 2**53 - 1
#: Tool arguments nested deeper than this are an invalid response: the agent
#: re-encodes, validates and stores them, each recursively.
MAX_ARGUMENT_DEPTH = 64


def loads(data: str | bytes | bytearray) -> Any:
    """Parse JSON text or bytes; ``ValueError`` for anything that is not JSON (too deep included).

    ``NaN``, ``Infinity`` and overflowing numbers (``1e999``) parse, as floats;
    the accessors below refuse them where a count or a string is expected.
    """
    try:
        return _json_loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


class WireError(ValueError):
    """Decoded JSON that is not the protocol: the message names the field and what it held."""


def _show(value: Any) -> str:
    """A short description of ``value`` for an error message (never recursive, never long)."""
    if value is None or isinstance(value, (bool, int, float)):
        shown = repr(value) if not isinstance(value, int) or value.bit_length() < 64 else "a huge integer"
    elif isinstance(value, str):
        shown = repr(value[:40] + "..." if len(value) > 40 else value)
    else:
        shown = "an object" if isinstance(value, dict) else "an array" if isinstance(value, list) else "?"
    return shown


def obj(value: Any, where: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else :class:`WireError`."""
    if type(value) is not dict:
        raise WireError(f"{where}: expected an object, got {_show(value)}")
    return value


def field(data: dict[str, Any], key: str, where: str) -> Any:
    """A required field (``null`` counts as missing)."""
    value = data.get(key)
    if value is None:
        raise WireError(f"{where}.{key}: missing")
    return value


def opt_obj(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """An optional object field: ``{}`` when missing or ``null``."""
    value = data.get(key)
    if value is None:
        return {}
    return obj(value, f"{where}.{key}")


def array(data: dict[str, Any], key: str, where: str) -> list[Any]:
    """An optional array field: ``[]`` when missing or ``null``."""
    value = data.get(key)
    if value is None:
        return []
    if type(value) is not list:
        raise WireError(f"{where}.{key}: expected an array, got {_show(value)}")
    return value


def text(data: dict[str, Any], key: str, where: str, default: str = "") -> str:
    """A string field: ``default`` when missing or ``null``."""
    value = data.get(key)
    if value is None:
        return default
    if type(value) is not str:
        raise WireError(f"{where}.{key}: expected a string, got {_show(value)}")
    return value


def opt_text(data: dict[str, Any], key: str, where: str) -> str | None:
    """A string field, ``None`` when missing, ``null`` or empty."""
    return text(data, key, where) or None


def count(data: dict[str, Any], key: str, where: str, default: int = 0) -> int:
    """A token count: a non-negative integer (``12.0`` too), ``default`` when missing or ``null``.

    ``"abc"``, ``true``, ``-1``, ``1.5``, ``Infinity``, ``NaN`` and counts above
    :data:`MAX_COUNT` are a :class:`WireError`.
    """
    value = data.get(key)
    if value is None:
        return default
    kind = type(value)
    if kind is int:
        if 0 <= value <= MAX_COUNT:
            return int(value)
    elif kind is float and value.is_integer() and 0 <= value <= MAX_COUNT:
        return int(value)
    raise WireError(f"{where}.{key}: expected a token count, got {_show(value)}")


def check_depth(value: Any, where: str, limit: int = MAX_ARGUMENT_DEPTH) -> Any:
    """``value`` if its arrays and objects nest at most ``limit`` deep, else :class:`WireError`."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        deeper: list[Any] = []
        for item in level:
            if type(item) is dict:
                deeper.extend(item.values())
            elif type(item) is list:
                deeper.extend(item)
        if not deeper:
            return value
        level = deeper
    raise WireError(f"{where}: nested deeper than {limit} levels")


def tool_arguments(raw: str, where: str) -> Any:
    """Tool arguments sent as JSON text: the decoded value, or ``raw`` itself if it is not JSON.

    The agent reports text that is not JSON to the model instead of calling
    the tool; JSON nested deeper than :data:`MAX_ARGUMENT_DEPTH` is a
    :class:`WireError`.
    """
    if not raw:
        return {}
    try:
        value = loads(raw)
    except ValueError:
        return raw
    return check_depth(value, where)


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
