"""The Anthropic Messages API (``POST /v1/messages``): ``"anthropic:<model>"``.

Requests carry ``x-api-key`` and ``anthropic-version``; the key comes from
``api_key=`` or ``ANTHROPIC_API_KEY``, the base URL from ``base_url=``,
``ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com``. Tool results go
back as ``tool_result`` blocks (images and documents included) in one
user message per turn; documents are ``document`` blocks (a PDF as a
``base64`` source, a ``text/*`` document as a ``text`` source, the title as
``title``); a ``thinking_level`` other than ``off`` turns extended thinking on
with the budget in :data:`THINKING_BUDGETS`, and thinking blocks (with their
signatures) are sent back as the API requires during tool use.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from ..events import Event, TextDelta, ThinkingDelta, ToolCallDelta
from ..messages import (
    AssistantMessage,
    Citation,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    ProviderBlock,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._documents import PDF, note, problem, text_of
from ._errors import StreamError
from ._http.keys import resolve_api_key
from ._http.model import HttpModel, StreamAssembler
from ._http.node import DEFAULT_BASE_URLS
from ._http.sse import ServerSentEvent
from ._model import Emit, ModelRequest
from ._registry import register_provider
from ._wire import (
    WireCache,
    WireError,
    check_depth,
    count,
    dumps,
    field,
    loads,
    obj,
    opt_obj,
    opt_text,
    text,
    tool_arguments,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "CACHE_PLACES",
    "DEFAULT_MAX_TOKENS",
    "MAX_CACHE_BREAKPOINTS",
    "MAX_OUTPUT_TOKENS",
    "MAX_PAUSE_RESUMES",
    "THINKING_BUDGETS",
    "AnthropicModel",
    "anthropic_model",
    "cache_places",
    "output_limit_for",
]

#: The ``anthropic-version`` header sent with every request.
ANTHROPIC_VERSION = "2023-06-01"
#: Output tokens per response when neither the agent nor the model options set ``max_tokens``
#: (extended thinking adds its budget on top).
DEFAULT_MAX_TOKENS = 8192
#: ``thinking.budget_tokens`` for each ``thinking_level`` (``off``: thinking disabled).
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 10240, "high": 32768}
#: The smallest budget the API accepts.
MIN_THINKING_BUDGET = 1024
#: The most output tokens each model family accepts (``max_tokens`` above it is a 400),
#: by model-name prefix, longest prefix first; from the models overview of the API reference.
MAX_OUTPUT_TOKENS: dict[str, int] = {
    "claude-opus-4-5": 64000,
    "claude-opus-4-1": 32000,
    "claude-opus-4": 32000,
    "claude-sonnet-4": 64000,
    "claude-haiku-4": 64000,
    "claude-3-7-sonnet": 64000,
    "claude-3-5-sonnet": 8192,
    "claude-3-5-haiku": 8192,
    "claude-3-opus": 4096,
    "claude-3-haiku": 4096,
}
#: How many times a ``pause_turn`` response is sent back to let the model go on, by default.
MAX_PAUSE_RESUMES = 8
#: Block types the agent represents itself; any other block the API sends is a :class:`ProviderBlock`.
_KNOWN_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


def output_limit_for(model: str) -> int | None:
    """The most output tokens ``model`` accepts per :data:`MAX_OUTPUT_TOKENS`, ``None`` if unknown."""
    for prefix in sorted(MAX_OUTPUT_TOKENS, key=len, reverse=True):
        if model.startswith(prefix):
            return MAX_OUTPUT_TOKENS[prefix]
    return None

DEFAULT_BASE_URLS["anthropic"] = "https://api.anthropic.com"

_Encoded = tuple[str, bytes]  # (role, comma-joined content blocks)


def _citation(item: Any, where: str) -> Citation:
    data = obj(item, where)
    return Citation(
        text(data, "type", where) or "citation",
        opt_text(data, "cited_text", where),
        opt_text(data, "url", where),
        opt_text(data, "title", where) or opt_text(data, "document_title", where),
    )


def _citations(data: dict[str, Any], where: str) -> tuple[Citation, ...]:
    items = data.get("citations")
    if items is None:
        return ()
    if type(items) is not list:
        raise WireError(f"{where}.citations: expected an array")
    return tuple(_citation(item, f"{where}.citations[{i}]") for i, item in enumerate(items))


def _provider_block(data: dict[str, Any], kind: str) -> ProviderBlock:
    return ProviderBlock("anthropic", kind, dumps(data).decode())


def _text(block: TextBlock) -> dict[str, Any]:
    return {"type": "text", "text": block.text}


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.media_type, "data": block.data}}


#: The longest document ``title`` the API takes; a longer one is cut (it only names the document).
_MAX_TITLE = 500


def _document(block: DocumentBlock) -> dict[str, Any]:
    """A ``document`` block: a PDF as a base64 source, a text document as a plain-text source.

    One the API cannot take (only in the history: a new prompt's raised
    :class:`~condukt.providers.UnsupportedContent`) becomes a text note.
    """
    reason = problem(block, needs_text=True)
    if reason is not None:
        return {"type": "text", "text": note(reason)}
    source: dict[str, Any]
    if block.media_type == PDF:
        source = {"type": "base64", "media_type": PDF, "data": block.data}
    else:  # the API's text source is text/plain only; any text/* document is plain text to it
        source = {"type": "text", "media_type": "text/plain", "data": text_of(block)}
    document: dict[str, Any] = {"type": "document", "source": source}
    if block.title:
        document["title"] = block.title[:_MAX_TITLE]
    return document


def _user_content(blocks: Any) -> list[dict[str, Any]]:
    out = []
    for block in blocks:
        if type(block) is TextBlock:
            if block.text:  # the API rejects empty text blocks
                out.append(_text(block))
        elif type(block) is ImageBlock:
            out.append(_image(block))
        elif type(block) is DocumentBlock:
            out.append(_document(block))
    return out


def _encode_message(message: Any) -> _Encoded:
    kind = type(message)
    if kind is ToolResultMessage:
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        content = _user_content(message.content)
        if content:
            result["content"] = content
        if message.is_error:
            result["is_error"] = True
        return "user", dumps(result)
    if kind is UserMessage:
        return "user", dumps(_user_content(message.content))[1:-1]
    return "assistant", dumps(_answer_blocks(message))[1:-1]


def _answer_blocks(message: Any) -> list[dict[str, Any]]:
    """An assistant message's content blocks as the API takes them back."""
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        block_kind = type(block)
        if block_kind is TextBlock:
            if block.text:
                blocks.append(_text(block))
        elif block_kind is ToolCall:
            arguments = block.arguments if isinstance(block.arguments, dict) else {}
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": arguments})
        elif block_kind is ThinkingBlock:
            # Only Anthropic's own (signed or encrypted) thinking can be sent back.
            if block.provider is not None:
                continue
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.redacted})
            elif block.signature:
                blocks.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif block_kind is ImageBlock:
            blocks.append(_image(block))
        elif block_kind is ProviderBlock and block.provider == "anthropic":
            blocks.append(loads(block.data))  # a server tool's call or result, as it came
    return blocks


