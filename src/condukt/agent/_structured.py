"""Structured output and input: the ``submit_result`` tool, schemas, validation, conversion."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import jsonschema
from jsonschema.exceptions import best_match

from ..messages import AssistantMessage, Message, TextBlock, ToolCall, ToolDefinition, ToolResultMessage
from ..providers import ModelRequest
from ..schema import is_structured_type, schema_for
from ..serialization import structure, unstructure
from ._capability import Capability
from ._errors import InvalidInput, InvalidOutput, NoResultSubmitted

if TYPE_CHECKING:
    from ._run import Run

__all__ = ["SUBMIT_RESULT", "OutputSpec", "StructuredOutput", "describe_errors", "output_spec", "render_input"]

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


_OUTPUT_SPECS: dict[Any, OutputSpec] = {}


def output_spec(output: Any) -> OutputSpec:
    """The (cached) :class:`OutputSpec` for an ``output=`` argument; ``TypeError``/``ValueError`` if unusable."""
    key = output if isinstance(output, type) else repr(output)
    spec = _OUTPUT_SPECS.get(key)
    if spec is None:
        spec = _OUTPUT_SPECS[key] = OutputSpec.of(output)
    return spec


class StructuredOutput(Capability):
    """A structured run (``output=``) as a capability of that run.

    It offers the ``submit_result`` tool and its instruction on every model
    request, judges submissions in call order (the first valid one wins),
    ends the run once one is accepted (:class:`InvalidOutput` after
    ``retries`` invalid ones), and makes the accepted value the run's
    result (:class:`NoResultSubmitted` if none came). At the end it takes
    its bookkeeping out of the history: later runs do not offer
    ``submit_result``, so the calls to it become the result as plain text.
    """

    def __init__(self, spec: OutputSpec, retries: int) -> None:
        self.spec = spec
        self.retries = retries
        self.failures = 0
        self.accepted = False
        self.value: Any = None
        self.last_errors: list[str] = []
        self._definition = spec.definition()

    def prepare_request(self, run: Run, request: ModelRequest) -> ModelRequest:
        """Add the instruction to the system prompt and ``submit_result`` to the tools."""
        instruction = self.spec.instruction
        system = f"{request.system_prompt}\n\n{instruction}" if request.system_prompt else instruction
        return attrs.evolve(request, system_prompt=system, tools=(*request.tools, self._definition))

    def intercept_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """Judge a ``submit_result`` call; other calls go to their tools."""
        if call.name != SUBMIT_RESULT:
            return None
        content, is_error = self.submit(call.arguments)
        return ToolResultMessage(call.id, call.name, content, is_error)

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """End the run once a result is accepted; fail it when the retries are used up."""
        if self.accepted:
            return True
        if self.failures > self.retries:
            raise InvalidOutput(
                f"the model submitted {self.failures} invalid result(s): " + "; ".join(self.last_errors),
                self.last_errors,
            )
        return False

    def finish(self, run: Run, value: Any) -> Any:
        """The accepted result; :class:`NoResultSubmitted` without one."""
        if not self.accepted:
            raise NoResultSubmitted("the run ended without a call to submit_result")
        return self.value

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """Rewrite the run's turns without ``submit_result`` calls and results."""
        messages = run.session.messages
        if run.start < 0 or run.start >= len(messages):
            return
        kept: list[Message] = [messages[run.start]]
        for message in messages[run.start + 1 :]:
            if type(message) is ToolResultMessage and message.name == SUBMIT_RESULT:
                continue
            if type(message) is AssistantMessage:
                blocks = tuple(b for b in message.content if not (type(b) is ToolCall and b.name == SUBMIT_RESULT))
                if not blocks:
                    continue
                message = attrs.evolve(message, content=blocks)
                if type(kept[-1]) is AssistantMessage:  # its only call was submit_result
                    message = attrs.evolve(message, content=(*kept.pop().content, *blocks))
            kept.append(message)
        if failure is None:
            answer = TextBlock(json.dumps(unstructure(self.value), ensure_ascii=False, default=str))
            last = kept[-1]
            if type(last) is AssistantMessage:
                kept[-1] = attrs.evolve(last, content=(*last.content, answer))
            else:
                kept.append(AssistantMessage((answer,), stop_reason="end_turn"))
        elif len(kept) == 1:
            kept = []  # nothing answered the prompt: as if it had not been asked
        messages[run.start :] = kept

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
