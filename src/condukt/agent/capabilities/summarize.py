"""Summarising compaction: a model's summary replaces older turns before a request would overflow.

:class:`Summarize` is the setting (``compactor=Summarize(max_tokens=...)``);
:class:`Summarizing` the capability that applies it. Before every model
request, mid-run too, the request's size is estimated (:class:`TokenEstimate`:
characters times a tokens-per-character ratio the provider's reported usage
keeps calibrated); when it would pass the limit, the older part of what the
model sees is summarised by a model in a process of its own (with a timeout;
an abort of the run cancels it) and replaced by that summary.

The history itself keeps everything, for audit: a summary joins it as a
*marker*, a text block ``[condukt:summary keep=-N]`` followed by the summary,
in the user message the request ends with (or a user message of its own
after tool results, as a steer would be). What the model sees is the latest
summary, then the messages from ``N`` before the marker on. So the summary
and where it starts are saved with the history, a resumed run uses them,
and nothing the kernel keeps positions of moves (the marker joins the end
of the history, as a steer does).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import attrs
import trio

from ...events import CompactionFallback, Summarized
from ...messages import (
    AssistantMessage,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ...otp import ChildSpec, NoProc
from ...providers import Model, ModelRequest
from .._capability import Builtin, Capability, SendRequest
from .._context import AgentContext
from .._errors import AgentError
from .._run import Run
from .compaction import Compactor, ToolResultPrune, compact_with

__all__ = [
    "ContextTooLong",
    "Summarize",
    "Summarizing",
    "TokenEstimate",
    "marker_of",
    "model_view",
]

logger = logging.getLogger("condukt.agent")

#: The first line of a summary marker in the history: ``keep`` is where the kept messages
#: start, relative to the marker's message (``-2``: the two messages before it).
_MARKER = re.compile(r"\[condukt:summary keep=([+-]?\d+)\]\n")

#: What the summariser is told (its system prompt).
SUMMARY_INSTRUCTIONS = (
    "You summarise conversations between a user and an AI agent that uses tools, so the agent can "
    "continue the task from your summary alone. Keep: the user's goals, requests and constraints "
    "(verbatim where short); decisions made; facts learned from tool results (names, paths, numbers, "
    "identifiers, errors); what was done and what remains to do. Drop small talk and repetition. "
    "Write plain prose or short bullet points; answer with the summary only."
)

#: Characters one image counts as (about 1,600 tokens at the providers' usual resolution).
_IMAGE_CHARS = 6400
#: Characters each message costs besides its content (role, separators).
_MESSAGE_CHARS = 12
#: Tokens per character before any usage has calibrated it: on the safe side of English
#: text and code (providers' tokenizers give about 1/4 to 1/3).
DEFAULT_RATIO = 0.3
#: How much of a tool result a summariser's transcript keeps.
_RESULT_CHARS = 4000


class ContextTooLong(AgentError):
    """The next request would still pass ``Summarize.max_tokens`` after summarising and the fallback.

    Raised in the run (it fails; the history keeps its completed turns): a
    message on its own larger than the limit (a huge tool result the
    fallback could not shorten), or a ``keep_last`` tail that does not fit.
    """


class SummaryFailed(Exception):  # noqa: N818 - internal: never leaves this module
    """The summariser hung, failed or answered nothing (the fallback compactor takes over)."""


def _positive(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{attribute.name} must be an int > 0, got {value!r}")


def _count(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be an int >= 0, got {value!r}")


def _fraction(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.name == "ahead":
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(f"{attribute.name} must be a number between 0 and 1, got {value!r}")


def _seconds(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
        raise ValueError(f"{attribute.name} must be a finite number of seconds > 0, got {value!r}")


def _model(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, (str, Model)):
        raise TypeError(f"{attribute.name} must be a 'provider:model' string or a Model, got {value!r}")


def _compactor(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, type) or not isinstance(value, Compactor)):
        raise TypeError(f"{attribute.name} must be a compactor instance (Sliding(), ToolResultPrune()), got {value!r}")


@attrs.frozen(kw_only=True)
class Summarize:
    """Keep every request under ``max_tokens``: a model's summary replaces the older turns.

    Give it as ``compactor=Summarize(max_tokens=...)``. Before each model
    request, mid-run too, the request's size (system prompt, tool
    definitions, messages) is estimated; when it would pass ``max_tokens``
    minus a ``margin``, everything but the last ``keep_last`` messages (fewer
    when they would take more than half the limit; a tool call is never
    separated from its result) is summarised by ``model`` (the agent's own
    when None) in a process of its own, within ``timeout`` seconds, and the
    summary takes its place in what the model sees. The history keeps it
    all (see :mod:`condukt.agent.capabilities.summarize`).

    After a run that left the conversation above ``ahead`` of the limit, a
    summary is prepared at once, while the agent is idle, by ``ahead_model``
    (``model`` when None; a cheaper one will do), so the next run does not
    wait for it. ``summary_tokens`` bounds a summary (``max_tokens // 8``
    when None); a longer one is cut to it. A summariser that fails, hangs
    or answers nothing is replaced for the rest of the run by ``fallback``
    (a non-LLM compactor, run over what the model would see); when that is
    not enough, the older messages are left out with a note instead of a
    summary. Events say what happened: :class:`~condukt.events.Summarized`,
    :class:`~condukt.events.CompactionFallback`.

    ``agent.compact()`` summarises now (returning 0: the history keeps its
    messages).
    """

    max_tokens: int = attrs.field(validator=_positive)
    model: Model | str | None = attrs.field(default=None, validator=_model)
    keep_last: int = attrs.field(default=6, validator=_count)
    ahead: float | None = attrs.field(default=0.7, validator=_fraction)
    ahead_model: Model | str | None = attrs.field(default=None, validator=_model)
    margin: float = attrs.field(default=0.1, validator=_fraction)
    timeout: float = attrs.field(default=120.0, validator=_seconds)
    summary_tokens: int | None = attrs.field(default=None)
    fallback: Compactor | None = attrs.field(factory=ToolResultPrune, validator=_compactor)
    instructions: str = SUMMARY_INSTRUCTIONS

    #: Applied by its own capability (:class:`Summarizing`), not by the after-run ``Compaction``.
    own_capability: ClassVar[bool] = True

    @summary_tokens.validator
    def _check_summary_tokens(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            _positive(self, attribute, value)
            if value >= self.max_tokens // 2:
                raise ValueError(f"summary_tokens must be below max_tokens // 2, got {value!r}")

    @property
    def limit(self) -> int:
        """The size (estimated tokens) a request is kept under: ``max_tokens`` less the margin."""
        return int(self.max_tokens * (1 - self.margin))

    @property
    def summary_budget(self) -> int:
        """The most tokens a summary may take."""
        return self.summary_tokens or max(1, self.max_tokens // 8)

    async def compact(self, messages: Sequence[Message]) -> list[Message]:
        """Unchanged ``messages``: an agent runs this compactor through its capability, which summarises.

        (Outside an agent there is no model to summarise with.) Never raises
        and has no checkpoint, so cancellation takes effect at the caller's next one.
        """
        return list(messages)


# ---------------------------------------------------------------------- sizes


def message_chars(message: Message) -> int:
    """How many characters ``message`` counts as (images and documents at a fixed or data-based rate)."""
    size = _MESSAGE_CHARS
    for block in message.content:
        kind = type(block)
        if kind is TextBlock:
            size += len(block.text)  # type: ignore[union-attr]
        elif kind is ToolCall:
            call: ToolCall = block  # type: ignore[assignment]
            # repr's length is within a few characters of the JSON's and several times
            # quicker (benchmarks/summarize.py); usage calibrates what is left.
            size += len(call.name) + len(repr(call.arguments))
        elif kind is ThinkingBlock:
            size += len(block.thinking)  # type: ignore[union-attr]
        elif kind is ImageBlock:
            size += _IMAGE_CHARS
        elif kind is DocumentBlock:
            size += len(block.data) * 3 // 4  # type: ignore[union-attr]
        else:
            size += len(str(block))
    return size


class TokenEstimate:
    """Request sizes in tokens, estimated from characters and calibrated by reported usage.

    ``tokens(chars)`` is ``chars`` times a tokens-per-character ratio, per
    model name: :data:`DEFAULT_RATIO` until a response reports its input
    tokens, then moved toward ``input_tokens / chars`` of each request sent
    (so a provider's tokenizer is followed without shipping it). No
    tokenizer library is used: ``benchmarks/summarize.py`` measures the
    estimate's bookkeeping; a tokenizer per request would cost more than a
    model request's own encoding.
    """

    __slots__ = ("_ratios",)

    def __init__(self) -> None:
        self._ratios: dict[str, float] = {}

    def ratio(self, model: str) -> float:
        """Tokens per character for ``model``."""
        return self._ratios.get(model, DEFAULT_RATIO)

    def tokens(self, model: str, chars: int) -> int:
        """Estimated tokens of ``chars`` characters sent to ``model``."""
        return math.ceil(chars * self._ratios.get(model, DEFAULT_RATIO))

    def observe(self, model: str, chars: int, input_tokens: int) -> None:
        """A request of ``chars`` characters used ``input_tokens`` (its usage): calibrate toward it.

        Keeps the larger of the new measure and a blend with the old one, so
        an estimate errs toward summarising early rather than overflowing.
        """
        if chars <= 0 or input_tokens <= 0:
            return
        measured = input_tokens / chars
        old = self._ratios.get(model)
        self._ratios[model] = measured if old is None else max(measured, (old + measured) / 2)


# ---------------------------------------------------------------------- markers and the model's view


def marker_of(message: Message) -> tuple[int, int, str] | None:
    """For a user message holding a summary marker: ``(block index, keep offset, summary)``; else None."""
    if type(message) is not UserMessage:
        return None
    content = message.content
    for index in range(len(content) - 1, -1, -1):  # the latest, when one message holds several
        block = content[index]
        if type(block) is TextBlock and block.text.startswith("[condukt:summary "):
            match = _MARKER.match(block.text)
            if match is not None:
                return index, int(match.group(1)), block.text[match.end() :]
    return None


def marker_block(keep: int, summary: str) -> TextBlock:
    """The history's record of a summary: the messages kept start ``keep`` messages from the marker's."""
    return TextBlock(f"[condukt:summary keep={keep:+d}]\n{summary}")


def _summary_message(summary: str) -> UserMessage:
    return UserMessage((TextBlock(f"Summary of the conversation so far:\n{summary}"),))


def model_view(messages: Sequence[Message], position: int | None = None) -> list[Message]:
    """What the model sees of ``messages``: the latest summary, then what follows its boundary.

    ``position`` is the index of the latest marker's message when the
    caller knows it (else it is searched for). Without a marker it is the
    history as it is. The result starts with a user message and never
    begins with a tool result (a damaged boundary moves forward).
    """
    if position is None:
        position = latest_marker(messages)
        if position is None:
            return list(messages)
    message = messages[position]
    found = marker_of(message)
    if found is None:
        return list(messages)
    index, keep, summary = found
    start = max(0, min(position + keep, len(messages)))
    out: list[Message] = [_summary_message(summary)]
    tail: list[Message] = []
    if start <= position:
        tail.extend(messages[start:position])
        rest = tuple(b for b in message.content if not (type(b) is TextBlock and _MARKER.match(b.text)))
        if rest:
            tail.append(UserMessage(rest))  # type: ignore[arg-type]
        tail.extend(messages[position + 1 :])
    else:
        tail.extend(messages[start:])
    while tail and type(tail[0]) is ToolResultMessage:
        tail.pop(0)
    if tail and type(tail[0]) is UserMessage:
        out[0] = UserMessage((*out[0].content, *tail.pop(0).content))
    out.extend(tail)
    return out


def latest_marker(messages: Sequence[Message], since: int = 0) -> int | None:
    """Index of the last user message from ``since`` on that holds a summary marker, or None."""
    for position in range(len(messages) - 1, since - 1, -1):
        if type(messages[position]) is UserMessage and marker_of(messages[position]) is not None:
            return position
    return None


def _boundary(view: Sequence[Message], keep_last: int, budget: int, size: Callable[[Message], int]) -> int:
    """Where the kept part of ``view`` starts: at most ``keep_last`` messages within ``budget`` characters.

    Never at a tool result (its call would be summarised without it) and
    never at 0 (something must be summarised; ``len(view)`` keeps nothing).
    """
    cut = len(view)
    used = 0
    while cut > 1 and len(view) - cut < keep_last:
        grown = used + size(view[cut - 1])
        if grown > budget:
            break
        used = grown
        cut -= 1
    while cut < len(view) and type(view[cut]) is ToolResultMessage:
        cut += 1
    return max(cut, 1)


def transcript(messages: Sequence[Message]) -> str:
    """``messages`` as text for a summariser (tool results cut to a few thousand characters)."""
    lines = []
    for message in messages:
        if type(message) is ToolResultMessage:
            text = message.text
            if len(text) > _RESULT_CHARS:
                text = f"{text[:_RESULT_CHARS]}... [{len(text) - _RESULT_CHARS} more characters]"
            lines.append(f"[result of {message.name}{' (error)' if message.is_error else ''}]: {text}")
            continue
        role = "user" if type(message) is UserMessage else "assistant"
        for block in message.content:
            kind = type(block)
            if kind is TextBlock:
                lines.append(f"{role}: {block.text}")  # type: ignore[union-attr]
            elif kind is ToolCall:
                call: ToolCall = block  # type: ignore[assignment]
                arguments = json.dumps(call.arguments, ensure_ascii=False, default=str)
                lines.append(f"[{role} called {call.name}({arguments[:_RESULT_CHARS]})]")
            elif kind is ImageBlock:
                lines.append(f"[{role} sent an image]")
            elif kind is DocumentBlock:
                lines.append(f"[{role} sent a document: {block.title or block.media_type}]")  # type: ignore[union-attr]
    return "\n".join(lines)


# ---------------------------------------------------------------------- the capability


@attrs.define
class _Prepared:
    """A summary made ahead: of ``covered`` messages, up to ``first_kept``, after the marker's message ``marker``."""

    summary: str
    first_kept: Message
    marker: Message | None
    covered: int
    truncated: bool


class Summarizing(Builtin):
    """Applies :class:`Summarize`: checks each request's size, summarises, falls back.

    Built in when the agent's ``compactor`` is a :class:`Summarize`.
    """

    def __init__(self, settings: Summarize) -> None:
        self.settings = settings
        self.estimate = TokenEstimate()
        # What the last check counted, so the next one counts only what was added:
        # the history's length then, its last message, the marker's position,
        # the characters of the view from the marker's boundary on.
        self._seen = 0
        self._last: Message | None = None
        self._marker: int | None = None
        self._view_chars = 0
        self._fixed_key: tuple[Any, Any] | None = None
        self._fixed_chars = 0
        self._ahead_done: trio.Event | None = None
        self._prepared: _Prepared | None = None
        #: The fallback compactor over the view, for the rest of a run whose summariser failed.
        self._fallback_view: Callable[[list[Message]], Awaitable[list[Message]]] | None = None
        self._summarisers: set[Any] = set()

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """One for an agent whose ``compactor`` is a :class:`Summarize`."""
        compactor = ctx.config.compactor
        return cls(compactor) if isinstance(compactor, Summarize) else None

    # ------------------------------------------------------------------ sizes

    def _fixed(self, request: ModelRequest) -> int:
        key = (request.system_prompt, request.tools)
        if self._fixed_key is None or self._fixed_key[0] is not key[0] or self._fixed_key[1] is not key[1]:
            chars = len(request.system_prompt or "")
            for tool in request.tools:
                chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters, default=str))
            self._fixed_key, self._fixed_chars = key, chars
        return self._fixed_chars

    def _view_size(self, messages: list[Message]) -> int:
        """Characters of what the model sees of ``messages`` (counting only what was added since the last call)."""
        seen = self._seen
        count = len(messages)
        if seen and seen <= count and messages[seen - 1] is self._last:
            if seen == count:
                return self._view_chars
            total = self._view_chars
            for index in range(seen, count):
                message = messages[index]
                if type(message) is UserMessage and marker_of(message) is not None:
                    self._marker = index
                    return self._recount(messages)
                total += message_chars(message)
            self._view_chars = total
            self._seen = count
            self._last = messages[-1]
            return total
        self._marker = latest_marker(messages)
        return self._recount(messages)

    def _recount(self, messages: list[Message]) -> int:
        view = messages if self._marker is None else model_view(messages, self._marker)
        self._view_chars = sum(message_chars(m) for m in view)
        self._seen = len(messages)
        self._last = messages[-1] if messages else None
        return self._view_chars

    # ------------------------------------------------------------------ before each request

    def _view(self, messages: list[Message]) -> list[Message]:
        return model_view(messages, self._marker) if self._marker is not None else list(messages)

    async def _seen_view(self, messages: list[Message], fixed: int) -> tuple[list[Message] | None, int]:
        """What the model would see now (None: the history as it is) and its size in characters."""
        chars = fixed + self._view_size(messages)
        compacted = self._fallback_view
        if compacted is None:
            return (self._view(messages) if self._marker is not None else None), chars
        view = await compacted(self._view(messages))
        return view, fixed + sum(message_chars(m) for m in view)

    async def wrap_model_request(self, run: Run, request: ModelRequest, send: SendRequest) -> AssistantMessage:
        """Summarise first when the request would pass the limit; send what the model should see.

        Runs in the run: an abort or the run's timeout cancels a summary in
        progress (its process is stopped) and the history stays as it was.
        Raises :class:`ContextTooLong` when even the summary and the
        fallback leave the request above ``max_tokens``.
        """
        ctx = run.context
        model = ctx.model.name
        messages = ctx.messages
        estimate = self.estimate
        settings = self.settings
        fixed = self._fixed(request)
        chars = fixed + self._view_size(messages)
        if self._marker is None and self._fallback_view is None and self._prepared is None and self._ahead_done is None:
            # The common case, the limit far: one incremental count, the request as it is.
            if estimate.tokens(model, chars) <= settings.limit:
                response = await send(request)
                usage = response.usage
                estimate.observe(model, chars, usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens)
                return response
        done = self._ahead_done
        ahead = settings.ahead
        if done is not None and ahead is not None and estimate.tokens(model, chars) > settings.limit * ahead:
            await done.wait()  # prepared since the last run ended: usually ready by the time the user is back
        if self._prepared is not None:
            await self._use_prepared(run, messages, fixed)
        view, chars = await self._seen_view(messages, fixed)
        if estimate.tokens(model, chars) > settings.limit:
            await self._summarise_for(run, messages, fixed, estimate.tokens(model, chars))
            view, chars = await self._seen_view(messages, fixed)
            if estimate.tokens(model, chars) > settings.max_tokens:
                raise ContextTooLong(
                    f"the request would take about {estimate.tokens(model, chars)} tokens, more than "
                    f"Summarize.max_tokens={settings.max_tokens}, even after summarising"
                )
        if view is not None:
            request = attrs.evolve(request, messages=tuple(view))
        response = await send(request)
        usage = response.usage
        estimate.observe(model, chars, usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens)
        return response

    def run_started(self, run: Run) -> None:
        """A new run tries the summariser again (a failure switches only its own run to the fallback)."""
        self._fallback_view = None

    async def _summarise_for(self, run: Run, messages: list[Message], fixed: int, before: int) -> None:
        """Summarise what the model sees now (or fall back); the marker joins the history."""
        ctx = run.context
        settings = self.settings
        model = ctx.model.name
        done = self._ahead_done
        if done is not None:
            await done.wait()  # a summary being prepared ahead: finish it rather than start another
            if self._prepared is not None:
                await self._use_prepared(run, messages, fixed)
                _, chars = await self._seen_view(messages, fixed)
                if self.estimate.tokens(model, chars) <= settings.limit:
                    return
        view = self._view(messages)
        if len(view) <= 1:
            return  # only the prompt: nothing to summarise (the caller says it is too long)
        budget = int((settings.limit / 2) / self.estimate.ratio(model))
        cut = _boundary(view, settings.keep_last, budget, message_chars)
        kept, covered = view[cut:], view[:cut]
        if self._fallback_view is None:
            try:
                summary, truncated = await self._summary(ctx, covered, settings.model)
            except SummaryFailed as exc:
                await self._fall_back(run, messages, kept, covered, before, fixed, str(exc))
                return
            self._add_marker(messages, kept, summary)
            _, chars = await self._seen_view(messages, fixed)
            after = self.estimate.tokens(model, chars)
            await _tell(run, Summarized(len(covered), len(kept), before, after, False, truncated))
            return
        # On the fallback since a failure earlier in this run, and it is not enough on its own.
        await self._fall_back(run, messages, kept, covered, before, fixed, "the fallback alone was not enough")

    async def _fall_back(
        self,
        run: Run,
        messages: list[Message],
        kept: Sequence[Message],
        covered: Sequence[Message],
        before: int,
        fixed: int,
        reason: str,
    ) -> None:
        """The summariser failed: the fallback compactor for the rest of the run, else a note instead of a summary."""
        settings = self.settings
        model = run.context.model.name
        fallback = settings.fallback
        name = type(fallback).__name__ if fallback is not None else "none"
        if fallback is not None and self._fallback_view is None:
            handle = run.context.handle

            async def compacted(view: list[Message]) -> list[Message]:
                try:
                    compacted = await compact_with(fallback, view)
                except ValueError as exc:  # a compactor that breaks the rules: the view as it is
                    logger.error("%r: fallback compactor failed", handle, exc_info=exc)
                    return view
                # Nothing left (Sliding finds no user message to cut at in a one-prompt tool run):
                # no request can be made of that, so the view stays and the older part is dropped.
                return compacted if compacted or not view else view

            self._fallback_view = compacted
            _, chars = await self._seen_view(messages, fixed)
            after = self.estimate.tokens(model, chars)
            if after <= settings.limit:
                await _tell(run, CompactionFallback(name, reason, False, before, after))
                return
        note = f"[{len(covered)} earlier messages were left out: they could not be summarised ({reason})]"
        self._add_marker(messages, kept, note)
        _, chars = await self._seen_view(messages, fixed)
        after = self.estimate.tokens(model, chars)
        await _tell(run, CompactionFallback(name, reason, True, before, after))

    def _add_marker(self, messages: list[Message], kept: Sequence[Message], summary: str) -> None:
        """Record ``summary`` at the end of the history: the model sees it, then ``kept`` and what follows."""
        end = len(messages)
        start = end
        if kept:
            start = _index_of(messages, kept[0], -1)
            if start < 0:  # the rest of the current marker's message, as the view made it anew
                start = self._marker if self._marker is not None else end
        last = messages[-1] if messages else None
        if type(last) is UserMessage:
            position = end - 1  # the prompt or a steer: its own content stays in view
            messages[-1] = UserMessage((*last.content, marker_block(min(start, position) - position, summary)))
        else:
            position = end
            messages.append(UserMessage((marker_block(start - position, summary),)))
        self._marker = position
        self._recount(messages)

    # ------------------------------------------------------------------ the summariser

    async def _summary(
        self, ctx: AgentContext, covered: Sequence[Message], model: Model | str | None
    ) -> tuple[str, bool]:
        """A summary of ``covered`` (which may start with an earlier summary), made in a process of its own.

        Raises :class:`SummaryFailed` when the summariser fails, takes more
        than ``timeout`` or answers nothing. Cancellation stops the
        summariser's process and propagates.
        """
        settings = self.settings
        ratio = self.estimate.ratio(ctx.model.name)
        budget_chars = int(settings.summary_budget / ratio)
        chunk_chars = max(1000, int((settings.limit - settings.summary_budget) / ratio) - len(settings.instructions))
        text = transcript(covered)
        chunks = [text[i : i + chunk_chars] for i in range(0, max(len(text), 1), chunk_chars)]
        options: dict[str, Any] = {
            "model": model if model is not None else ctx.model,
            "system_prompt": settings.instructions,
            "load_project_instructions": False,
            "max_tokens": settings.summary_budget,
        }
        summary = ""
        handle: Any = None
        try:
            with trio.move_on_after(settings.timeout) as scope:
                handle = await ctx.node.root.start_child(
                    ChildSpec(None, ctx.plain_agent, kwargs=options, restart="temporary")
                )
                self._summarisers.add(handle)
                for chunk in chunks:
                    prompt = (
                        f"The summary so far:\n{summary}\n\nThe conversation continues:\n{chunk}"
                        if summary
                        else f"Summarise this conversation:\n{chunk}"
                    )
                    await handle.clear()
                    summary = (await handle.run(prompt)).strip()
                    if not summary:
                        raise SummaryFailed("the summariser answered nothing")
        except SummaryFailed:
            raise
        except Exception as exc:  # the summariser's run failed (model error, its process crashed...)
            raise SummaryFailed(f"the summariser failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if handle is not None:
                self._summarisers.discard(handle)
                await _stop(handle)
        if scope.cancelled_caught:
            raise SummaryFailed(f"the summariser did not answer within {settings.timeout:g}s")
        truncated = len(summary) > budget_chars
        if truncated:
            cut = summary.rfind(" ", 0, budget_chars)
            summary = summary[: cut if cut > budget_chars // 2 else budget_chars] + " [summary cut to its budget]"
        return summary, truncated

    # ------------------------------------------------------------------ ahead of time, between runs

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """When the conversation is above ``ahead`` of the limit, start preparing a summary (never waits for it).

        The summary is made in the agent's background, in a process of its
        own on ``ahead_model``, and used by the next request. Only the agent
        stopping cancels it.
        """
        settings = self.settings
        if settings.ahead is None or self._ahead_done is not None or self._prepared is not None:
            return
        ctx = run.context
        model = ctx.model.name
        chars = self._fixed_chars + self._view_size(ctx.messages)
        if self.estimate.tokens(model, chars) <= settings.limit * settings.ahead:
            return
        view = self._view(ctx.messages)
        budget = int((settings.limit / 2) / self.estimate.ratio(model))
        cut = _boundary(view, settings.keep_last, budget, message_chars)
        if cut >= len(view):
            return  # nothing would stay verbatim: the next request decides, its prompt in view
        marker = self._marker
        done = self._ahead_done = trio.Event()
        ctx.agent.start_soon(
            self._prepare, ctx, view, cut, None if marker is None else ctx.messages[marker], done
        )

    async def _prepare(
        self, ctx: AgentContext, view: list[Message], cut: int, marker: Message | None, done: trio.Event
    ) -> None:
        settings = self.settings
        try:
            summary, truncated = await self._summary(ctx, view[:cut], settings.ahead_model or settings.model)
        except SummaryFailed as exc:
            # Not a warning: the next request that needs a summary tries again and says so in an event.
            logger.info("%r: a summary prepared ahead failed (%s)", ctx.handle, exc)
        else:
            self._prepared = _Prepared(summary, view[cut], marker, cut, truncated)
        finally:
            self._ahead_done = None
            done.set()

    async def _use_prepared(self, run: Run, messages: list[Message], fixed: int) -> None:
        """Use the summary prepared ahead if the history still holds what it covers (and say so)."""
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return
        marker = messages[self._marker] if self._marker is not None else None
        start = _index_of(messages, prepared.first_kept, -1)
        if marker is not prepared.marker or start < 0:
            return  # the history changed since (cleared, summarised again): not for it any more
        model = run.context.model.name
        _, chars = await self._seen_view(messages, fixed)
        before = self.estimate.tokens(model, chars)
        self._add_marker(messages, messages[start:], prepared.summary)
        _, chars = await self._seen_view(messages, fixed)
        after = self.estimate.tokens(model, chars)
        await _tell(run, Summarized(prepared.covered, len(messages) - start, before, after, True, prepared.truncated))

    # ------------------------------------------------------------------ agent.compact(), stop

    async def compact(self, ctx: AgentContext) -> None:
        """``agent.compact()``: summarise now, keeping ``keep_last`` messages; a failure raises to the caller.

        The marker joins the last user message (the next prompt must not
        follow a user message). Only the agent process stopping cancels it
        (its summariser is stopped; the history stays as it was).
        """
        messages = ctx.messages
        self._view_size(messages)
        view = self._view(messages)
        budget = int((self.settings.limit / 2) / self.estimate.ratio(ctx.model.name))
        cut = _boundary(view, self.settings.keep_last, budget, message_chars)
        if len(view) < 2 or cut >= len(view):
            return
        summary, _ = await self._summary(ctx, view[:cut], self.settings.model)
        first = _index_of(messages, view[cut], -1)
        last_user = next((i for i in range(len(messages) - 1, -1, -1) if type(messages[i]) is UserMessage), None)
        if first < 0 or last_user is None:
            return
        message = messages[last_user]
        messages[last_user] = UserMessage((*message.content, marker_block(first - last_user, summary)))
        self._marker = last_user
        self._recount(messages)

    async def stop(self, ctx: AgentContext, reason: Any) -> None:
        """Stop summarisers still working, in the shutdown budget (each stop shielded from cancellation, bounded)."""
        for handle in list(self._summarisers):
            await _stop(handle)


async def _stop(handle: Any) -> None:
    """Stop a summariser's process (shielded, bounded: it runs in a ``finally`` of a cancelled wait too)."""
    with trio.CancelScope(shield=True), trio.move_on_after(5.0):
        if handle.alive:
            try:
                await handle.stop("shutdown", timeout=1.0)
            except NoProc:
                pass  # it exited meanwhile (the node is closing)


async def _tell(run: Run, event: Any) -> None:
    if event is not None and run.listened():
        await run.emit(event)


def _index_of(messages: Sequence[Message], target: Message, default: int) -> int:
    """Index of ``target`` (by identity) in ``messages``, searched from the end; ``default`` if absent."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is target:
            return index
    return default