def _markable(message: Any, fragment: bytes) -> bool:
    """Whether the last block of ``message`` (encoded as ``fragment``) may carry ``cache_control``:
    it has one, and it is not a thinking block (the API refuses those)."""
    if not fragment:
        return False
    if type(message) is not AssistantMessage:
        return True
    return _answer_blocks(message)[-1].get("type") not in ("thinking", "redacted_thinking")


def _usage(data: dict[str, Any], where: str, usage: Usage | None = None) -> Usage:
    """``usage`` (a message's, or a ``message_delta``'s cumulative one) over ``base``: missing counts are kept."""
    base = usage or Usage()
    return Usage(
        count(data, "input_tokens", where, base.input_tokens),
        count(data, "output_tokens", where, base.output_tokens),
        count(data, "cache_read_input_tokens", where, base.cache_read_tokens),
        count(data, "cache_creation_input_tokens", where, base.cache_write_tokens),
    )


#: ``stop_reason`` values the Messages API documents, as :class:`StopReason`.
STOP_REASONS: dict[str, StopReason] = {reason.value: reason for reason in StopReason if reason is not StopReason.OTHER}
STOP_REASONS["model_context_window_exceeded"] = StopReason.MAX_TOKENS
del STOP_REASONS["content_filter"]  # OpenAI's


