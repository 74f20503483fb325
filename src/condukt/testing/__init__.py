"""Models for tests and demos: :class:`ScriptedModel` and :class:`FunctionModel`.

Both record every request in ``model.requests`` (``await
model.wait_for_requests(n)`` waits until ``n`` have arrived) and stream text
and thinking through the same deltas a real provider emits, so agents,
streams and tools can be tested without a network::

    from condukt.testing import ScriptedModel, reply, call

    model = ScriptedModel([
        call("get_weather", {"location": "Paris"}),                 # one turn, one tool call
        [call("read", {"path": "a"}), call("read", {"path": "b"})], # one turn, parallel calls
        reply("It is sunny."),                                      # final text
    ])
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from itertools import count
from typing import Any, Union

import attrs
import trio

from ..events import TextDelta, ThinkingDelta, ToolCallDelta
from ..messages import AssistantMessage, ContentBlock, TextBlock, ThinkingBlock, ToolCall, Usage
from ..providers import Emit, ModelError, ModelRequest

__all__ = ["FunctionModel", "Reply", "ScriptExhausted", "ScriptedModel", "Step", "call", "reply"]


class ScriptExhausted(ModelError):
    """A :class:`ScriptedModel` was asked for more responses than its script holds."""


@attrs.frozen
class Reply:
    """A scripted response: text (and optional thinking), after an optional delay."""

    text: str = ""
    thinking: str | None = None
    usage: Usage = Usage()
    delay: float = 0.0


def reply(text: str = "", *, thinking: str | None = None, usage: Usage | None = None, delay: float = 0.0) -> Reply:
    """A final text response (``delay`` seconds of simulated latency first)."""
    return Reply(text, thinking, usage or Usage(), delay)


def call(name: str, arguments: Any = None, *, id: str | None = None) -> ToolCall:
    """A tool call response; the id is generated if not given."""
    return ToolCall(id or "", name, {} if arguments is None else arguments)


#: One scripted turn: a reply, a tool call, a list of those (one response with
#: several blocks, e.g. parallel calls), an exception to raise, or a finished
#: :class:`AssistantMessage`.
Step = Union[Reply, ToolCall, str, Sequence[Any], BaseException, AssistantMessage]

_WORDS = re.compile(r"\S+\s*|\s+")


def _chunks(text: str) -> list[str]:
    return _WORDS.findall(text) or [text]


def _json_chunks(text: str, size: int = 8) -> list[str]:
    """JSON text in pieces of ``size`` characters, as a provider streams a tool call's arguments."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [text]


