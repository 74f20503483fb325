"""Regexes of an untrusted schema run in RE2, in time linear in the input, never in Python's ``re``.

A schema from elsewhere (an MCP server's tool) may hold a pattern that
backtracks for ever: ``"^(a+)+$"`` against ``"a" * 25 + "!"`` takes
seconds in ``re``, doubling with each character, and jsonschema runs it on
the calling thread, the node's trio thread. Two ways out were measured
(``benchmarks/schema_regex.py``, figures in ``docs/benchmarks.md``):

* off the loop with a deadline: a worker *thread* does not help, since
  ``re`` holds the GIL while it matches (a ticker thread got 2 of its 109
  ticks while a 1.1 s match ran); only a worker *process* that is killed at
  the deadline would, for a process round trip on every validation, and
  validation would have to become asynchronous;
* `google-re2 <https://pypi.org/project/google-re2/>`_ (Google's RE2,
  wheels for CPython 3.11 to 3.13): a pattern either compiles to an
  automaton that matches in linear time, or is refused (lookaround and
  backreferences); the attack above takes microseconds, and validating
  against a schema with an ordinary pattern costs 1.2 to 1.8 times what it
  costs with ``re`` (some 15 µs more, under a tool call's cost).

So an untrusted schema's ``pattern``, ``patternProperties`` and
``additionalProperties`` (which tests property names against
``patternProperties``) run here on RE2 (installed with the ``mcp`` extra).
What RE2 cannot run is not checked on this side (it is logged; the tool's
server checks its own arguments): a pattern RE2 refuses, and
``unevaluatedProperties`` in a schema that has ``patternProperties``
(jsonschema's bookkeeping for it calls ``re`` directly). A trusted schema
(your own code's) keeps Python's ``re``, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from jsonschema import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend

__all__ = ["RE2_MISSING", "untrusted_validator"]

logger = logging.getLogger("condukt.schema")

#: Why an untrusted schema with a regex cannot be used here, when google-re2 is not installed.
RE2_MISSING = (
    "regular expressions of an untrusted schema run in RE2: install google-re2 (`pip install 'condukt[mcp]'`)"
)

try:
    import re2  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - depends on the environment
    re2 = None

Search = Callable[[str, str], "bool | None"]


class _Patterns:
    """RE2 compilations of one schema's patterns; ``search`` answers None for a pattern RE2 cannot run."""

    def __init__(self) -> None:
        self.compiled: dict[str, Any] = {}
        self.refused: dict[str, str] = {}
        options = re2.Options()
        options.log_errors = False  # a refused pattern is reported once, by us
        self.options = options

    def compile(self, pattern: str) -> Any:
        found = self.compiled.get(pattern)
        if found is not None or pattern in self.refused:
            return found
        try:
            found = self.compiled[pattern] = re2.compile(pattern, options=self.options)
        except re2.error as exc:
            reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
            self.refused[pattern] = str(reason)
        return found

    def search(self, pattern: str, text: str) -> bool | None:
        compiled = self.compile(pattern)
        if compiled is None:
            return None
        try:
            return compiled.search(text) is not None
        except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8, where it is U+FFFD
            return compiled.search(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")) is not None


def _keywords(patterns: _Patterns, skip_unevaluated: bool) -> dict[str, Any]:
    search = patterns.search

    def pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and isinstance(patrn, str) and search(patrn, instance) is False:
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(
        validator: Any, properties: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for regex, subschema in properties.items():
            for name, value in instance.items():
                if search(regex, name):
                    yield from validator.descend(value, subschema, path=name, schema_path=regex)

    def additional_properties(
        validator: Any, additional: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        declared = schema.get("properties", {})
        regexes = list(schema.get("patternProperties", {}))
        # A name a pattern RE2 cannot run might match counts as matching: never refuse what the server may take.
        extras = [
            name for name in instance
            if name not in declared and not any(search(regex, name) is not False for regex in regexes)
        ]
        if validator.is_type(additional, "object"):
            for name in extras:
                yield from validator.descend(instance[name], additional, path=name)
        elif not additional and extras:
            listed = ", ".join(repr(name) for name in sorted(extras))
            if regexes:
                shown = ", ".join(repr(regex) for regex in sorted(regexes))
                yield ValidationError(f"{listed} {'does' if len(extras) == 1 else 'do'} not match any of the "
                                      f"regexes: {shown}")
            else:
                verb = "was" if len(extras) == 1 else "were"
                yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")

    found = {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
    }
    if skip_unevaluated:
        found["unevaluatedProperties"] = _unchecked
    return found


def _unchecked(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    return iter(())


def _collect(node: Any, patterns: set[str], keywords: set[str], depth: int = 0) -> None:
    """Every ``pattern`` value and ``patternProperties`` key in ``node``, and which of a few keywords occur."""
    if depth > 500:
        raise RecursionError
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                patterns.add(value)
            elif key == "patternProperties" and isinstance(value, dict):
                patterns.update(name for name in value if isinstance(name, str))
                keywords.add(key)
            elif key == "unevaluatedProperties":
                keywords.add(key)
            if key not in ("enum", "const", "default", "examples"):
                _collect(value, patterns, keywords, depth + 1)
    elif isinstance(node, list):
        for item in node:
            _collect(item, patterns, keywords, depth + 1)


def untrusted_validator(cls: type[Validator], schema: Any, *, label: str = "schema") -> type[Validator]:
    """``cls`` with its regex keywords run on RE2 for ``schema`` (see the module).

    Compiles every pattern of ``schema`` now; logs (on the ``condukt.schema``
    logger) what will not be checked on this side. Raises ``ValueError``
    when the schema has regexes and google-re2 is not installed.
    """
    patterns_found: set[str] = set()
    keywords: set[str] = set()
    _collect(schema, patterns_found, keywords)
    if not patterns_found and "patternProperties" not in keywords:
        return cls
    if re2 is None:  # pragma: no cover - depends on the environment
        raise ValueError(RE2_MISSING)
    patterns = _Patterns()
    for pattern in patterns_found:
        patterns.compile(pattern)
    skip_unevaluated = {"patternProperties", "unevaluatedProperties"} <= keywords
    if patterns.refused:
        listed = "; ".join(f"{p!r} ({why})" for p, why in sorted(patterns.refused.items()))
        logger.warning("%s: not checked here, RE2 cannot run these patterns: %s", label, listed)
    if skip_unevaluated:
        logger.warning("%s: unevaluatedProperties not checked here (with patternProperties it needs Python's re)",
                       label)
    extended: type[Validator] = extend(cls, validators=_keywords(patterns, skip_unevaluated))  # type: ignore[no-untyped-call]
    return extended
