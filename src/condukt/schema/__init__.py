"""Schemas: one capability for JSON Schemas, whether written as dicts or derived from Python types.

:class:`Schema` compiles a schema once (cached, bounded) and offers what
every layer needs from it: a fast :meth:`~Schema.is_valid`, readable
:meth:`~Schema.errors` worded by jsonschema, and conversion of valid JSON
data to the schema's Python type and back (:meth:`~Schema.convert`,
:meth:`~Schema.dump`)::

    from condukt.schema import Schema

    review = Schema.of(Review)          # an attrs class, dataclass, TypedDict or pydantic model
    review.json                         # its JSON Schema, as sent to a model
    review.errors({"verdict": "maybe"}) # ["verdict: 'maybe' is not one of ['approve', 'reject']", ...]
    review.convert({"verdict": "approve", "summary": "ok"})   # Review(verdict='approve', ...)

:func:`schema_for` derives a JSON Schema from a type, and
:func:`is_structured_type` says whether a type is a class with fields
(converted field by field). pydantic is not a dependency: it is used only
for models the caller defined with it.

Nothing is fetched: a reference outside the schema (a URL, a file) is
refused when the schema is built (:class:`ExternalReference`). A schema
from elsewhere, ``Schema.of(spec, untrusted=True)``, runs its regexes on
RE2 (linear time) rather than Python's backtracking ``re``.
"""

from __future__ import annotations

from ._derive import schema_for
from ._references import ExternalReference
from ._schema import Schema
from ._types import is_structured_type

__all__ = ["ExternalReference", "Schema", "is_structured_type", "schema_for"]