class _Recorder:
    name: str

    def __init__(self) -> None:
        #: Every request the agent sent, in order.
        self.requests: list[ModelRequest] = []
        self._ids = count(1)
        # Tasks in ``wait_for_requests``: made on first use, so a model may be built outside trio.
        self._arrivals: trio.lowlevel.ParkingLot | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Waiting tasks belong to this process's trio run: a copy (a model sent to a Ray actor) has none.
        state = self.__dict__.copy()
        state["_arrivals"] = None
        return state

    def _record(self, request: ModelRequest) -> None:
        self.requests.append(request)
        arrivals = self._arrivals
        if arrivals:
            arrivals.unpark_all()

    async def wait_for_requests(self, count: int = 1) -> list[ModelRequest]:
        """Wait until the model has received ``count`` requests in all; returns the first ``count``.

        A request counts from the moment the agent sent it, before the model
        answers: a test can act while a request is in flight (abort, steer,
        kill the agent) without sleeping. Requests made before the call count
        too, so ``await model.wait_for_requests(2)`` returns at once once two
        have arrived. Wrap it in ``trio.fail_after`` to bound the wait.

        Cancellation: only the waiting is cancelled. Raises ``ValueError``
        for a ``count`` below 1.
        """
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count!r}")
        if len(self.requests) < count:
            if self._arrivals is None:
                self._arrivals = trio.lowlevel.ParkingLot()
            while len(self.requests) < count:
                await self._arrivals.park()
        else:
            await trio.lowlevel.checkpoint()
        return self.requests[:count]

    async def _respond(self, step: Any, emit: Emit, streamed: tuple[str, ...] = ()) -> AssistantMessage:
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, AssistantMessage):
            for block in step.content:
                if isinstance(block, ThinkingBlock):
                    await emit(ThinkingDelta(block.thinking))
                elif isinstance(block, TextBlock):
                    await emit(TextDelta(block.text))
            return step
        parts = step if isinstance(step, (list, tuple)) else [step]
        blocks: list[ContentBlock] = []
        usage = Usage()
        has_calls = False
        for part in parts:
            if isinstance(part, str):
                part = Reply(part)
            if isinstance(part, Reply):
                if part.delay:
                    await trio.sleep(part.delay)
                usage = usage + part.usage
                if part.thinking:
                    for chunk in _chunks(part.thinking):
                        await emit(ThinkingDelta(chunk))
                    blocks.append(ThinkingBlock(part.thinking))
                if part.text:
                    for chunk in _chunks(part.text):
                        await emit(TextDelta(chunk))
                    blocks.append(TextBlock(part.text))
            elif isinstance(part, ToolCall):
                has_calls = True
                part = part if part.id else attrs.evolve(part, id=f"call_{next(self._ids)}")
                if part.name in streamed:  # the request asked for its arguments as they are written
                    index = sum(type(b) is ToolCall for b in blocks)
                    for chunk in _json_chunks(json.dumps(part.arguments, ensure_ascii=False)):
                        await emit(ToolCallDelta(index, part.id, part.name, chunk))
                blocks.append(part)
            else:
                raise TypeError(f"not a scripted step: {part!r}")
        return AssistantMessage(
            tuple(blocks), usage, "tool_use" if has_calls else "end_turn", self.name
        )


class ScriptedModel(_Recorder):
    """Answers each request with the next step of a script.

    Running out of steps raises :class:`ScriptExhausted` (a :class:`ModelError`,
    so the run fails cleanly). ``remaining`` tells how many steps are left.
    """

    def __init__(self, steps: Iterable[Step], *, name: str = "scripted") -> None:
        super().__init__()
        self.name = name
        self._steps = list(steps)
        self._next = 0

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return len(self._steps) - self._next

    async def complete(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Record ``request`` and play the next step.

        Raises :class:`ScriptExhausted`, the step itself when it is an
        exception, or ``TypeError`` for an entry that is not a step.
        Cancellable only where a reply's ``delay`` sleeps or ``emit`` blocks;
        a cancelled call has still used up its step.
        """
        self._record(request)
        if self._next >= len(self._steps):
            raise ScriptExhausted(f"{self.name}: script exhausted after {len(self._steps)} responses")
        step = self._steps[self._next]
        self._next += 1
        return await self._respond(step, emit, request.stream_arguments)


class FunctionModel(_Recorder):
    """Computes each response with ``fn(request)`` (sync or async).

    ``fn`` returns anything a :class:`ScriptedModel` step may be (a string is
    a text reply) or raises.
    """

    def __init__(
        self, fn: Callable[[ModelRequest], Step | Awaitable[Step]], *, name: str = "function"
    ) -> None:
        super().__init__()
        self.name = name
        self._fn = fn

    async def complete(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Record ``request`` and answer with ``fn(request)``.

        Raises what ``fn`` raises, the step when it is an exception, or
        ``TypeError`` for a result that is not a step. Cancellable where an
        async ``fn``, a reply's ``delay`` or ``emit`` is; a sync ``fn`` runs to
        its end on the event loop.
        """
        self._record(request)
        step = self._fn(request)
        if inspect.isawaitable(step):
            step = await step
        return await self._respond(step, emit, request.stream_arguments)
