"""Compaction: keeping a conversation within the model's context.

An agent with ``compactor=`` compacts its history after every run and on
``agent.compact()`` (the :class:`Compaction` capability, built in then).
Compactors never separate a tool call from its result, and a compacted
history always starts with a user message (providers require it). Custom
compactors implement :class:`Compactor` (for instance one that asks a model
for a summary).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from ...messages import AssistantMessage, Message, TextBlock, ToolResultMessage, UserMessage
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._run import Run

logger = logging.getLogger("condukt.agent")

__all__ = ["Compaction", "Compactor", "Sliding", "ToolResultPrune", "compact_with"]


@runtime_checkable
class Compactor(Protocol):
    """Turns a history into a shorter one."""

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        """Return the compacted history (the input is not modified).

        The agent calls it after each run, outside the run's cancel scope (an
        abort or the run's timeout does not reach it), and for
        ``agent.compact()``; only the agent process stopping cancels it. It
        must let ``trio.Cancelled`` propagate and report a failure by raising an
        ``Exception``: the history is replaced only by what it returns, so
        either way it stays intact.
        """
        ...


def _valid(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be an int >= 0, got {value!r}")
    return value


@attrs.frozen
class Sliding:
    """Keep about the last ``keep`` messages.

    The cut moves forward to the next user message, so a tool call is never
    kept without its result (nor a result without its call) and the history
    starts with the user. It may keep fewer than ``keep`` messages, never more.
    """

    keep: int = attrs.field(default=20, validator=lambda _i, _a, v: _valid(v, "keep"))

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        """The last messages from a user message on.

        Never raises and has no checkpoint: a cancellation takes effect at the
        caller's next one.
        """
        if len(messages) <= self.keep:
            return list(messages)
        start = len(messages) - self.keep
        while start < len(messages) and not isinstance(messages[start], UserMessage):
            start += 1
        return list(messages[start:])


@attrs.frozen
class ToolResultPrune:
    """Shorten old, large tool results; everything else is kept as is.

    The ``keep_recent`` most recent tool results stay intact; older ones
    longer than ``max_size`` characters are replaced by a note saying how
    much was elided (the call/result pairing is unchanged).
    """

    keep_recent: int = attrs.field(default=5, validator=lambda _i, _a, v: _valid(v, "keep_recent"))
    max_size: int = attrs.field(default=4096, validator=lambda _i, _a, v: _valid(v, "max_size"))

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        """The history with old large tool results elided.

        Never raises and has no checkpoint: a cancellation takes effect at the
        caller's next one.
        """
        result_positions = [i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)]
        old = set(result_positions[: max(0, len(result_positions) - self.keep_recent)])
        out: list[Message] = []
        for index, message in enumerate(messages):
            if index in old and isinstance(message, ToolResultMessage):
                size = sum(len(b.text) if isinstance(b, TextBlock) else len(b.data) for b in message.content)
                if size > self.max_size:
                    note = f"[tool result elided to save context: {size} characters]"
                    message = attrs.evolve(message, content=(TextBlock(note),))
            out.append(message)
        return out


async def compact_with(compactor: Compactor, messages: Sequence[Message]) -> list[Message]:
    """Run ``compactor`` and check that its result is a history providers accept.

    Raises ``ValueError`` naming the compactor when a tool call is not
    answered by its result right after it (results dropped, moved away, or
    kept without their call), or when the history does not start with a
    user message. It returns a new list: a caller that replaces its history
    only with what this returns keeps it intact when a compaction is rejected.
    Cancellable where ``compactor.compact`` is: ``trio.Cancelled`` and what
    the compactor raises propagate unchanged, and ``messages`` is untouched.
    """
    compacted = list(await compactor.compact(messages))
    name = type(compactor).__name__
    unanswered: list[str] = []  # calls of the last assistant message still waiting for results
    for message in compacted:
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id not in unanswered:
                raise ValueError(f"{name} separated tool result {message.tool_call_id!r} from its call")
            unanswered.remove(message.tool_call_id)
            continue
        if unanswered:
            break
        if isinstance(message, AssistantMessage):
            unanswered = [call.id for call in message.tool_calls]
    if unanswered:
        raise ValueError(f"{name} separated tool call {unanswered[0]!r} from its result")
    if compacted and not isinstance(compacted[0], UserMessage):
        first = type(compacted[0]).__name__
        raise ValueError(f"{name} left a history starting with {first}; it must start with a UserMessage")
    return compacted


class Compaction(Builtin):
    """Runs ``compactor`` over the history after each run, and on ``agent.compact()``.

    Built in when the agent has a ``compactor``.
    """

    def __init__(self, compactor: Compactor) -> None:
        self.compactor = compactor

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """One for an agent with a ``compactor`` (not one a capability of its own applies: ``Summarize``)."""
        compactor = ctx.config.compactor
        if compactor is None or getattr(compactor, "own_capability", False):
            return None
        return cls(compactor)

    async def compact(self, ctx: AgentContext) -> None:
        """``agent.compact()``: compact now; a failing compactor raises (its caller gets it), the history intact.

        Only the agent process stopping cancels it (the history then stays as it was).
        """
        ctx.messages[:] = await compact_with(self.compactor, ctx.messages)

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """Compact after every run, whatever its outcome; a failing compactor is logged, the history left as is.

        Outside the run's cancel scope: only the agent process stopping cancels it.
        """
        ctx = run.context
        try:
            ctx.messages[:] = await compact_with(self.compactor, ctx.messages)
        except Exception as exc:
            # The run succeeded or failed on its own; a broken compactor must
            # not turn that into a crash (or a restart loop).
            logger.error("%r: compaction failed; history left as is", ctx.handle, exc_info=exc)
