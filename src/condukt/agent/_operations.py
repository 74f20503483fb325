"""Operations: typed, named one-shot entry points declared on an Agent class."""

from __future__ import annotations

from typing import Any

import attrs

from ..otp import Server
from ._errors import UnknownOperation
from ._transient import run_once

__all__ = ["BoundOperation", "Operation", "operation", "operations_of", "run_operation"]


@attrs.define
class Operation:
    """A declared operation: input schema, output schema and instructions.

    Declare one per class attribute (an operation has no body: the model does
    the work, with the agent's tools and system prompt)::

        class ReviewAgent(condukt.Agent):
            model = "anthropic:claude-sonnet-4-5"
            def tools(self):
                return [condukt.tools.Read]

            review_pr = condukt.operation(
                input=PullRequest,            # attrs class, dataclass, JSON Schema or None
                output=Review,
                instructions="Read the PR, decide a verdict, and write a summary.",
            )

        review = await ReviewAgent.review_pr(PullRequest("tuist/condukt", 1))

    Each call is a fresh one-shot run (no history is kept between calls).
    """

    output: Any
    instructions: str
    input: Any = None
    name: str = ""

    def __set_name__(self, owner: type, name: str) -> None:
        if not self.name:
            self.name = name
        table = dict(getattr(owner, "__condukt_operations__", {}))
        table[self.name] = self
        owner.__condukt_operations__ = table  # type: ignore[attr-defined]

    def __get__(self, instance: Any, owner: type[Server]) -> BoundOperation:
        return BoundOperation(owner, self)


@attrs.frozen
class BoundOperation:
    """An operation of one agent class, ready to call."""

    #: The agent class (a :class:`~condukt.Agent` subclass).
    agent: type[Server]
    # Annotated as Any: an ``Operation``-typed attribute would be read through
    # its descriptor protocol by type checkers.
    operation: Any

    async def __call__(self, input: Any = None, /, **options: Any) -> Any:
        """Run the operation on ``input``; ``options`` are agent start options and run options.

        Raises :class:`~condukt.InvalidInput` before any model request if
        ``input`` does not match, :class:`~condukt.InvalidOutput` or
        :class:`~condukt.NoResultSubmitted` if no valid result came back.
        Cancelling the caller aborts the run and stops its transient agent.
        """
        op: Operation = self.operation
        return await run_once(
            self.agent,
            op.instructions,
            input=input,
            input_schema=op.input,
            output=op.output,
            **options,
        )


def operation(*, output: Any, instructions: str, input: Any = None, name: str = "") -> Operation:
    """Declare an operation on an Agent class (see :class:`Operation`)."""
    if not isinstance(instructions, str) or not instructions.strip():
        raise ValueError("an operation needs instructions")
    return Operation(output=output, instructions=instructions.strip(), input=input, name=name)


def operations_of(agent: type[Server]) -> dict[str, Operation]:
    """The operations declared on ``agent`` (and its bases), by name."""
    return dict(getattr(agent, "__condukt_operations__", {}))


async def run_operation(agent: type[Server], name: str, input: Any = None, /, **options: Any) -> Any:
    """Run the operation ``name`` of ``agent``; :class:`UnknownOperation` if there is none.

    Otherwise as calling the operation: cancelling the caller aborts the run
    and stops its transient agent.
    """
    table = operations_of(agent)
    if name not in table:
        known = ", ".join(sorted(table)) or "none"
        raise UnknownOperation(f"{agent.__name__} has no operation {name!r} (known: {known})")
    return await BoundOperation(agent, table[name])(input, **options)