def _stop_reason(data: dict[str, Any], where: str, default: StopReason) -> StopReason:
    reason = text(data, "stop_reason", where)
    return STOP_REASONS.get(reason, StopReason.OTHER) if reason else default


def _tool_input(value: Any, where: str) -> Any:
    """A ``tool_use`` block's ``input``: any JSON (the agent reports a non-object to the model), not too deep."""
    return {} if value is None else check_depth(value, where)


def _content_block(item: Any, where: str) -> ContentBlock | None:
    block = obj(item, where)
    kind = text(block, "type", where)
    if kind == "text":
        return TextBlock(text(block, "text", where), _citations(block, where))
    if kind == "thinking":
        return ThinkingBlock(text(block, "thinking", where), opt_text(block, "signature", where))
    if kind == "redacted_thinking":
        data = opt_text(block, "data", where)
        return ThinkingBlock("", None, data) if data else None
    if kind == "tool_use":
        return ToolCall(
            _required_text(block, "id", where),
            _required_text(block, "name", where),
            _tool_input(block.get("input"), f"{where}.input"),
        )
    if kind:  # server tools' calls and results: kept, to be sent back
        return _provider_block(check_depth(block, where), kind)
    return None


def _required_text(data: dict[str, Any], key: str, where: str) -> str:
    value = text(data, key, where)
    if not value:
        raise WireError(f"{where}.{key}: missing")
    return value


