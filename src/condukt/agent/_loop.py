"""A run, from its start to its settled end: ask the model, run the tools it calls, repeat, then settle.

Read top to bottom: :func:`run_turns` is the turn loop; the steps it takes
follow it (:func:`model_request`, :func:`ask_model`, the tool calls in
:mod:`._tool_calls`); :func:`settle` is what happens after the loop (the
capabilities' ``after_run``, a save, the last events). Everything else
(persistence, compaction, redaction, structured output, sub-agents,
telemetry) plugs in through capability hooks (:mod:`._capability`); which
run goes when (queueing, aborts, ``Done`` before the next job) is
:mod:`._lifecycle`'s.
"""

from __future__ import annotations

import json
import math
from typing import Any

import trio

from ..events import AgentEnd, AgentStart, Done, Error, Event, MaxTurnsReached, TurnEnd, TurnStart
from ..messages import AssistantMessage, TextBlock, UserMessage
from ..otp.lowlevel import process_of
from ..providers import Emit, ModelError, ModelRequest
from ._capability import SendRequest
from ._errors import Aborted, AgentError, RunTimeout
from ._result import RunResult
from ._run import NO_USAGE, Run, resumed_turn
from ._tool_calls import describe, run_tool_calls

__all__ = ["ask_model", "cancellation", "model_request", "run_turns", "settle", "settle_waits"]


async def run_turns(run: Run) -> tuple[Any, BaseException | None]:
    """Run ``run`` to its end: ``(result, None)`` or ``(None, failure)``.

    A failure is an :class:`AgentError` (aborted, timed out, no valid
    structured result...) or a :class:`~condukt.providers.ModelError`; the
    history then holds only the turns that completed (none: not even the
    prompt). Anything else escaping is a bug and crashes the agent.
    """
    ctx = run.context
    hooks = run.hooks
    messages = ctx.messages
    # Events are built only for someone. The run's own listeners are known
    # now (a reader that leaves only makes them fewer); node subscribers
    # come and go, so ``subscribed`` is checked each time. Plain locals, not
    # bound methods: fewer objects per run in flight.
    listeners = run.listeners
    watched = run.sink is not None or run.on_event is not None or listeners.handle_event is not None
    subscribed = listeners.subscribed  # the node's topics with subscribers: a live view, tested as it is
    max_turns = run.max_turns or ctx.config.max_turns
    prompt = ctx.scrub(run.prompt)
    resumed = run.resumed
    in_flight = None
    if resumed is None:
        run.start = committed = len(messages)
    else:  # a run restarted from its checkpoint: its prompt and completed turns are in the history
        in_flight = resumed_turn(messages)
        run.start = resumed.prompt_index
        committed = len(messages) - (in_flight is not None)
        run.turn = resumed.turn - (in_flight is not None)
    run.started_at = trio.current_time()
    value: Any = None
    failure: BaseException | None = None
    # One scope for the abort and the timeout (the run's flag tells them
    # apart), made now with its deadline (setting one later costs a context
    # manager in trio); an abort that came before the start cancels it at once.
    timeout = run.timeout
    scope = run.scope = trio.CancelScope(deadline=run.started_at + timeout if timeout is not None else math.inf)
    if run.aborted or run.ending:
        scope.cancel()
    try:
        with scope:
            try:
                if resumed is None:
                    attachments = run.attachments
                    if attachments:  # text documents are scrubbed as the prompt is (images and PDFs as they are)
                        attachments = ctx.scrub_blocks(attachments)  # type: ignore[assignment]
                    messages.append(UserMessage((TextBlock(prompt), *attachments)))
                if watched or subscribed:
                    await run.emit(AgentStart(ctx.id, prompt, run.id))
                for started in hooks.run_started:
                    started(run)
                while True:
                    if run.steers:
                        _take_steers(run)
                    run.turn += 1
                    if watched or subscribed:
                        await run.emit(TurnStart(run.turn))
                    if in_flight is not None:  # resumed: finish the turn the checkpoint holds
                        response, in_flight = in_flight, None
                    else:
                        request = model_request(run)
                        if hooks.model_started or hooks.model_finished or hooks.wrap_model_request or hooks.model_event:
                            response = await ask_model(run, request)
                        else:  # the common case, without a coroutine in between
                            response = await ctx.model.complete(request, run.emit)
                        usage = run.usage  # the first response's usage is the run's as it is (no sum to make)
                        run.usage = response.usage if usage is NO_USAGE else usage + response.usage
                        messages.append(response)
                    text = response.text
                    if text:
                        run.text = text
                    calls = response.tool_calls
                    called = bool(calls)
                    if called:
                        messages.extend(await run_tool_calls(run, calls))
                        del calls  # not kept alive through the next request
                    committed = len(messages)
                    if run.taken:
                        run.taken = ()
                    for changed in hooks.history_changed:
                        await changed(ctx)
                    if watched or subscribed:
                        await run.emit(TurnEnd(run.turn, response))
                    stop = False
                    for after in hooks.after_turn:  # every hook sees the turn, even after one said stop
                        stop = after(run, response) or stop
                    for between in hooks.between_turns:
                        stop = await between(run, response) or stop
                    if stop:
                        break
                    if not called:
                        if run.steers:
                            continue  # a steer arrived during the last request: answer it
                        break
                    if run.turn >= max_turns:
                        await run.emit(MaxTurnsReached(max_turns))
                        break
                value = run.text
                for finish in hooks.finish:
                    value = finish(run, value)
                for review in hooks.review_result:
                    value = await review(run, value)
            except (AgentError, ModelError) as exc:
                failure = exc
    except BaseException as exc:
        # A cancellation that gets past the run's scope is its caller's (or
        # the process's exit): also when the run's scope was cancelled too (a
        # timeout, an abort), and as a group from a nursery of tool calls.
        if run.hosted and cancellation(exc) and _caller_left(run):
            # Its caller was cancelled: for a run the caller's own task
            # hosts, that is the abort (see ``Lifecycle._hosted_job``).
            run.aborted = True
            _roll_back(run, committed)
        raise
    if run.ending:  # the process exits (a hosted run): the history stays, as a cancelled worker leaves it
        return None, None
    if run.aborted:  # also when it was too quick to reach a checkpoint after the abort
        failure = Aborted("run aborted")
    elif scope.cancelled_caught:
        failure = RunTimeout(f"run did not finish within {run.timeout:g}s")
    if failure is not None:
        _roll_back(run, committed)
        return None, failure
    return value, None


def cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is ``trio.Cancelled``, or a group of nothing else (from a nursery)."""
    if isinstance(exc, trio.Cancelled):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None


def _take_steers(run: Run) -> None:
    """Add the waiting steers to the history before the next request.

    They join the last message when it is the user's (the prompt, or steers
    taken before): the history never holds two user messages in a row.
    """
    ctx = run.context
    messages = ctx.messages
    blocks = tuple(TextBlock(ctx.scrub(text)) for text in run.steers)
    last = messages[-1]
    if type(last) is UserMessage:
        messages[-1] = UserMessage((*last.content, *blocks))
    else:
        messages.append(UserMessage(blocks))
    run.taken = [*run.taken, *run.steers]
    run.steers = ()


def _roll_back(run: Run, committed: int) -> None:
    """Drop the turn in flight; a prompt no completed turn answered goes too.

    ``committed`` is the history's length after the last completed turn (the
    length before the prompt when none completed). So the history never
    ends with an unanswered prompt, and the next one does not follow it.
    Steers the dropped turn had taken go back to the run's steers (the
    lifecycle makes them follow-ups unless the run was aborted).
    """
    messages = run.context.messages
    committed = min(committed, len(messages))  # a capability may have dropped the last turn itself
    if committed > run.start and type(messages[committed - 1]) is not UserMessage:
        del messages[committed:]
    else:
        del messages[run.start :]
    run.steers = [*run.taken, *run.steers]
    run.taken = ()


def _caller_left(run: Run) -> bool:
    """For a cancelled hosted run: whether its caller went away (else the process is exiting)."""
    process = process_of(run.context.handle)
    return process is not None and not process.exiting


# ---------------------------------------------------------------------- one model request


def model_request(run: Run) -> ModelRequest:
    """The request for ``run``'s next turn, as the capabilities' ``prepare_request`` hooks make it."""
    ctx = run.context
    config = ctx.config
    settings = config.model_settings
    override = run.request.model_settings
    if override is not None:
        settings = override if settings is None else settings.merged(override)
    max_tokens = config.max_tokens
    if settings is not None and settings.max_tokens is not None:
        max_tokens = settings.max_tokens
    request = ModelRequest(
        ctx.system_prompt, tuple(ctx.messages), ctx.tool_definitions, config.thinking_level, max_tokens, settings
    )
    for prepare in run.hooks.prepare_request:
        request = prepare(run, request)
    return request


async def ask_model(run: Run, request: ModelRequest) -> AssistantMessage:
    """Send ``request`` through the ``wrap_model_request`` hooks, telling ``model_started``/``model_finished``.

    Runs in the run: an abort or the run's timeout cancels it (``model_finished`` hears of it).
    """
    hooks = run.hooks
    for started in hooks.model_started:
        started(run)
    try:
        if hooks.wrap_model_request:
            response = await _wrapped(run, hooks.wrap_model_request, _send(run))(request)
        else:
            response = await run.context.model.complete(request, _emit(run))
    except BaseException as exc:
        for finished in hooks.model_finished:
            finished(run, None, exc)
        raise
    for finished in hooks.model_finished:
        finished(run, response, None)
    return response


def _send(run: Run) -> SendRequest:
    """The innermost ``send`` of the wrappers: the model itself."""
    model, emit = run.context.model, _emit(run)

    async def send(request: ModelRequest) -> AssistantMessage:
        return await model.complete(request, emit)

    return send


def _emit(run: Run) -> Emit:
    """How the model emits for ``run``: straight to it, or through the capabilities' ``model_event`` hooks."""
    filters = run.hooks.model_event
    if not filters:
        return run.emit
    deliver = run.emit

    async def emit(event: Event) -> None:
        for keep in filters:
            passed: Event | None = keep(run, event)
            if passed is None:
                return
            event = passed
        await deliver(event)

    return emit


