"""JSON Schemas derived from Python types.

Hand-written on purpose. Measured against the libraries that derive schemas
(an attrs class, a dataclass and a TypedDict with a nested class, an enum, a
Literal and an Optional field; µs per uncached derivation):
``msgspec.json.schema`` (361 / 184 / 162) reads all three but drops field
descriptions and wraps every class in ``$ref``/``$defs``, which the fast
validation path cannot follow; ``apischema`` (fails / 1,383 / 3,114) and
pydantic's ``TypeAdapter`` (fails / 1,690 / fails for ``typing.TypedDict``
on 3.11) do not read attrs classes; each would be a new dependency. This
module (80 / 38 / 75, and cached by :class:`~condukt.schema.Schema`)
inlines nested classes, keeps field descriptions and closes objects
(``additionalProperties: false``). A pydantic model's schema is pydantic's
own ``model_json_schema()``, with its local ``$defs`` inlined when it is not
recursive.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import attrs

from ._types import is_pydantic_model, is_structured_type

__all__ = ["schema_for"]

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string"},
}

#: TypedDict key qualifiers, matched by name so typing_extensions' twins count too.
_QUALIFIERS = {"Required", "NotRequired", "ReadOnly"}

#: Keywords that only annotate: a ``$ref``'s siblings made only of these can be merged into its target.
_ANNOTATIONS = {"title", "description", "default", "examples", "deprecated", "$comment", "readOnly", "writeOnly"}


def schema_for(tp: Any) -> dict[str, Any]:
    """The JSON Schema of values of type ``tp``.

    Handles ``str``/``int``/``float``/``bool``/``None``, ``list``/``tuple``/
    ``set``/``dict``, ``Optional`` and unions, ``Literal``, ``Enum``,
    ``Annotated`` (its metadata is ignored), ``Any`` (no constraint), and
    classes with fields, nested: attrs classes, dataclasses and TypedDicts
    become closed objects (``additionalProperties: false``; fields without a
    default, or TypedDict keys that are required, are required; a field's
    ``metadata={"description": ...}`` and the class docstring become
    descriptions), and a pydantic ``BaseModel`` gets pydantic's own schema.

    Raises ``TypeError`` naming the type (and the field it sits in) that has
    no JSON Schema, and for a class that contains itself.
    """
    return _derive(tp, (), top=True)


def _derive(tp: Any, stack: tuple[type, ...], *, top: bool = False) -> dict[str, Any]:
    if tp is Any or tp is object:
        return {}
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Annotated:
        return _derive(args[0], stack, top=top)
    if origin is Literal:
        return {"enum": list(args)}
    if origin is Union or origin is types.UnionType:
        non_null = [a for a in args if a is not type(None)]
        schemas = [_derive(a, stack) for a in non_null]
        if len(non_null) < len(args):
            schemas.append({"type": "null"})
        return {"anyOf": schemas} if len(schemas) > 1 else schemas[0]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [member.value for member in tp]}
    if is_structured_type(tp):
        if tp in stack:
            raise TypeError(f"cannot derive a JSON Schema for {tp.__qualname__}: it contains itself")
        if is_pydantic_model(tp):
            return _pydantic_schema(tp, nested=not top)
        return _object_schema(tp, (*stack, tp))
    if origin in (list, set, frozenset, Sequence) or tp in (list, set, frozenset):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _derive(args[0], stack)
        return schema
    if origin is tuple or tp is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _derive(args[0], stack)}
        if args:
            return {
                "type": "array",
                "prefixItems": [_derive(a, stack) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        return {"type": "array"}
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = _derive(args[1], stack)
        return schema
    raise TypeError(f"cannot derive a JSON Schema for {tp!r}")


def _fields(tp: type) -> list[tuple[str, bool, str | None]]:
    """(name, required, description) of each field set by the constructor, in order."""
    if attrs.has(tp):
        return [(f.name, f.default is attrs.NOTHING, _description(f.metadata)) for f in attrs.fields(tp) if f.init]
    if dataclasses.is_dataclass(tp):
        return [
            (
                f.name,
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                _description(f.metadata),
            )
            for f in dataclasses.fields(tp)
            if f.init
        ]
    # A TypedDict. On Python 3.11 ``__required_keys__`` ignores NotRequired and
    # Required under ``from __future__ import annotations``: read the qualifiers.
    required = set(getattr(tp, "__required_keys__", ()))
    for name, hint in typing.get_type_hints(tp, include_extras=True).items():
        while True:
            origin = get_origin(hint)
            if origin is Annotated:
                hint = get_args(hint)[0]
            elif getattr(origin, "_name", None) in _QUALIFIERS:
                if origin._name == "NotRequired":
                    required.discard(name)
                elif origin._name == "Required":
                    required.add(name)
                hint = get_args(hint)[0]
            else:
                break
    return [(name, name in required, None) for name in typing.get_type_hints(tp)]


def _description(metadata: Mapping[Any, Any] | None) -> str | None:
    doc = metadata.get("description") if metadata else None
    return str(doc) if doc else None


def _object_schema(tp: type, stack: tuple[type, ...]) -> dict[str, Any]:
    hints = typing.get_type_hints(tp)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, is_required, doc in _fields(tp):
        try:
            prop = _derive(hints.get(name, Any), stack)
        except TypeError as exc:
            raise TypeError(f"{tp.__qualname__}.{name}: {exc}") from None
        if doc:
            prop = {**prop, "description": doc}
        properties[name] = prop
        if is_required:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    doc = tp.__doc__
    # A dataclass without a docstring gets "Name(field: type, ...)": not a description.
    if doc and not doc.startswith(f"{tp.__name__}("):
        schema["description"] = inspect.cleandoc(doc)
    return schema


def _pydantic_schema(tp: Any, *, nested: bool) -> dict[str, Any]:
    try:
        schema: dict[str, Any] = tp.model_json_schema()
    except Exception as exc:  # pydantic's own errors: a field type it cannot describe
        raise TypeError(f"cannot derive a JSON Schema for {tp.__qualname__}: {exc}") from None
    defs = schema.get("$defs")
    if not isinstance(defs, dict):
        return schema
    try:
        inlined = _inline(schema, defs, frozenset())
    except _Recursive:
        if nested:
            # Its "#/$defs/..." references would point into the outer schema.
            raise TypeError(
                f"cannot derive a JSON Schema for {tp.__qualname__} inside another type: it is recursive"
            ) from None
        return schema
    assert isinstance(inlined, dict)
    inlined.pop("$defs", None)
    return inlined


class _Recursive(Exception):
    pass


def _inline(node: Any, defs: dict[str, Any], seen: frozenset[str]) -> Any:
    """``node`` with every ``#/$defs/...`` reference replaced by its target."""
    if isinstance(node, list):
        return [_inline(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.removeprefix("#/$defs/")
        if name == ref or name not in defs or name in seen:
            raise _Recursive  # recursive, or not a local definition: keep pydantic's schema as is
        target = _inline(defs[name], defs, seen | {name})
        rest = {key: _inline(value, defs, seen) for key, value in node.items() if key != "$ref"}
        if not rest:
            return target
        if set(rest) <= _ANNOTATIONS:
            return {**target, **rest}
        return {"allOf": [target], **rest}
    return {key: _inline(value, defs, seen) for key, value in node.items() if key != "$defs"}
