"""References in a schema resolve inside it, or the schema is refused: nothing is ever fetched.

Without a ``referencing`` registry, jsonschema falls back to a deprecated
resolver that fetches any ``http(s)://`` or ``file://`` reference with
urllib (no timeout, on the calling thread) the first time validation
reaches it. A tool schema from an MCP server could thus make the agent's
host fetch internal URLs or read local files, and show what it read to
the model in a validation message. Every :class:`~condukt.schema.Schema`
gets :data:`REGISTRY` instead, which holds the JSON Schema meta-schemas
and refuses any retrieval; and every ``$ref``, ``$dynamicRef`` and
``$recursiveRef`` is looked up when the schema is built, so a schema
pointing outside itself is refused then (:class:`ExternalReference`),
not halfway through a run.
"""

from __future__ import annotations

from typing import Any

import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]

from ..otp import ConduktError

__all__ = ["REGISTRY", "ExternalReference", "check_references"]

#: The keywords that point at another schema.
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


class ExternalReference(ConduktError, ValueError):
    """A schema refers to something outside itself (a URL, a file, another document): it is never fetched.

    The message names the reference. Put what it points to in the schema
    itself (under ``$defs``) and refer to it as ``#/$defs/<name>``.
    """


class _Refused(Exception):
    pass


def _refuse(uri: str) -> referencing.Resource[Any]:
    raise _Refused(uri)


#: The meta-schemas of every JSON Schema draft (bundled with jsonschema), and nothing fetched.
REGISTRY: referencing.jsonschema.SchemaRegistry = SPECIFICATIONS.combine(
    referencing.Registry(retrieve=_refuse)  # type: ignore[call-arg]  # attrs makes the argument
)


def check_references(schema: Any, meta_schema: Any) -> None:
    """Raise :class:`ExternalReference` unless every reference in ``schema`` resolves within it.

    ``meta_schema`` is the validator class's meta-schema (its ``$schema``
    names the draft whose rules say which keywords hold subschemas and how
    ``$id`` changes the base URI). Raises ``ValueError`` for a reference
    that points nowhere inside the schema.
    """
    dialect = meta_schema.get("$schema") if isinstance(meta_schema, dict) else None
    specification = referencing.jsonschema.specification_with(
        dialect or "", default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(schema)
    resolver = REGISTRY.resolver_with_root(root)
    try:
        _walk(root, resolver)
    except (ExternalReference, ValueError):
        raise
    except RecursionError:
        raise ValueError("invalid JSON Schema: it is nested too deeply") from None
    except Exception as exc:  # referencing failing on something it cannot read (an unknown nested $schema...)
        raise ValueError(f"invalid JSON Schema: {type(exc).__name__}: {exc}") from None


def _walk(resource: referencing.Resource[Any], resolver: Any) -> None:
    contents = resource.contents
    if isinstance(contents, dict):
        for keyword in _REFERENCES:
            target = contents.get(keyword)
            if isinstance(target, str):
                _lookup(resolver, keyword, target)
    for sub in resource.subresources():
        _walk(sub, resolver.in_subresource(sub))


def _lookup(resolver: Any, keyword: str, target: str) -> None:
    try:
        resolver.lookup(target)
    except referencing.exceptions.Unresolvable as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(
            cause, (referencing.exceptions.Unretrievable, referencing.exceptions.NoSuchResource)
        ):
            cause = cause.__cause__
        if cause is None:
            raise ValueError(f"invalid JSON Schema: {keyword} {target!r} points to nothing in the schema") from None
        uri = getattr(cause, "ref", target)
        raise ExternalReference(
            f"invalid JSON Schema: {keyword} {target!r} points outside the schema ({uri!r}), and condukt never "
            "fetches schemas: put the referenced schema under $defs"
        ) from None