def _wrapped(run: Run, wrappers: tuple[Any, ...], send: SendRequest) -> SendRequest:
    """``send`` inside ``wrappers`` (the first one outermost)."""
    for wrap in reversed(wrappers):
        send = _bind(wrap, run, send)
    return send


def _bind(wrap: Any, run: Run, inner: SendRequest) -> SendRequest:
    async def send(request: ModelRequest) -> AssistantMessage:
        response: AssistantMessage = await wrap(run, request, inner)
        return response

    return send


# ---------------------------------------------------------------------- after the loop


async def settle(run: Run, value: Any, failure: BaseException | None) -> None:
    """After the loop: capabilities' ``after_run``, save, then the last events (``Done`` last).

    Outside the run's cancel scope: only the agent process stopping cancels it.
    """
    ctx = run.context
    hooks = run.hooks
    for after in hooks.after_run:
        await after(run, failure)
    for changed in hooks.history_changed:
        await changed(ctx)
    ctx.last_result = RunResult(
        run.id, "completed" if failure is None else _status_of(failure), value if failure is None else None, failure
    )
    if not run.listened():
        return
    emit = run.emit
    if failure is not None:
        await emit(Error(type(failure).__name__, ctx.scrub(describe(failure))))
        await emit(Done(_status_of(failure)))
        return
    output = run.request.output
    text = json.dumps(output.dump(value), ensure_ascii=False, default=str) if output is not None else value
    await emit(AgentEnd(text, run.usage, run.turn))
    await emit(Done("completed"))


def settle_waits(run: Run) -> bool:
    """Whether :func:`settle` awaits anything for ``run`` (hooks to run, listeners to tell)."""
    hooks = run.hooks
    return bool(hooks.after_run or hooks.history_changed) or run.listened()


def _status_of(failure: BaseException) -> Any:
    if isinstance(failure, Aborted):
        return "aborted"
    if isinstance(failure, RunTimeout):
        return "timeout"
    return "failed"
