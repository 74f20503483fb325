"""Schema validation cost: condukt.schema.Schema against plain jsonschema, in the same run.

Three schemas: the one-property tool schema of agent_loop.py, seven
properties with bounds and enums, and an array of fifty nested objects.
Valid values go through the fast path; an invalid one through jsonschema.

    python benchmarks/schema_validation.py
"""

from __future__ import annotations

import timeit
from typing import Any

import jsonschema
from _common import report

from condukt.schema import Schema

NOOP = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
WIDE = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "maxLength": 50},
        "offset": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "flag": {"type": "boolean"},
        "mode": {"enum": ["a", "b", 1]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20},
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["path"],
    "additionalProperties": False,
}
ROWS = {
    "type": "object",
    "properties": {
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "score": {"type": "number"}},
                "required": ["id", "name"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["rows"],
}
CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("tool schema, {x: 1}", NOOP, {"x": 1}),
    (
        "7 properties",
        WIDE,
        {"path": "a.py", "offset": 3, "ratio": 0.5, "flag": True, "mode": "a", "tags": ["x"], "maybe": None},
    ),
    ("50 nested objects", ROWS, {"rows": [{"id": i, "name": "n", "score": 1.5} for i in range(50)]}),
]


def per_call(check: Any, value: Any, number: int) -> float:
    """µs per ``check(value)``, best of seven."""
    return min(timeit.repeat(lambda: check(value), number=number, repeat=7)) / number * 1e6


def main() -> None:
    rows = []
    ratios = []
    for name, spec, value in CASES:
        schema = Schema.of(spec)
        reference = jsonschema.validators.validator_for(spec)(spec)
        assert schema.is_valid(value) and reference.is_valid(value)
        number = 200 if "rows" in value else 20_000
        ours = per_call(schema.is_valid, value, number)
        theirs = per_call(reference.is_valid, value, max(number // 10, 20))
        rows += [(f"{name}: Schema.is_valid", ours, "µs"), (f"{name}: jsonschema is_valid", theirs, "µs")]
        ratios.append(theirs / ours)
    rows.append(("tool schema, invalid: Schema.errors", per_call(Schema.of(NOOP).errors, {"x": "one"}, 2_000), "µs"))
    report(rows)
    print("Schema.is_valid is " + ", ".join(f"{r:.0f}x" for r in ratios) + " faster than jsonschema on these cases")


if __name__ == "__main__":
    main()
