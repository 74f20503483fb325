"""JSON Schemas derived from Python types, and conversion back with cattrs.

Used by ``@condukt.tool`` (parameters from a function's signature) and by
structured output (a schema from an attrs class or dataclass).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import attrs

__all__ = ["schema_for", "is_structured_type"]

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string"},
}


def is_structured_type(tp: Any) -> bool:
    """True for attrs classes and dataclasses (types with fields)."""
    return isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp))


def _field_docs(tp: type) -> dict[str, str]:
    docs: dict[str, str] = {}
    if attrs.has(tp):
        for field in attrs.fields(tp):
            doc = field.metadata.get("description") if field.metadata else None
            if doc:
                docs[field.name] = str(doc)
    elif dataclasses.is_dataclass(tp):
        for dfield in dataclasses.fields(tp):
            doc = dfield.metadata.get("description") if dfield.metadata else None
            if doc:
                docs[dfield.name] = str(doc)
    return docs


def _object_schema(tp: type) -> dict[str, Any]:
    hints = typing.get_type_hints(tp)
    properties: dict[str, Any] = {}
    required: list[str] = []
    docs = _field_docs(tp)
    if attrs.has(tp):
        fields = [(f.name, f.default is attrs.NOTHING) for f in attrs.fields(tp)]
    else:
        fields = [
            (
                f.name,
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(tp)
        ]
    for name, is_required in fields:
        prop = schema_for(hints.get(name, Any))
        if name in docs:
            prop = {**prop, "description": docs[name]}
        properties[name] = prop
        if is_required:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    if tp.__doc__ and not tp.__doc__.startswith(f"{tp.__name__}("):
        schema["description"] = tp.__doc__.strip()
    return schema


def schema_for(tp: Any) -> dict[str, Any]:
    """The JSON Schema of values of type ``tp``.

    Handles str/int/float/bool/None, ``list``/``tuple``/``set``/``dict``,
    ``Optional``/unions, ``Literal``, ``Enum``, attrs classes and dataclasses
    (nested), and ``Any`` (no constraint). Raises ``TypeError`` otherwise.
    """
    if tp is Any or tp is object:
        return {}
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        values = list(args)
        return {"enum": values}
    if origin is Union or origin is types.UnionType:
        non_null = [a for a in args if a is not type(None)]
        schemas = [schema_for(a) for a in non_null]
        if len(non_null) < len(args):
            schemas.append({"type": "null"})
        return {"anyOf": schemas} if len(schemas) > 1 else schemas[0]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [member.value for member in tp]}
    if is_structured_type(tp):
        return _object_schema(tp)
    if origin in (list, set, frozenset, Sequence) or tp in (list, set, frozenset):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = schema_for(args[0])
        return schema
    if origin is tuple or tp is tuple:
        if args and len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for(args[0])}
        if args:
            return {
                "type": "array",
                "prefixItems": [schema_for(a) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        return {"type": "array"}
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = schema_for(args[1])
        return schema
    raise TypeError(f"cannot derive a JSON Schema for {tp!r}")