class AnthropicModel(HttpModel):
    """A Claude model over the Messages API. Options: see :class:`~condukt.providers.HttpModel`.

    Its own: ``prompt_cache`` (``True``, ``False`` or a collection of places for the
    ``cache_control`` breakpoints: :func:`cache_places`), ``server_tools``,
    ``output_limit`` and ``max_pause_resumes``.
    """

    path = "/v1/messages"
    protocol = "the Anthropic Messages API"

    def __init__(
        self,
        model: str,
        *,
        prompt_cache: bool | Collection[str | int] = True,
        server_tools: Sequence[Mapping[str, Any]] = (),
        output_limit: int | None = None,
        max_pause_resumes: int = MAX_PAUSE_RESUMES,
        **options: Any,
    ) -> None:
        options.setdefault("provider", "anthropic")
        places = cache_places(prompt_cache)
        if isinstance(server_tools, Mapping) or not all(isinstance(tool, Mapping) for tool in server_tools):
            raise TypeError("server_tools must be a list of tool definitions (dicts)")
        if output_limit is not None and (type(output_limit) is not int or output_limit < 1):
            raise ValueError(f"output_limit must be a positive int, got {output_limit!r}")
        if type(max_pause_resumes) is not int or max_pause_resumes < 0:
            raise ValueError(f"max_pause_resumes must be a non-negative int, got {max_pause_resumes!r}")
        super().__init__(model, **options)
        #: Where requests place ``cache_control`` breakpoints (see :func:`cache_places`);
        #: empty when caching is off.
        self.prompt_cache: frozenset[str | int] = places
        self._cache_system = "system" in places
        self._cache_tools = "tools" in places
        # Message positions to mark, "messages" as -1; () when none.
        positions = tuple(sorted(place if isinstance(place, int) else -1 for place in places - {"system", "tools"}))
        self._cache_messages: tuple[int, ...] = _LAST if positions == _LAST else positions
        #: Anthropic's own tools (web search, code execution...), sent after the agent's tools.
        self.server_tools = [dict(tool) for tool in server_tools]
        #: The most output tokens a request asks for: ``output_limit``, else the model family's.
        self.output_limit = output_limit or output_limit_for(model)
        #: How often a ``pause_turn`` answer is sent back to let the model finish its turn.
        self.max_pause_resumes = max_pause_resumes
        self._messages: WireCache[_Encoded] = WireCache(_encode_message)

    def document_problem(self, block: DocumentBlock) -> str | None:
        """PDF and UTF-8 ``text/*`` documents only (``document`` blocks with a base64 or a plain-text source)."""
        return problem(block, needs_text=True)

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``x-api-key`` and ``anthropic-version``."""
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def _token_settings(self, request: ModelRequest) -> tuple[int, int | None]:
        """``(max_tokens, thinking budget or None)`` for ``request``, within the model's output limit."""
        max_tokens = request.max_tokens or self.max_tokens
        budget = THINKING_BUDGETS.get(request.thinking_level)
        limit = self.output_limit
        if budget is None:
            max_tokens = max_tokens or DEFAULT_MAX_TOKENS
            return (min(max_tokens, limit) if limit else max_tokens), None
        if max_tokens is None:
            max_tokens = budget + DEFAULT_MAX_TOKENS
        if limit and max_tokens > limit:
            # Clamped to what the model allows: the budget leaves room for the answer.
            max_tokens = limit
            budget = min(budget, max_tokens - min(DEFAULT_MAX_TOKENS, max_tokens // 2))
        if max_tokens > budget:
            return max_tokens, budget
        if max_tokens > MIN_THINKING_BUDGET:
            return max_tokens, max_tokens - 1  # the budget must stay below max_tokens
        return max_tokens, None  # too small a cap to think at all

    def encode_head(self, request: ModelRequest) -> bytes:
        """Model, output cap, stream flag, system prompt, tools, thinking budget and settings."""
        head = self.head_fields(request)
        head.update(self.extra_body)
        return dumps(head)[:-1] + b',"messages":['  # the messages close the object

    def head_fields(self, request: ModelRequest) -> dict[str, Any]:
        """The body's fields before ``messages`` (without ``extra_body``), for :meth:`encode_head`."""
        max_tokens, budget = self._token_settings(request)
        head: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens}
        if self.stream:
            head["stream"] = True
        if request.system_prompt:
            if self._cache_system:
                head["system"] = [{"type": "text", "text": request.system_prompt, "cache_control": _EPHEMERAL}]
            else:
                head["system"] = request.system_prompt
        if request.tools or self.server_tools:
            tools: list[dict[str, Any]] = [
                {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
                for tool in request.tools
            ]
            tools.extend(self.server_tools)
            if self._cache_tools:
                tools[-1] = {**tools[-1], "cache_control": _EPHEMERAL}
            head["tools"] = tools
        if budget is not None:
            head["thinking"] = {"type": "enabled", "budget_tokens": budget}
        settings = request.settings
        if settings is not None:
            if settings.temperature is not None:
                head["temperature"] = settings.temperature
            if settings.top_p is not None:
                head["top_p"] = settings.top_p
            if settings.stop is not None:
                head["stop_sequences"] = list(settings.stop)
        return head

    def setting_problem(self, name: str, request: ModelRequest) -> str | None:
        """No ``seed``; with extended thinking, ``temperature`` 1 only and ``top_p`` from 0.95 (the API's rules)."""
        if name == "seed":
            return "the API has no seed setting"
        if request.thinking_level != "off" and self._token_settings(request)[1] is not None:
            settings = request.settings
            assert settings is not None
            if name == "temperature" and settings.temperature != 1:
                return "extended thinking (thinking_level other than off) takes no temperature but 1"
            if name == "top_p" and settings.top_p is not None and settings.top_p < 0.95:
                return "extended thinking (thinking_level other than off) takes top_p from 0.95 to 1 only"
        return None

    def encode_request(self, request: ModelRequest) -> bytes:
        """The Messages API body: consecutive user-side messages (tool results, steers) merged into one.

        With ``prompt_cache=True`` (the default), three ``cache_control``
        breakpoints are set: the system prompt, the last tool, and the last
        block of the conversation, so each turn reads the previous turn's
        prefix from the provider's cache (billed as cache reads, reported in
        ``Usage.cache_read_tokens``). Prompts shorter than the model's
        minimum cacheable length are simply not cached. Other places: see
        :func:`cache_places`.
        """
        messages = request.messages
        encoded = self._messages.encode_all(messages)
        positions = self._cache_messages
        if positions is _LAST:  # the default: the conversation's end (the last block that can hold it)
            index = len(encoded) - 1
            while index >= 0 and not _markable(messages[index], encoded[index][1]):
                index -= 1
            if index >= 0:
                last_role, last = encoded[index]
                encoded[index] = (last_role, last[:-1] + _CACHE_CONTROL)
        elif positions:
            _mark(messages, encoded, positions)
        parts: list[bytes] = []
        role: str | None = None
        blocks: list[bytes] = []
        for message_role, fragment in encoded:
            if not fragment:
                continue
            if message_role != role:
                if blocks:
                    parts.append(b'{"role":"%s","content":[%s]}' % (role.encode(), b",".join(blocks)))  # type: ignore[union-attr]
                role, blocks = message_role, []
            blocks.append(fragment)
        if blocks:
            parts.append(b'{"role":"%s","content":[%s]}' % (role.encode(), b",".join(blocks)))  # type: ignore[union-attr]
        return self.head(request) + b",".join(parts) + b"]}"

    async def complete(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """:meth:`HttpModel.complete`, going on after ``pause_turn``.

        Anthropic pauses a long turn of server tools (web search...) with the
        stop reason ``pause_turn``; the answer so far is sent back as the last
        (assistant) message, and the model carries on from there, up to
        ``max_pause_resumes`` times. The parts make one message: their blocks
        in order, their usage summed, the last part's stop reason. Cancelling
        it closes the connection of the request in flight; the parts already
        received are dropped with it.
        """
        message = await super().complete(request, emit)
        resumes = 0
        while message.stop_reason == StopReason.PAUSE_TURN and resumes < self.max_pause_resumes:
            resumes += 1
            more = await super().complete(attrs.evolve(request, messages=(*request.messages, message)), emit)
            message = AssistantMessage(
                message.content + more.content, message.usage + more.usage, more.stop_reason, more.model
            )
        return message

    def parse_response(self, payload: Any) -> AssistantMessage:
        """A Messages API response body as an :class:`AssistantMessage` (:class:`WireError` if it is not one)."""
        body = obj(payload, "response")
        if body.get("type") == "error":  # an error body sent with a 200
            raise self.error_event(body)
        content = field(body, "content", "response")
        if type(content) is not list:
            raise WireError("response.content: expected an array")
        blocks = [_content_block(item, f"content[{i}]") for i, item in enumerate(content)]
        return AssistantMessage(
            tuple(block for block in blocks if block is not None),
            _usage(opt_obj(body, "usage", "response"), "usage"),
            _stop_reason(body, "response", StopReason.END_TURN),
            text(body, "model", "response") or self.model,
        )

    def stream_assembler(self) -> StreamAssembler:
        """An assembler for one Messages API event stream."""
        return _Stream(self)


#: A prompt-cache breakpoint (Anthropic's default five-minute cache).
_EPHEMERAL = {"type": "ephemeral"}
_CACHE_CONTROL = b',"cache_control":{"type":"ephemeral"}}'
_LAST = (-1,)  # the default message breakpoint, compared by identity in encode_request
#: The most ``cache_control`` breakpoints one request may carry (the API refuses more).
MAX_CACHE_BREAKPOINTS = 4
#: The places :func:`cache_places` knows by name.
CACHE_PLACES = ("system", "tools", "messages")


def cache_places(prompt_cache: Any) -> frozenset[str | int]:
    """The ``prompt_cache`` option as the set of places a request marks with ``cache_control``.

    ``True`` is ``{"system", "tools", "messages"}``, ``False`` (or an empty
    collection) is none; otherwise a collection of places:

    - ``"system"``: the system prompt;
    - ``"tools"``: the last tool definition (the agent's tools, then
      ``server_tools``), which caches them all;
    - ``"messages"``: the end of the conversation, moving with it each turn
      (the same as ``-1``);
    - an ``int`` *i*: the end of message *i* of the conversation the model
      is sent (the agent's history, ``agent.history()``, plus the new
      prompt; negative counts from the end), e.g. ``0`` for a long document
      in the first prompt. A message with nothing to mark (an assistant
      message ending in thinking, an empty one) marks the nearest message
      before it that has; an index past the conversation marks nothing; two
      places on the same message mark it once.

    Anthropic takes at most :data:`MAX_CACHE_BREAKPOINTS` (4) breakpoints per
    request: more places are a ``ValueError``. A ``str`` or a non-collection
    is a ``TypeError``, an unknown name a ``ValueError``.
    """
    if prompt_cache is True:
        return frozenset(CACHE_PLACES)
    if prompt_cache is False:
        return frozenset()
    if isinstance(prompt_cache, (str, bytes)) or not isinstance(prompt_cache, Collection):
        raise TypeError(
            "prompt_cache takes True, False or a collection of places such as {'system', 'tools', 'messages'}, "
            f"got {prompt_cache!r}"
        )
    places: set[str | int] = set()
    for place in prompt_cache:
        if type(place) is int:
            places.add("messages" if place == -1 else place)
        elif isinstance(place, str):
            if place not in CACHE_PLACES:
                raise ValueError(f"prompt_cache: unknown place {place!r} (expected one of {CACHE_PLACES} or an int)")
            places.add(place)
        else:
            raise TypeError(f"prompt_cache: a place is a name {CACHE_PLACES} or a message index, got {place!r}")
    if len(places) > MAX_CACHE_BREAKPOINTS:
        raise ValueError(
            f"prompt_cache: {len(places)} places, but a request takes at most {MAX_CACHE_BREAKPOINTS} "
            f"cache breakpoints: {sorted(places, key=str)}"
        )
    return frozenset(places)


def _mark(messages: Sequence[Any], encoded: list[_Encoded], positions: tuple[int, ...]) -> None:
    """Put ``cache_control`` on the last block of the messages at ``positions`` (in place).

    A message that cannot hold it passes it to the nearest one before it that can; a
    position outside the conversation marks nothing; a message is marked once.
    """
    size = len(encoded)
    marked: list[int] = []
    for position in positions:
        index = position + size if position < 0 else position
        if not 0 <= index < size:
            continue
        while index >= 0 and index not in marked and not _markable(messages[index], encoded[index][1]):
            index -= 1
        if index < 0 or index in marked:
            continue
        role, fragment = encoded[index]
        encoded[index] = (role, fragment[:-1] + _CACHE_CONTROL)
        marked.append(index)


class _Block:
    __slots__ = ("citations", "data", "id", "initial", "kind", "name", "parts", "raw", "signature")

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.kind = kind = text(data, "type", where)
        self.parts: list[str] = []
        self.id = self.name = ""
        self.initial: Any = None
        self.signature: str | None = None
        self.data: str | None = None
        self.citations: list[Citation] = list(_citations(data, where)) if kind == "text" else []
        #: A block of a type the agent does not represent (a server tool's), as it started.
        self.raw: dict[str, Any] | None = None if kind in _KNOWN_BLOCKS else check_depth(data, where)
        if kind == "tool_use":
            self.id = text(data, "id", where)
            self.name = text(data, "name", where)
            self.initial = _tool_input(data.get("input"), f"{where}.input")
        elif kind == "text":
            self.parts.append(text(data, "text", where))
        elif kind == "thinking":
            self.parts.append(text(data, "thinking", where))
            self.signature = opt_text(data, "signature", where)
        elif kind == "redacted_thinking":
            self.data = opt_text(data, "data", where)

    def build(self, where: str) -> ContentBlock | None:
        kind = self.kind
        if kind == "text":
            return TextBlock("".join(self.parts), tuple(self.citations))
        if kind == "thinking":
            return ThinkingBlock("".join(self.parts), self.signature)
        if kind == "tool_use":
            if not self.id or not self.name:
                raise WireError(f"{where}: a tool_use block without {'an id' if not self.id else 'a name'}")
            raw = "".join(self.parts)
            initial = self.initial
            arguments = tool_arguments(raw, f"{where}.input") if raw else initial if type(initial) is dict else {}
            return ToolCall(self.id, self.name, arguments)
        if kind == "redacted_thinking" and self.data:
            return ThinkingBlock("", None, self.data)
        if self.raw is not None and kind:
            block = self.raw
            if self.parts:  # a server tool's input, streamed as JSON fragments
                block = {**block, "input": tool_arguments("".join(self.parts), f"{where}.input")}
            return _provider_block(block, kind)
        return None


_NOTHING: tuple[Event, ...] = ()


class _Stream(StreamAssembler):
    """Message start, content blocks by index, message delta, message stop."""

    __slots__ = ("_blocks", "_done", "_model", "_owner", "_stop_reason", "_usage")

    def __init__(self, owner: AnthropicModel) -> None:
        self._owner = owner
        self._blocks: dict[int, _Block] = {}
        self._usage = Usage()
        self._stop_reason = StopReason.END_TURN
        self._model = owner.model
        self._done = False

    def _block(self, data: dict[str, Any], kind: str) -> tuple[int, str]:
        index = data.get("index")
        if type(index) is not int or index.bit_length() > 32:
            raise WireError(f"{kind}.index: expected a block index")
        return index, f"{kind}[{index}]"

    def take(self, event: ServerSentEvent) -> Sequence[Event]:
        if event.event == "ping":
            return _NOTHING
        data = obj(loads(event.data), event.event)
        kind = text(data, "type", event.event) or event.event
        if kind == "content_block_delta":
            index, where = self._block(data, kind)
            block = self._blocks.get(index)
            if block is None:
                raise WireError(f"{where}: a delta for a block that never started")
            delta = obj(data.get("delta"), f"{where}.delta")
            delta_kind = text(delta, "type", f"{where}.delta")
            if delta_kind == "text_delta":
                piece = text(delta, "text", f"{where}.delta")
                block.parts.append(piece)
                return (TextDelta(piece),) if piece else _NOTHING
            if delta_kind == "input_json_delta":
                piece = text(delta, "partial_json", f"{where}.delta")
                block.parts.append(piece)
                if piece and block.kind == "tool_use":  # the model sends on only the tools a request names
                    return (ToolCallDelta(index, block.id, block.name, piece),)
            elif delta_kind == "thinking_delta":
                piece = text(delta, "thinking", f"{where}.delta")
                block.parts.append(piece)
                return (ThinkingDelta(piece),) if piece else _NOTHING
            elif delta_kind == "signature_delta":
                block.signature = opt_text(delta, "signature", f"{where}.delta")
            elif delta_kind == "citations_delta":
                block.citations.append(_citation(delta.get("citation"), f"{where}.delta.citation"))
        elif kind == "content_block_start":
            index, where = self._block(data, kind)
            self._blocks[index] = _Block(obj(data.get("content_block"), f"{where}.content_block"), where)
        elif kind == "message_start":
            message = obj(data.get("message"), "message_start.message")
            self._usage = _usage(opt_obj(message, "usage", "message_start.message"), "message_start.message.usage")
            self._model = text(message, "model", "message_start.message") or self._model
        elif kind == "message_delta":
            self._stop_reason = _stop_reason(opt_obj(data, "delta", kind), f"{kind}.delta", self._stop_reason)
            self._usage = _usage(opt_obj(data, "usage", kind), f"{kind}.usage", self._usage)
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            raise self._owner.error_event(data)
        # content_block_stop and event types added later need nothing.
        return _NOTHING

    def finish(self) -> AssistantMessage:
        if not self._done:
            raise StreamError(self._owner.provider, "the stream ended before message_stop")
        blocks = [self._blocks[index].build(f"content_block[{index}]") for index in sorted(self._blocks)]
        return AssistantMessage(
            tuple(block for block in blocks if block is not None), self._usage, self._stop_reason, self._model
        )


def anthropic_model(
    model: str, *, api_key: str | None = None, base_url: str | None = None, node: Any = None, **options: Any
) -> AnthropicModel:
    """The ``anthropic:`` factory: raises :class:`~condukt.providers.MissingApiKey` at once without a key."""
    key = resolve_api_key("anthropic", api_key, "ANTHROPIC_API_KEY")
    url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    return AnthropicModel(model, api_key=key, base_url=url, node=node, **options)


register_provider("anthropic", anthropic_model, replace=True)
