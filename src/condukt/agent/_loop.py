"""The turn loop: ask the model, run the tools it calls, repeat until it answers.

Everything else (persistence, compaction, redaction, structured output,
sub-agents, telemetry) plugs in through capability hooks (see
:mod:`._capability`); the lifecycle (queueing, aborts, ``Done``) lives in
:mod:`._lifecycle`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import trio

from ..events import AgentStart, MaxTurnsReached, TurnEnd, TurnStart
from ..messages import AssistantMessage, TextBlock, UserMessage
from ..providers import ModelError
from ._errors import Aborted, AgentError, RunTimeout
from ._run import NO_USAGE
from ._tool_calls import run_tool_calls

if TYPE_CHECKING:
    from ._run import Run
    from ._session import Session

__all__ = ["cancellation", "resumed_turn", "run_turns"]


async def run_turns(session: Session, run: Run) -> tuple[Any, BaseException | None]:
    """Run ``run`` to its end: ``(result, None)`` or ``(None, failure)``.

    A failure is an :class:`AgentError` (aborted, timed out, no valid
    structured result...) or a :class:`~condukt.providers.ModelError`; the
    history then holds only the turns that completed (none: not even the
    prompt). Anything else escaping is a bug and crashes the agent.
    """
    hooks = run.hooks
    messages = session.messages
    # Events are built only for someone. The run's own listeners are known
    # now (a reader that leaves only makes them fewer); node subscribers
    # come and go, so ``subscribed`` is checked each time. Plain locals, not
    # bound methods: fewer objects per run in flight.
    watched = run.sink is not None or run.on_event is not None or session._event_hook
    subscribed = session.subscribed  # the node's topics with subscribers: a live view, tested as it is
    max_turns = run.max_turns or session.config.max_turns
    prompt = session.scrub(run.prompt)
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
                        attachments = session.scrub_blocks(attachments)  # type: ignore[assignment]
                    messages.append(UserMessage((TextBlock(prompt), *attachments)))
                if watched or subscribed:
                    await run.emit(AgentStart(session.id, prompt, run.id))
                for started in hooks.run_started:
                    started(run)
                while True:
                    if run.steers:
                        _take_steers(session, run)
                    run.turn += 1
                    if watched or subscribed:
                        await run.emit(TurnStart(run.turn))
                    if in_flight is not None:  # resumed: finish the turn the checkpoint holds
                        response, in_flight = in_flight, None
                    else:
                        request = session._model_request(run)
                        if hooks.model_started or hooks.model_finished or hooks.wrap_model_request:
                            response = await session._ask_model_watched(run, request)
                        else:  # the common case, without a coroutine in between
                            response = await session.model.complete(request, run.emit)
                        usage = run.usage  # the first response's usage is the run's as it is (no sum to make)
                        run.usage = response.usage if usage is NO_USAGE else usage + response.usage
                        messages.append(response)
                    text = response.text
                    if text:
                        run.text = text
                    calls = response.tool_calls
                    called = bool(calls)
                    if called:
                        messages.extend(await run_tool_calls(session, run, calls))
                        del calls  # not kept alive through the next request
                    committed = len(messages)
                    if run.taken:
                        run.taken = ()
                    for changed in hooks.history_changed:
                        await changed(session)
                    if watched or subscribed:
                        await run.emit(TurnEnd(run.turn, response))
                    stop = False
                    for after in hooks.after_turn:  # every hook sees the turn, even after one said stop
                        stop = after(run, response) or stop
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
        if run.hosted and cancellation(exc) and session._caller_left(run):
            # Its caller was cancelled: for a run the caller's own task
            # hosts, that is the abort (see ``Lifecycle._hosted_job``).
            run.aborted = True
            _roll_back(session, run, committed)
        raise
    if run.ending:  # the process exits (a hosted run): the history stays, as a cancelled worker leaves it
        return None, None
    if run.aborted:  # also when it was too quick to reach a checkpoint after the abort
        failure = Aborted("run aborted")
    elif scope.cancelled_caught:
        failure = RunTimeout(f"run did not finish within {run.timeout:g}s")
    if failure is not None:
        _roll_back(session, run, committed)
        return None, failure
    return value, None


def cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is ``trio.Cancelled``, or a group of nothing else (from a nursery)."""
    if isinstance(exc, trio.Cancelled):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None


def resumed_turn(messages: list[Any]) -> AssistantMessage | None:
    """The turn in flight at the end of a restored history: an assistant message that called tools."""
    last = messages[-1] if messages else None
    if type(last) is AssistantMessage and last.tool_calls:
        return last
    return None


def _take_steers(session: Session, run: Run) -> None:
    """Add the waiting steers to the history before the next request.

    They join the last message when it is the user's (the prompt, or steers
    taken before): the history never holds two user messages in a row.
    """
    messages = session.messages
    blocks = tuple(TextBlock(session.scrub(text)) for text in run.steers)
    last = messages[-1]
    if type(last) is UserMessage:
        messages[-1] = UserMessage((*last.content, *blocks))
    else:
        messages.append(UserMessage(blocks))
    run.taken = [*run.taken, *run.steers]
    run.steers = ()


def _roll_back(session: Session, run: Run, committed: int) -> None:
    """Drop the turn in flight; a prompt no completed turn answered goes too.

    ``committed`` is the history's length after the last completed turn (the
    length before the prompt when none completed). So the history never
    ends with an unanswered prompt, and the next one does not follow it.
    Steers the dropped turn had taken go back to the run's steers (the
    lifecycle makes them follow-ups unless the run was aborted).
    """
    messages = session.messages
    committed = min(committed, len(messages))  # a capability may have dropped the last turn itself
    if committed > run.start and type(messages[committed - 1]) is not UserMessage:
        del messages[committed:]
    else:
        del messages[run.start :]
    run.steers = [*run.taken, *run.steers]
    run.taken = ()
