"""Conversion between JSON data and typed values: condukt's cattrs converter, plus TypedDicts and pydantic.

The converter is a copy of :data:`condukt.serialization.converter` (so
messages and events inside a user's class convert as everywhere else) with
two additions: pydantic models convert with their own ``model_validate`` /
``model_dump``, and TypedDicts convert key by key. cattrs' own TypedDict
support is not used because on Python 3.11 it trusts ``__required_keys__``,
which ignores ``NotRequired`` under ``from __future__ import annotations``
and so rejects valid data.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import cattrs

from ..serialization import converter as _serialization_converter
from ._describe import safe_repr
from ._types import is_pydantic_model, is_typeddict

__all__ = ["convert", "dump"]

_converter = _serialization_converter.copy()


def _structure_typeddict_factory(tp: Any) -> Callable[[Any, Any], dict[str, Any]]:
    hints = typing.get_type_hints(tp)

    def structure(value: Any, _: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        return {key: _converter.structure(item, hints[key]) for key, item in value.items() if key in hints}

    return structure


def _unstructure_typeddict_factory(tp: Any) -> Callable[[Any], dict[str, Any]]:
    hints = typing.get_type_hints(tp)

    def unstructure(value: Any) -> dict[str, Any]:
        return {key: _converter.unstructure(item, unstructure_as=hints.get(key)) for key, item in value.items()}

    return unstructure


_converter.register_structure_hook_factory(is_typeddict, _structure_typeddict_factory)
_converter.register_unstructure_hook_factory(is_typeddict, _unstructure_typeddict_factory)
_converter.register_structure_hook_func(is_pydantic_model, lambda value, tp: tp.model_validate(value))
_converter.register_unstructure_hook_func(is_pydantic_model, lambda value: value.model_dump(mode="json"))


def _name(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or safe_repr(tp)


def _format_exception(exc: BaseException, tp: Any) -> str:
    """cattrs' wording; for its generic "invalid value", the exception's own message (an attrs validator's)."""
    base = cattrs.v.format_exception(exc, tp)
    if base != "invalid value":
        return base
    try:
        return f"{base} ({exc})"
    except Exception:
        return f"{base} ({safe_repr(exc)})"


def _problems(exc: Exception) -> list[str]:
    """Short messages for a failed conversion: cattrs' and pydantic's own wording."""
    if isinstance(exc, cattrs.BaseValidationError):
        return cattrs.transform_error(exc, format_exception=_format_exception)
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__module__.startswith("pydantic"):
        try:
            return [
                f"{'/'.join(str(part) for part in e['loc'])}: {e['msg']}" if e["loc"] else str(e["msg"])
                for e in errors()
            ]
        except Exception:
            pass
    try:
        return [f"{type(exc).__name__}: {exc}"]
    except Exception:
        return [f"{type(exc).__name__}: {safe_repr(exc)}"]


def convert(value: Any, target: Any) -> Any:
    """``value`` (JSON data) as an instance of ``target``; ``ValueError`` saying why not."""
    try:
        return _converter.structure(value, target)
    except Exception as exc:
        listed = "; ".join(_problems(exc)[:5])
        raise ValueError(f"could not convert the value to {_name(target)}: {listed}") from exc


def dump(value: Any, target: Any) -> Any:
    """JSON data for ``value`` (of type ``target``, or whatever it is when ``target`` is None)."""
    try:
        return _converter.unstructure(value, unstructure_as=target)
    except Exception as exc:
        listed = "; ".join(_problems(exc)[:5])
        raise ValueError(f"could not turn {safe_repr(value)} into JSON data: {listed}") from exc
