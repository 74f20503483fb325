"""Argument checks at the edge: start options and handle arguments fail in the caller.

Every public entry point of the agent layer (``node.spawn(Agent, ...)``,
``AgentHandle.run`` and friends) checks its arguments with these functions
before anything reaches the agent process, so a bad value raises
``TypeError``/``ValueError`` where it was written and the agent keeps
serving. Messages name the option and say what is accepted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "check_bool",
    "check_callable",
    "check_count",
    "check_mapping",
    "check_seconds",
    "check_str",
]


def _kind(value: Any) -> str:
    return type(value).__name__


def check_seconds(name: str, value: Any, *, optional: bool = True) -> float | None:
    """A duration in seconds: an int or float > 0 (``inf`` means no limit), or ``None`` if optional.

    ``None`` and ``inf`` both mean "no limit" and are returned as ``None``.
    """
    if value is None:
        if optional:
            return None
        raise TypeError(f"{name} must be a number of seconds, got None")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        accepted = "a number of seconds > 0 or None" if optional else "a number of seconds > 0"
        raise TypeError(f"{name} must be {accepted}, got {_kind(value)} {value!r}")
    if math.isnan(value) or value <= 0:
        raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
    return None if math.isinf(value) else float(value)


def check_count(name: str, value: Any, *, minimum: int = 1, optional: bool = False) -> int | None:
    """An int >= ``minimum`` (bools refused), or ``None`` if optional."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        suffix = " or None" if optional else ""
        raise TypeError(f"{name} must be an int >= {minimum}{suffix}, got {_kind(value)} {value!r}")
    if value < minimum:
        what = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return value


def check_str(name: str, value: Any, *, optional: bool = True) -> str | None:
    """A str, or ``None`` if optional."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        suffix = " or None" if optional else ""
        raise TypeError(f"{name} must be a str{suffix}, got {_kind(value)} {value!r}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """A bool (``0``/``1`` and other truthy values are refused: they are usually mistakes)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {_kind(value)} {value!r}")
    return value


def check_mapping(name: str, value: Any, *, optional: bool = True) -> Mapping[str, Any] | None:
    """A mapping (dict-like), or ``None`` if optional."""
    if value is None and optional:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping (a dict), got {_kind(value)} {value!r}")
    return value


def check_callable(name: str, value: Any) -> Callable[..., Any] | None:
    """A callable, or ``None``."""
    if value is None:
        return None
    if not callable(value):
        raise TypeError(f"{name} must be a callable or None, got {_kind(value)} {value!r}")
    checked: Callable[..., Any] = value
    return checked
