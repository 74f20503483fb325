"""Guardrails as capabilities: checks on a run's prompt and on its result.

An :class:`InputGuardrail` checks the prompt while the first model request
is already in flight (``wrap_model_request``): a pass costs no latency, a
trip cancels the request (the provider sees the connection closed) and
fails the run. An :class:`OutputGuardrail` checks the final text or
structured result (``review_result``) and may rewrite it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs
import outcome
import trio

from ...messages import AssistantMessage, TextBlock, UserMessage
from ...providers import ModelRequest
from .._capability import Capability, SendRequest
from .._errors import AgentError
from .._run import Run

__all__ = ["Check", "GuardrailTripped", "InputGuardrail", "OutputGuardrail"]

#: A guardrail's check: ``check(value)``, sync or async. It returns None (or
#: True) to pass, a replacement to rewrite, False to trip, or raises
#: :class:`GuardrailTripped` to trip with a reason.
Check = Callable[[Any], Any]


class GuardrailTripped(AgentError):
    """A guardrail stopped the run. ``guardrail`` names it, ``reason`` says why.

    The history is left as after any failed run: a tripped input guardrail
    leaves no trace of the prompt; a tripped output guardrail drops the turn
    that gave the refused answer.
    """

    def __init__(self, reason: str, guardrail: str = "") -> None:
        super().__init__(f"guardrail {guardrail} tripped: {reason}" if guardrail else f"guardrail tripped: {reason}")
        self.reason = reason
        self.guardrail = guardrail


def _name_of(check: Check, name: str | None) -> str:
    if name is not None:
        return name
    return str(getattr(check, "__name__", type(check).__name__))


async def _verdict(check: Check, value: Any, name: str) -> Any:
    """What ``check`` makes of ``value``: the value to go on with (``value`` itself on a pass)."""
    try:
        result = check(value)
        if inspect.isawaitable(result):
            result = await result
    except GuardrailTripped as exc:
        if not exc.guardrail:
            raise GuardrailTripped(exc.reason, name) from None
        raise
    if result is None or result is True:
        return value
    if result is False:
        raise GuardrailTripped("the check failed", name)
    return result


class InputGuardrail(Capability):
    """Checks a run's prompt (its text, scrubbed) concurrently with the first model request.

    ``capabilities=[InputGuardrail(no_secrets_in_prompt)]``. The check passes
    (None/True), rewrites the prompt (returns a str: the request in flight
    is cancelled and sent again with the new prompt, which also replaces the
    prompt in the history), or trips (returns False or raises
    :class:`GuardrailTripped`): the request in flight is cancelled and the
    run fails with :class:`GuardrailTripped`, before any tool ran.
    ``concurrent=False`` runs the check first and only then sends the
    request (for a check that usually rewrites). A sync check runs on the
    event loop: keep it quick, or make it async. Steers, follow-ups and
    resumed runs are not checked again.
    """

    def __init__(self, check: Check, *, name: str | None = None, concurrent: bool = True) -> None:
        if not callable(check):
            raise TypeError(f"an input guardrail needs a callable check, got {check!r}")
        self.check = check
        self.name = _name_of(check, name)
        self.concurrent = concurrent

    async def wrap_model_request(self, run: Run, request: ModelRequest, send: SendRequest) -> AssistantMessage:
        """Around the run's first request: check the prompt meanwhile.

        An abort or the run's timeout cancels both the check and the request.
        """
        if run.turn != 1 or run.resumed is not None:
            return await send(request)
        prompt = run.context.messages[run.start]
        text = prompt.text if type(prompt) is UserMessage else ""
        if not self.concurrent:
            checked = await _verdict(self.check, text, self.name)
            if checked is not text:
                request = self._rewrite(run, request, checked)
            return await send(request)
        answered: outcome.Outcome[AssistantMessage] | None = None

        async def ask() -> None:
            nonlocal answered
            answered = await outcome.acapture(send, request)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            # Captured, not raised here: an exception leaving a nursery's body comes out as a group.
            verdict = await outcome.acapture(_verdict, self.check, text, self.name)
            if type(verdict) is not outcome.Value or verdict.value is not text:
                nursery.cancel_scope.cancel()  # tripped or rewritten: the request in flight is abandoned
        checked = verdict.unwrap()
        if checked is not text:
            return await send(self._rewrite(run, request, checked))
        assert answered is not None
        return answered.unwrap()

    def _rewrite(self, run: Run, request: ModelRequest, text: Any) -> ModelRequest:
        """``request`` with the prompt replaced by ``text`` (in the history too)."""
        if not isinstance(text, str):
            raise TypeError(f"input guardrail {self.name} returned {type(text).__name__}, not a str or None/bool")
        ctx = run.context
        old = ctx.messages[run.start]
        images = tuple(b for b in old.content if type(b) is not TextBlock) if type(old) is UserMessage else ()
        new = UserMessage((TextBlock(ctx.scrub(text)), *images))
        ctx.messages[run.start] = new
        messages = tuple(new if m is old else m for m in request.messages)
        return attrs.evolve(request, messages=messages)

    def __repr__(self) -> str:
        return f"InputGuardrail({self.name})"


class OutputGuardrail(Capability):
    """Checks a run's result: the final text, or the structured result (``output=``).

    ``capabilities=[OutputGuardrail(no_internal_urls)]``. The check passes
    (None/True), rewrites (returns the replacement: the run returns it, and
    for a text answer the history's last answer holds it too), or trips
    (False or :class:`GuardrailTripped`): the run fails and the turn with
    the refused answer is dropped from the history. Text events already
    streamed (``TextDelta``) showed the model's own words; ``AgentEnd`` and
    the run's result carry the checked one.
    """

    def __init__(self, check: Check, *, name: str | None = None) -> None:
        if not callable(check):
            raise TypeError(f"an output guardrail needs a callable check, got {check!r}")
        self.check = check
        self.name = _name_of(check, name)

    async def review_result(self, run: Run, value: Any) -> Any:
        """The result as the check leaves it; a trip drops the answering turn first.

        An abort or the run's timeout cancels the check (the run ends aborted or timed out).
        """
        ctx = run.context
        messages = ctx.messages
        last = len(messages) - 1
        while last > run.start and type(messages[last]) is not AssistantMessage:
            last -= 1
        try:
            checked = await _verdict(self.check, value, self.name)
        except GuardrailTripped:
            if last > run.start:
                del messages[last:]  # the refused answer must not stay in the conversation
            raise
        if checked is not value and not run.structured and isinstance(checked, str) and last > run.start:
            answer = messages[last]
            assert type(answer) is AssistantMessage
            text = ctx.scrub(checked)
            kept = tuple(b for b in answer.content if type(b) is not TextBlock)
            messages[last] = attrs.evolve(answer, content=(*kept, TextBlock(text)))
            return text
        return checked

    def __repr__(self) -> str:
        return f"OutputGuardrail({self.name})"

