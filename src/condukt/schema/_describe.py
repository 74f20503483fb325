"""Readable validation errors from jsonschema, described safely whatever the value.

jsonschema words every message. What this module adds: the most relevant
error first (jsonschema's ``best_match``), a path in front, long values
shortened, and a message instead of an exception when jsonschema itself
fails on a value (``1e999`` against ``multipleOf`` raises OverflowError, a
deeply nested value RecursionError, a value whose ``repr`` raises whatever
it raises).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from jsonschema.exceptions import ValidationError, best_match
from jsonschema.protocols import Validator

__all__ = ["describe", "safe_repr", "shorten"]

#: Errors read from jsonschema per value: enough to pick the best few, bounded for huge values.
_MAX_ERRORS = 100
#: A message longer than this is shortened (values in it first).
_MAX_MESSAGE = 300
#: How a value is shown in a message we write.
_MAX_VALUE = 80
#: Containers looked at when searching a value for what jsonschema choked on.
_MAX_WALK = 100_000


def safe_repr(value: Any, limit: int = _MAX_VALUE) -> str:
    """``repr(value)`` cut to ``limit`` characters; ``<unprintable TYPE>`` if it raises."""
    try:
        text = repr(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"
    if not isinstance(text, str):  # a __repr__ returning something else is caught by repr(); be sure
        return f"<unprintable {type(value).__name__}>"
    return shorten(text, limit)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return safe_repr(value)


def _where(path: Iterable[Any]) -> str:
    return "/".join(_safe_str(part) for part in path)


def _message(error: ValidationError) -> str:
    text = error.message
    if len(text) > _MAX_MESSAGE:
        try:
            shown = repr(error.instance)
        except Exception:
            shown = ""
        if len(shown) > _MAX_VALUE and shown in text:
            text = text.replace(shown, safe_repr(error.instance))
        text = shorten(text, _MAX_MESSAGE)
    where = _where(error.absolute_path)
    return f"{where}: {text}" if where else text


def describe(validator: Validator, value: Any, limit: int) -> list[str]:
    """Up to ``limit`` messages saying why ``value`` fails ``validator``, most relevant first.

    Never raises: when jsonschema fails on the value, the failure becomes a
    message naming the part of the value it could not handle.
    """
    found: list[ValidationError] = []
    failure: Exception | None = None
    try:
        for error in validator.iter_errors(value):
            found.append(error)
            if len(found) >= _MAX_ERRORS:
                break
    except Exception as exc:
        failure = exc
    out: list[str] = []
    if failure is not None:
        out.append(_describe_failure(value, failure))
    try:
        first = best_match(found)
        rest = sorted((e for e in found if e is not first), key=lambda e: (len(e.absolute_path), e.message))
        ordered = [first, *rest] if first is not None else rest
    except Exception:  # relevance compares paths: keep jsonschema's order if they do not compare
        ordered = found
    for error in ordered:
        try:
            text = _message(error)
        except Exception as exc:
            text = f"an error that cannot be described ({type(exc).__name__})"
        if text not in out:
            out.append(text)
    if not out:
        out.append("the value does not match the schema")
    return out[: max(limit, 0)]


def _describe_failure(value: Any, failure: Exception) -> str:
    """A message for a value jsonschema raised on, naming the offending part when it can be found."""
    if isinstance(failure, RecursionError):
        return "the value is nested too deeply to validate"
    found = _first_non_json(value)
    if found is not None:
        path, problem = found
        return f"{path}: {problem}" if path else problem
    reason = shorten(f"{type(failure).__name__}: {_safe_str(failure)}", _MAX_VALUE)
    return f"the value could not be validated ({reason})"


def _first_non_json(value: Any) -> tuple[str, str] | None:
    """(path, problem) of the first part of ``value`` that is not finite JSON data, if any.

    Iterative and bounded: a deep or cyclic value cannot make it recurse or loop.
    (A value too deep for jsonschema is reported before this is asked.)
    """
    stack: list[tuple[list[Any], Any]] = [([], value)]
    seen: set[int] = set()
    walked = 0
    while stack and walked < _MAX_WALK:
        path, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return _where(path), f"{item!r} is not a finite number"
        elif item is None or isinstance(item, (str, int, bool)):
            pass
        elif isinstance(item, (dict, list)):
            if id(item) in seen:
                continue  # shared, or a cycle: looked at already
            seen.add(id(item))
            walked += 1
            if isinstance(item, dict):
                children = list(item.items())
                for key, _ in children:
                    if not isinstance(key, str):
                        return _where(path), f"key {safe_repr(key)} is not a string"
            else:
                children = list(enumerate(item))
            stack.extend((path + [key], child) for key, child in reversed(children))
        else:
            return _where(path), f"{safe_repr(item)} is not JSON data"
    return None
