"""The :class:`Schema`: one compiled JSON Schema, from a dict or a Python type, and its caches."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, final, get_origin, overload

import jsonschema
from jsonschema.protocols import Validator

from . import _convert
from ._derive import schema_for
from ._describe import describe, safe_repr, shorten
from ._fast import Check, compile_check
from ._references import REGISTRY, check_references
from ._regex import untrusted_validator

__all__ = ["Schema"]

T = TypeVar("T")

#: Schemas kept per cache (one for types, one for dicts), least recently used dropped first.
CACHE_SIZE = 2048

_ACCEPTED = (
    "a schema is a JSON Schema dict, an attrs class, a dataclass, a TypedDict, a pydantic BaseModel class, "
    "or a type such as int, list[str] or Literal['a', 'b']"
)


@final
class Schema(Generic[T]):
    """A JSON Schema compiled once: validation, readable errors, and conversion to and from a type.

    Build one with :meth:`Schema.of`. ``json`` is the JSON Schema (shared:
    do not mutate it); ``target`` is the Python type values convert to, or
    ``None`` for a schema given as a dict; ``untrusted`` whether its
    regexes run on RE2 (see :meth:`of`). Instances are immutable and safe
    to share between tasks and threads.

    Nothing is ever fetched: every reference must resolve inside the
    schema (:class:`~condukt.schema.ExternalReference` otherwise, when it
    is built).
    """

    __slots__ = ("_fast", "_validator", "json", "target", "untrusted")

    json: dict[str, Any]
    target: Any
    untrusted: bool

    def __init__(self, schema: dict[str, Any], target: Any, untrusted: bool = False) -> None:
        # Private: use Schema.of, which checks the schema and caches the result.
        # A $schema naming no draft jsonschema knows (a URL of the author's) reads as the latest: nothing is fetched.
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(part) for part in exc.absolute_path)
            at = f" at {where}" if where else ""
            raise ValueError(f"invalid JSON Schema{at}: {shorten(exc.message, 300)}") from None
        except RecursionError:
            raise ValueError("invalid JSON Schema: it is nested too deeply") from None
        except Exception as exc:  # jsonschema failing on a schema it cannot read at all
            raise ValueError(f"invalid JSON Schema: {type(exc).__name__}: {shorten(str(exc), 300)}") from None
        check_references(schema, cls.META_SCHEMA)
        if untrusted:
            try:
                cls = untrusted_validator(cls, schema, label=f"schema {shorten(repr(schema), 100)}")
            except RecursionError:
                raise ValueError("invalid JSON Schema: it is nested too deeply") from None
        self.json = schema
        self.target = target
        self.untrusted = untrusted
        self._validator: Validator = cls(schema, registry=REGISTRY)
        try:
            fast = compile_check(schema)
        except RecursionError:
            fast = None
        self._fast: Check | None = fast

    @overload
    @classmethod
    def of(cls, spec: type[T], *, untrusted: bool = False) -> Schema[T]: ...
    @overload
    @classmethod
    def of(cls, spec: Any, *, untrusted: bool = False) -> Schema[Any]: ...

    @classmethod
    def of(cls, spec: Any, *, untrusted: bool = False) -> Schema[Any]:
        """The compiled schema for ``spec``.

        ``spec`` is a JSON Schema dict (checked against its meta-schema), an
        attrs class, a dataclass, a ``TypedDict``, a pydantic ``BaseModel``
        class (pydantic is used only when you pass one), or a type that
        :func:`~condukt.schema.schema_for` understands (``int``,
        ``list[str]``, ``Literal[...]``, an ``Enum``, unions...). A
        :class:`Schema` is returned as is.

        Cached: the same class, or an equal dict (compared as canonical
        JSON), gives the same :class:`Schema`; each cache keeps the
        :data:`CACHE_SIZE` most recently used. A dict is copied, so changing
        it afterwards does not change the schema.

        ``untrusted=True`` for a schema that comes from elsewhere (an MCP
        server's tool): its regexes (``pattern``, ``patternProperties``)
        run on RE2, in time linear in the input, never in Python's
        backtracking ``re`` on the caller's thread; what RE2 cannot run is
        left unchecked here and logged (see :mod:`condukt.schema._regex`).
        It needs google-re2 (the ``mcp`` extra) when the schema has regexes.

        Raises ``ValueError`` for a dict that is not valid JSON data or not a
        valid JSON Schema (naming the problem and where), its subclass
        :class:`~condukt.schema.ExternalReference` for a reference to
        anything outside the schema (a URL, a file: never fetched),
        ``TypeError`` for anything else that is not a schema.
        """
        if isinstance(spec, Schema):
            if spec.untrusted or not untrusted:
                return spec
            spec = spec.json
        if isinstance(spec, Mapping):
            return _of_text(_Text(spec), untrusted)
        if isinstance(spec, type) or get_origin(spec) is not None or spec is Any:
            try:
                hash(spec)
            except TypeError:  # Literal[...] of an unhashable value: no caching
                return _of_type(spec)
            return _cached_of_type(spec)
        raise TypeError(f"cannot use {safe_repr(spec)} as a schema: {_ACCEPTED}")

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` fits the schema. Never raises: a value jsonschema fails on is not valid."""
        fast = self._fast
        if fast is not None:
            try:
                if fast(value):
                    return True
            except Exception:
                pass  # cannot tell: jsonschema decides
        try:
            return bool(self._validator.is_valid(value))
        except Exception:
            return False

    def errors(self, value: Any, limit: int = 5) -> list[str]:
        """Why ``value`` does not fit: up to ``limit`` ``"path: message"`` strings, ``[]`` if it fits.

        jsonschema words the messages; the most relevant (jsonschema's
        ``best_match``) comes first. Never raises: values are shown
        shortened (``<unprintable TYPE>`` when their ``repr`` raises), and a
        value jsonschema itself fails on (``1e999`` against ``multipleOf``,
        a value nested too deeply) gets a message naming the problem.
        """
        if self.is_valid(value):
            return []
        return describe(self._validator, value, limit)

    def convert(self, value: Any) -> T:
        """``value`` (JSON data that :meth:`is_valid` accepts) as an instance of ``target``.

        cattrs builds attrs classes, dataclasses and TypedDicts (nested ones
        too); a pydantic model is built with its ``model_validate``. Returns
        ``value`` unchanged when ``target`` is ``None``. Raises
        ``ValueError`` saying what could not be converted.
        """
        result: T = value if self.target is None else _convert.convert(value, self.target)
        return result

    def dump(self, value: T) -> Any:
        """JSON data for ``value``, the reverse of :meth:`convert`.

        attrs instances, dataclasses and TypedDicts become dicts of their
        fields (nested ones too), pydantic models their
        ``model_dump(mode="json")``, enums their values. Raises
        ``ValueError`` if ``value`` cannot be turned into JSON data.
        """
        return _convert.dump(value, self.target)

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        # Compiled checks do not pickle: rebuild from the spec (handles cross process boundaries).
        if self.untrusted:
            return (_untrusted_of, (self.json,))
        return (Schema.of, (self.json if self.target is None else self.target,))

    def __repr__(self) -> str:
        if self.target is not None:
            return f"Schema.of({getattr(self.target, '__qualname__', None) or safe_repr(self.target)})"
        return f"Schema.of({safe_repr(self.json)})"


class _Text:
    """A dict schema keyed by its canonical JSON, carrying the dict to build from on a miss."""

    __slots__ = ("_hash", "spec", "text")

    spec: Mapping[str, Any] | None

    def __init__(self, spec: Mapping[str, Any]) -> None:
        try:
            self.text = json.dumps(
                spec, sort_keys=True, separators=(",", ":"), allow_nan=False, default=_mapping_as_dict
            )
        except RecursionError:
            raise ValueError("invalid JSON Schema: it is nested too deeply") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"invalid JSON Schema: it is not JSON data ({exc})") from None
        self.spec = spec
        self._hash = hash(self.text)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Text) and other.text == self.text


def _mapping_as_dict(value: Any) -> dict[Any, Any]:
    """Lets any Mapping (a ``MappingProxyType``...) stand for a JSON object; anything else is not JSON."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


@functools.lru_cache(maxsize=CACHE_SIZE)
def _of_text(key: _Text, untrusted: bool = False) -> Schema[Any]:
    # A copy in the caller's key order (the order the model sees), detached from the caller's dict.
    schema: Schema[Any] = Schema(json.loads(json.dumps(key.spec, default=_mapping_as_dict)), None, untrusted)
    key.spec = None  # the cache keeps the key: it need not keep the caller's dict alive
    return schema


def _untrusted_of(spec: Any) -> Schema[Any]:
    return Schema.of(spec, untrusted=True)


def _of_type(spec: Any) -> Schema[Any]:
    try:
        schema = schema_for(spec)
    except TypeError as exc:
        raise TypeError(f"cannot use {safe_repr(spec)} as a schema: {exc}; {_ACCEPTED}") from None
    return Schema(schema, spec)


_cached_of_type = functools.lru_cache(maxsize=CACHE_SIZE)(_of_type)
