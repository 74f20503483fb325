"""Schemas never fetch what they refer to, and untrusted schemas run their regexes on RE2."""

from __future__ import annotations

import logging
import pickle
from typing import Any

import pytest

from condukt.schema import ExternalReference, Schema

OUTSIDE = [
    {"$ref": "http://169.254.169.254/latest/meta-data"},
    {"$ref": "https://example.com/s.json#/x"},
    {"$ref": "file:///etc/passwd"},
    {"properties": {"a": {"$ref": "other.json"}}},
    {"$id": "https://example.com/root/", "properties": {"a": {"$ref": "sibling.json"}}},
    {"$defs": {"inner": {"$id": "http://internal/x", "$ref": "y"}}},
    {"$dynamicRef": "https://example.com/s.json#meta"},
    {"items": {"anyOf": [{"not": {"$ref": "http://internal/a"}}]}},
    {"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveRef": "http://internal/r"},
    {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"$ref": "http://internal/d7"}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"a": {"$ref": "file:///d4"}}},
]


@pytest.mark.parametrize("spec", OUTSIDE)
@pytest.mark.parametrize("untrusted", [False, True])
def test_a_reference_outside_the_schema_is_refused_when_it_is_built(spec: dict[str, Any], untrusted: bool) -> None:
    with pytest.raises(ExternalReference, match="points outside the schema") as raised:
        Schema.of(spec, untrusted=untrusted)
    assert "never fetches" in str(raised.value) and isinstance(raised.value, ValueError)


def test_references_inside_the_schema_and_to_the_meta_schemas_resolve() -> None:
    inside = Schema.of({
        "$id": "https://example.com/root.json",
        "$defs": {"n": {"type": "integer"}, "anchored": {"$anchor": "pos", "minimum": 0},
                  "sub": {"$id": "sub.json", "type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#pos"}, "c": {"$ref": "sub.json"},
                       "d": {"$ref": "https://example.com/sub.json"}},
    })
    assert inside.errors({"a": 1, "b": 2, "c": "s", "d": "t"}) == []
    assert inside.errors({"a": "x"}) == ["a: 'x' is not of type 'integer'"]
    meta = Schema.of({"$ref": "https://json-schema.org/draft/2020-12/schema"})
    assert meta.is_valid({"type": "object"}) and not meta.is_valid({"type": 3})
    with pytest.raises(ValueError, match="points to nothing"):
        Schema.of({"$ref": "#/$defs/missing"})


def test_a_schema_url_is_a_dialect_name_not_something_to_fetch() -> None:
    schema = Schema.of({"$schema": "http://127.0.0.1:9/meta.json", "type": "string"})
    assert schema.errors(3) == ["3 is not of type 'string'"]


@pytest.mark.parametrize("spec, bad, good", [
    ({"pattern": "^(a+)+$"}, "a" * 100 + "!", "aaa"),
    ({"patternProperties": {"^(a+)+$": {"type": "integer"}}}, {"a" * 100: "x"}, {"a" * 100: 1}),
    ({"patternProperties": {"^(a+)+$": {}}, "additionalProperties": False}, {"a" * 100 + "!": 1}, {"aa": 1}),
    ({"propertyNames": {"pattern": "^(a+)+$"}}, {"a" * 100 + "!": 1}, {"a": 1}),
    ({"items": {"pattern": "^(a+)+$"}}, ["a" * 100 + "!"], ["a"]),
])
def test_untrusted_regexes_run_on_re2(spec: dict[str, Any], bad: Any, good: Any) -> None:
    pytest.importorskip("re2", reason="google-re2 comes with the mcp and test extras")
    schema = Schema.of(spec, untrusted=True)
    assert schema.untrusted and not schema.is_valid(bad) and schema.errors(bad)
    assert schema.is_valid(good)
    assert pickle.loads(pickle.dumps(schema)).untrusted
    assert Schema.of(spec) is not schema and not Schema.of(spec).untrusted  # trusted ones keep Python's re
    assert Schema.of(Schema.of(spec), untrusted=True) is schema


def test_what_re2_cannot_run_is_left_to_the_server_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("re2", reason="google-re2 comes with the mcp and test extras")
    caplog.set_level(logging.WARNING, logger="condukt.schema")
    lookahead = Schema.of({"type": "string", "pattern": "(?=x)y"}, untrusted=True)
    assert lookahead.is_valid("anything")
    assert "RE2 cannot run these patterns: '(?=x)y'" in caplog.text
    backref = Schema.of({"patternProperties": {"(a)\\1": {"type": "integer"}}, "additionalProperties": False},
                        untrusted=True)
    assert backref.is_valid({"aa": "not checked"})  # the pattern might match: neither extra nor checked
    unevaluated = Schema.of({"patternProperties": {"^a": {}}, "unevaluatedProperties": False}, untrusted=True)
    assert unevaluated.is_valid({"b": 1})
    assert "unevaluatedProperties not checked here" in caplog.text


def test_a_lone_surrogate_is_matched_as_a_replacement_character() -> None:
    pytest.importorskip("re2", reason="google-re2 comes with the mcp and test extras")
    schema = Schema.of({"type": "string", "pattern": "^a.b$"}, untrusted=True)
    assert schema.is_valid("a\ud800b") and not schema.is_valid("a\ud800\ud800b")
