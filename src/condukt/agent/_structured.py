"""Structured output and input: the ``submit_result`` tool, schemas, validation, conversion."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import jsonschema
from jsonschema.exceptions import best_match

from ..messages import TextBlock, ToolDefinition
from ..schema import is_structured_type, schema_for
from ..serialization import structure, unstructure
from ._errors import InvalidInput

__all__ = ["SUBMIT_RESULT", "OutputSpec", "Submission", "describe_errors", "render_input"]

#: The name of the synthetic tool a structured run adds.
SUBMIT_RESULT = "submit_result"

_INSTRUCTION = (
    "When you have the final answer, call the `submit_result` tool exactly once with it as the "
    "arguments; its parameters are the required result schema. Do not answer in plain text "
    "instead, and do not call it before you are done."
)


def _schema_of(spec: Any) -> tuple[dict[str, Any], type | None]:
    if isinstance(spec, Mapping):
        schema = dict(spec)
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"invalid JSON Schema: {exc.message}") from exc
        return schema, None
    if is_structured_type(spec):
        return schema_for(spec), spec
    raise TypeError(f"a schema must be a JSON Schema dict, an attrs class or a dataclass, got {spec!r}")


def describe_errors(validator: Any, value: Any, limit: int = 5) -> list[str]:
    """Readable messages for why ``value`` fails ``validator`` (most relevant first)."""
    errors = sorted(validator.iter_errors(value), key=lambda e: (len(e.absolute_path), e.message))
    first = best_match(validator.iter_errors(value))
    ordered = [first, *(e for e in errors if e is not first)] if first is not None else errors
    out: list[str] = []
    for error in ordered:
        where = "/".join(str(p) for p in error.absolute_path)
        text = f"{where}: {error.message}" if where else error.message
        if text not in out:
            out.append(text)
    return out[:limit]


@attrs.frozen
class OutputSpec:
    """A run's required result: the schema the model submits and how to convert it back."""

    parameters: dict[str, Any]
    wrapped: bool
    target: type | None
    validator: Any = attrs.field(eq=False, repr=False)

    @classmethod
    def of(cls, output: Any) -> OutputSpec:
        """Build from a JSON Schema dict, an attrs class or a dataclass."""
        schema, target = _schema_of(output)
        wrapped = schema.get("type") != "object"
        parameters = (
            {"type": "object", "properties": {"result": schema}, "required": ["result"]} if wrapped else schema
        )
        validator = jsonschema.validators.validator_for(parameters)(parameters)
        return cls(parameters, wrapped, target, validator)

    @property
    def instruction(self) -> str:
        """What the system prompt gains for a structured run."""
        return _INSTRUCTION

    def definition(self) -> ToolDefinition:
        """The ``submit_result`` tool as the model sees it."""
        return ToolDefinition(
            SUBMIT_RESULT,
            "Submit the final result of the task. Call exactly once, when done; the arguments "
            "must match the schema.",
            self.parameters,
        )

    def convert(self, arguments: dict[str, Any]) -> Any:
        """The user's result for valid ``arguments`` (dict, or an instance of ``target``)."""
        value = arguments["result"] if self.wrapped else arguments
        if self.target is not None:
            return structure(value, self.target)
        return value


class Submission:
    """The ``submit_result`` bookkeeping of one structured run."""

    __slots__ = ("accepted", "failures", "last_errors", "retries", "spec", "value")

    def __init__(self, spec: OutputSpec, retries: int) -> None:
        self.spec = spec
        self.retries = retries
        self.failures = 0
        self.accepted = False
        self.value: Any = None
        self.last_errors: list[str] = []

    @property
    def exhausted(self) -> bool:
        """True once more invalid submissions were made than the retry budget allows."""
        return self.failures > self.retries

    def submit(self, arguments: Any) -> tuple[tuple[TextBlock, ...], bool]:
        """Check one submission; returns the tool result for the model."""
        if self.accepted:
            return (TextBlock("Error: a result was already submitted; submit_result takes one call."),), True
        if not isinstance(arguments, dict):
            errors = ["the arguments must be a JSON object"]
        else:
            errors = describe_errors(self.spec.validator, arguments)
        if not errors:
            try:
                self.value = self.spec.convert(arguments)
            except Exception as exc:  # cattrs could not build the target type
                errors = [f"could not convert the result: {exc}"]
            else:
                self.accepted = True
                return (TextBlock("Result accepted."),), False
        self.failures += 1
        self.last_errors = errors
        remaining = self.retries - self.failures + 1
        hint = (
            f" Call submit_result again with a corrected result ({remaining} attempt(s) left)."
            if remaining > 0
            else ""
        )
        listed = "; ".join(errors)
        return (TextBlock(f"Error: the result does not match the schema: {listed}.{hint}"),), True


def render_input(value: Any, schema: Any) -> str:
    """Validate ``value`` against ``schema`` and render it for the prompt.

    ``value`` may be plain JSON data or an instance of an attrs class or a
    dataclass (unstructured to its fields first). Raises
    :class:`InvalidInput` (before any model request) when it does not fit.
    """
    data = unstructure(value) if is_structured_type(type(value)) else value
    if schema is not None:
        parameters, _ = _schema_of(schema)
        validator = jsonschema.validators.validator_for(parameters)(parameters)
        errors = describe_errors(validator, data)
        if errors:
            raise InvalidInput("input does not match its schema: " + "; ".join(errors), errors)
    try:
        text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"input is not JSON-serialisable: {exc}", [str(exc)]) from exc
    return f"Input:\n```json\n{text}\n```"
