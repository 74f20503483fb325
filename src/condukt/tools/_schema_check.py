"""Compiled argument checks: a fast path in front of jsonschema for simple schemas.

jsonschema stays the authority: these checks only answer "certainly valid";
anything they cannot decide, and every error message, goes to jsonschema.
A schema that uses a keyword outside the supported subset is not compiled
at all. Validators are cached per schema so agents sharing a tool class do
not recompile it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

__all__ = ["CompiledSchema", "compile_schema"]

Check = Callable[[Any], bool]

_ANNOTATIONS = {"description", "title", "default", "examples", "$comment", "deprecated"}
_SUPPORTED = _ANNOTATIONS | {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
    "minItems", "maxItems",
}  # fmt: skip


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _bounded(compare: Callable[[Any, Any], bool], bound: Any) -> Check:
    return lambda v: not _is_number(v) or compare(v, bound)


def _sized(kind: type, compare: Callable[[int, int], bool], bound: int) -> Check:
    return lambda v: not isinstance(v, kind) or compare(len(v), bound)  # type: ignore[arg-type]


def _compile(schema: Any) -> Check | None:
    """A check for ``schema``, or ``None`` if it uses anything unsupported."""
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, Mapping) or not set(schema) <= _SUPPORTED:
        return None
    checks: list[Check] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if not all(isinstance(k, str) and k in _TYPES for k in kinds):
            return None
        type_checks = [_TYPES[k] for k in kinds]
        checks.append(type_checks[0] if len(type_checks) == 1 else lambda v: any(c(v) for c in type_checks))
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not all(isinstance(x, (str, int, float, bool, type(None))) for x in values):
            return None
        # JSON Schema compares 1 and 1.0 as equal but never true and 1.
        allowed = [(isinstance(x, bool), x) for x in values]
        checks.append(lambda v: (isinstance(v, bool), v) in allowed)
    if "const" in schema:
        const = schema["const"]
        if not isinstance(const, (str, int, float, bool, type(None))):
            return None
        checks.append(lambda v: v == const and isinstance(v, bool) == isinstance(const, bool))
    bounds: tuple[tuple[str, Callable[[Any, Any], bool]], ...] = (
        ("minimum", lambda v, b: v >= b),
        ("maximum", lambda v, b: v <= b),
        ("exclusiveMinimum", lambda v, b: v > b),
        ("exclusiveMaximum", lambda v, b: v < b),
    )
    for key, compare in bounds:
        if key in schema:
            bound = schema[key]
            if not _is_number(bound):
                return None
            checks.append(_bounded(compare, bound))
    sizes: tuple[tuple[str, type, Callable[[int, int], bool]], ...] = (
        ("minLength", str, lambda n, b: n >= b),
        ("maxLength", str, lambda n, b: n <= b),
        ("minItems", list, lambda n, b: n >= b),
        ("maxItems", list, lambda n, b: n <= b),
    )
    for key, measure, compare in sizes:
        if key in schema:
            bound = schema[key]
            if not isinstance(bound, int) or isinstance(bound, bool):
                return None
            # str length in code points, as JSON Schema specifies.
            checks.append(_sized(measure, compare, bound))
    if "items" in schema:
        item = _compile(schema["items"])
        if item is None:
            return None
        checks.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", True)
        if not isinstance(properties, Mapping) or not isinstance(required, list) or not isinstance(extra, bool):
            return None
        compiled: dict[str, Check] = {}
        for name, sub in properties.items():
            check = _compile(sub)
            if check is None:
                return None
            compiled[name] = check

        def check_object(v: Any) -> bool:
            if not isinstance(v, dict):
                return True  # "type" decides about non-objects
            for name in required:
                if name not in v:
                    return False
            for key, value in v.items():
                check = compiled.get(key)
                if check is None:
                    if not extra:
                        return False
                elif not check(value):
                    return False
            return True

        checks.append(check_object)
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:  # the common case (a type and its properties): no generator
        first, second = checks
        return lambda v: first(v) and second(v)
    return lambda v: all(c(v) for c in checks)


class CompiledSchema:
    """A checked JSON Schema: a jsonschema validator plus, when possible, a fast check."""

    __slots__ = ("fast", "schema", "validator")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(dict(schema))  # raises jsonschema.SchemaError
        self.schema = schema
        self.validator = cls(schema)
        self.fast = _compile(schema)

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` fits (the fast check first, jsonschema when it says no or cannot tell)."""
        fast = self.fast
        if fast is not None and fast(value):
            return True
        return bool(self.validator.is_valid(value))


_by_id: dict[int, CompiledSchema] = {}
_by_text: dict[str, CompiledSchema] = {}


def compile_schema(schema: Mapping[str, Any], *, stable: bool = False) -> CompiledSchema:
    """The cached :class:`CompiledSchema` for ``schema``.

    ``stable`` says the object lives as long as the program and is never
    mutated (a class attribute): it is then cached by identity, which is
    free. Others are cached by their canonical JSON, so equal schemas share.
    """
    if stable:
        hit = _by_id.get(id(schema))
        if hit is not None and hit.schema is schema:
            return hit
    text = json.dumps(schema, sort_keys=True, default=str)
    compiled = _by_text.get(text)
    if compiled is None:
        compiled = _by_text[text] = CompiledSchema(schema)
    if stable:
        _by_id[id(schema)] = compiled
    return compiled
