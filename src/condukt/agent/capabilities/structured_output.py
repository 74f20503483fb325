"""Structured output: the ``submit_result`` tool, the result schema, validation and conversion.

A run with ``output=`` gets :class:`StructuredOutput` among its hooks (the
handle compiled the schema in the caller; structured input, rendered into
the prompt, is :mod:`condukt.agent._input`).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import attrs

from ...events import Event, PartialOutput, ToolCallDelta
from ...messages import AssistantMessage, Message, TextBlock, ToolCall, ToolDefinition, ToolResultMessage
from ...providers import ModelRequest
from ...schema import Schema
from ...sessions import RunCheckpoint
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._errors import InvalidOutput, NoResultSubmitted
from .._run import Run

try:  # the [partial] extra: PartialOutput events (benchmarks/partial_json.py measures it against hand-written)
    import jiter

    _PARTIAL = True
except ImportError:  # pragma: no cover - the test extra installs it
    _PARTIAL = False

__all__ = ["SUBMIT_RESULT", "OutputSpec", "PartialResult", "StructuredOutput", "relaxed_schema"]

#: The name of the synthetic tool a structured run adds.
SUBMIT_RESULT = "submit_result"

_INSTRUCTION = (
    "When you have the final answer, call the `submit_result` tool exactly once with it as the "
    "arguments; its parameters are the required result schema. Do not answer in plain text "
    "instead, and do not call it before you are done."
)


@attrs.frozen
class OutputSpec:
    """A run's required result: the schema the model submits and how to convert it back.

    ``schema`` is the user's (a JSON Schema dict, an attrs class, a
    dataclass, a TypedDict or a pydantic model); ``parameters`` what the
    ``submit_result`` tool takes: the same schema when it describes an
    object, else ``{"result": <schema>}`` (tool arguments are objects).
    """

    schema: Schema[Any]
    parameters: Schema[Any]
    wrapped: bool

    @classmethod
    def of(cls, output: Any) -> OutputSpec:
        """Build from any schema :meth:`Schema.of <condukt.schema.Schema.of>` takes (cached, bounded)."""
        return _spec_of(output if isinstance(output, Schema) else Schema.of(output))

    def errors(self, arguments: Any) -> list[str]:
        """Why ``arguments`` are not a valid submission (empty when valid); never raises."""
        return self.parameters.errors(arguments)

    def convert(self, arguments: dict[str, Any]) -> Any:
        """The user's result for valid ``arguments`` (a dict, or an instance of the schema's class)."""
        return self.schema.convert(arguments["result"] if self.wrapped else arguments)

    def dump(self, value: Any) -> Any:
        """``value`` (a result) as JSON data."""
        return self.schema.dump(value)

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
            self.parameters.json,
        )


#: Keywords a value being written may not meet yet (a prefix of a list, an object missing its
#: later properties, a string still being written): left out when a partial value is checked.
_NOT_YET = frozenset(
    {"required", "minItems", "minProperties", "minLength", "minContains", "contains", "pattern", "format",
     "dependentRequired", "dependencies", "dependentSchemas", "if", "then", "else", "not"}
)


def relaxed_schema(schema: Any) -> Any:
    """``schema`` (JSON Schema data) as a partial value must fit it: what only a whole value can meet is left out.

    Dropped everywhere: required properties, minimum sizes, string patterns
    and formats, conditionals; ``enum``/``const`` when they hold strings
    (the string may be half written). Types, maximum sizes, numeric bounds
    and ``additionalProperties`` stay: a partial value that breaks them will
    not be the result either.
    """
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _NOT_YET:
                continue
            if key in ("enum", "const") and any(isinstance(v, str) for v in (value if key == "enum" else [value])):
                continue
            if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
                out[key] = {name: relaxed_schema(sub) for name, sub in value.items()}
            else:
                out[key] = relaxed_schema(value)
        return out
    if isinstance(schema, list):
        return [relaxed_schema(item) for item in schema]
    return schema


class PartialResult:
    """The ``submit_result`` arguments as they stream in, parsed so far (jiter's partial mode).

    :meth:`feed` takes a piece of JSON text and returns the new partial
    value when it grew and fits the relaxed schema (:func:`relaxed_schema`),
    else None. Each piece re-parses the text so far: jiter parses in C, and
    ``benchmarks/partial_json.py`` measures it against a hand-written parser.
    """

    __slots__ = ("_check", "_last", "_parts")

    def __init__(self, check: Schema[Any]) -> None:
        self._check = check
        self._parts: list[str] = []
        self._last: Any = None

    def feed(self, piece: str) -> dict[str, Any] | None:
        """The value so far, if it is new and valid as a partial value; None otherwise. Never raises."""
        self._parts.append(piece)
        text = "".join(self._parts)
        self._parts = [text]
        try:
            value = jiter.from_json(text.encode(), partial_mode="trailing-strings")
        except ValueError:  # not JSON (yet, or ever): the final submission is judged as usual
            return None
        if not isinstance(value, dict) or not value or value == self._last:
            return None
        if not self._check.is_valid(value):
            return None
        self._last = value
        return value


@functools.lru_cache(maxsize=1024)
def _spec_of(schema: Schema[Any]) -> OutputSpec:
    body = schema.json
    if body.get("type") == "object":
        return OutputSpec(schema, schema, False)
    inner = dict(body)
    definitions = inner.pop("$defs", None)
    wrapper: dict[str, Any] = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
    if definitions is not None:
        wrapper["$defs"] = definitions  # "#/$defs/..." references resolve from the root
    return OutputSpec(schema, Schema.of(wrapper), True)


class StructuredOutput(Builtin):
    """A structured run (``output=``) as a capability of that run.

    It offers the ``submit_result`` tool and its instruction on every model
    request, judges submissions in call order (the first valid one wins),
    ends the run once one is accepted (:class:`InvalidOutput` after
    ``retries`` invalid ones), and makes the accepted value the run's
    result (:class:`NoResultSubmitted` if none came). At the end it takes
    its bookkeeping out of the history: later runs do not offer
    ``submit_result``, so the calls to it become the result as plain text.
    Such a run is not checkpointed: its schema is code, which a snapshot
    cannot hold.
    """

    def __init__(self, spec: OutputSpec, retries: int) -> None:
        self.spec = spec
        self.retries = retries
        self.failures = 0
        self.accepted = False
        self.value: Any = None
        self.last_errors: list[str] = []
        self._definition = spec.definition()
        #: Per streamed ``submit_result`` call (by index in its response), its partial value so far.
        self._partials: dict[int, PartialResult] = {}
        self._relaxed: Schema[Any] | None = None

    @classmethod
    def once_resolved(cls, ctx: AgentContext) -> Capability | None:
        """None; an agent with a tool of its own named ``submit_result`` fails to start."""
        if SUBMIT_RESULT in ctx.tools_by_name:
            raise ValueError(f"the tool name {SUBMIT_RESULT!r} is reserved for structured output")
        return None

    @classmethod
    def for_run(cls, ctx: AgentContext, run: Run) -> Capability | None:
        """One for a run with ``output=``."""
        output = run.request.output
        if output is None:
            return None
        return cls(OutputSpec.of(output), ctx.config.output_retries)

    def prepare_request(self, run: Run, request: ModelRequest) -> ModelRequest:
        """Add the instruction to the system prompt and ``submit_result`` to the tools (streamed, with jiter)."""
        instruction = self.spec.instruction
        system = f"{request.system_prompt}\n\n{instruction}" if request.system_prompt else instruction
        self._partials = {}
        streamed = request.stream_arguments
        if _PARTIAL and SUBMIT_RESULT not in streamed:
            streamed = (*streamed, SUBMIT_RESULT)
        return attrs.evolve(
            request, system_prompt=system, tools=(*request.tools, self._definition), stream_arguments=streamed
        )

    def model_event(self, run: Run, event: Event) -> Event | None:
        """A streamed piece of ``submit_result``'s arguments becomes a :class:`~condukt.events.PartialOutput`.

        Only when the value grew and fits the schema as a partial value
        (else nothing is passed on); other events pass as they are.
        """
        if type(event) is not ToolCallDelta or event.name != SUBMIT_RESULT:
            return event
        partial = self._partials.get(event.index)
        if partial is None:
            if self._relaxed is None:
                self._relaxed = Schema.of(relaxed_schema(self.spec.parameters.json))
            partial = self._partials[event.index] = PartialResult(self._relaxed)
        value = partial.feed(event.arguments)
        return None if value is None else PartialOutput(value)

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
        """Rewrite the run's turns without ``submit_result`` calls and results; never waits, so never cancelled."""
        messages = run.context.messages
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
            answer = TextBlock(json.dumps(self.spec.dump(self.value), ensure_ascii=False, default=str))
            last = kept[-1]
            if type(last) is AssistantMessage:
                kept[-1] = attrs.evolve(last, content=(*last.content, answer))
            else:
                kept.append(AssistantMessage((answer,), stop_reason="end_turn"))
        elif len(kept) == 1:
            kept = []  # nothing answered the prompt: as if it had not been asked
        messages[run.start :] = kept

    def checkpoint(self, run: Run, checkpoint: RunCheckpoint) -> RunCheckpoint | None:
        """None: a snapshot cannot hold the run's schema, so the run is not resumed."""
        return None

    def submit(self, arguments: Any) -> tuple[tuple[TextBlock, ...], bool]:
        """Check one submission; returns the tool result for the model."""
        if self.accepted:
            return (TextBlock("Error: a result was already submitted; submit_result takes one call."),), True
        if not isinstance(arguments, dict):
            errors = ["the arguments must be a JSON object"]
        else:
            errors = self.spec.errors(arguments)
        if not errors:
            try:
                self.value = self.spec.convert(arguments)
            except ValueError as exc:  # valid JSON the target type still refuses
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
