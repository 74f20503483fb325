"""The Anthropic Messages API (``POST /v1/messages``): ``"anthropic:<model>"``.

Requests carry ``x-api-key`` and ``anthropic-version``; the key comes from
``api_key=`` or ``ANTHROPIC_API_KEY``, the base URL from ``base_url=``,
``ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com``. Tool results go
back as ``tool_result`` blocks (images included) in one user message per
turn; a ``thinking_level`` other than ``off`` turns extended thinking on
with the budget in :data:`THINKING_BUDGETS`, and thinking blocks (with their
signatures) are sent back as the API requires during tool use.
"""

from __future__ import annotations

import os
from typing import Any

from ..events import TextDelta, ThinkingDelta
from ..messages import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._errors import InvalidResponse, StreamError
from ._http import DEFAULT_BASE_URLS
from ._http_model import HttpModel, StreamAssembler, resolve_api_key
from ._model import Emit, ModelRequest
from ._registry import register_provider
from ._sse import ServerSentEvent
from ._wire import WireCache, dumps, loads

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "THINKING_BUDGETS", "AnthropicModel", "anthropic_model"]

#: The ``anthropic-version`` header sent with every request.
ANTHROPIC_VERSION = "2023-06-01"
#: Output tokens per response when neither the agent nor the model options set ``max_tokens``
#: (extended thinking adds its budget on top).
DEFAULT_MAX_TOKENS = 8192
#: ``thinking.budget_tokens`` for each ``thinking_level`` (``off``: thinking disabled).
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 10240, "high": 32768}
#: The smallest budget the API accepts.
MIN_THINKING_BUDGET = 1024

DEFAULT_BASE_URLS["anthropic"] = "https://api.anthropic.com"

_Encoded = tuple[str, bytes]  # (role, comma-joined content blocks)


def _text(block: TextBlock) -> dict[str, Any]:
    return {"type": "text", "text": block.text}


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.media_type, "data": block.data}}


def _user_content(blocks: Any) -> list[dict[str, Any]]:
    out = []
    for block in blocks:
        if type(block) is TextBlock:
            if block.text:  # the API rejects empty text blocks
                out.append(_text(block))
        elif type(block) is ImageBlock:
            out.append(_image(block))
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
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.redacted})
            elif block.signature:
                blocks.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif block_kind is ImageBlock:
            blocks.append(_image(block))
    return "assistant", dumps(blocks)[1:-1]


def _usage(data: dict[str, Any], usage: Usage | None = None) -> Usage:
    base = usage or Usage()
    return Usage(
        int(data.get("input_tokens") or base.input_tokens),
        int(data.get("output_tokens") or base.output_tokens),
        int(data.get("cache_read_input_tokens") or base.cache_read_tokens),
        int(data.get("cache_creation_input_tokens") or base.cache_write_tokens),
    )


def _arguments(raw: str, initial: Any) -> Any:
    if not raw:
        return initial if isinstance(initial, dict) else {}
    try:
        return loads(raw)
    except ValueError:
        return raw  # the agent reports invalid JSON to the model


class AnthropicModel(HttpModel):
    """A Claude model over the Messages API. Options: see :class:`~condukt.providers.HttpModel`."""

    path = "/v1/messages"

    def __init__(self, model: str, **options: Any) -> None:
        options.setdefault("provider", "anthropic")
        super().__init__(model, **options)
        self._messages: WireCache[_Encoded] = WireCache(_encode_message)

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``x-api-key`` and ``anthropic-version``."""
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def _token_settings(self, request: ModelRequest) -> tuple[int, int | None]:
        """``(max_tokens, thinking budget or None)`` for ``request``."""
        max_tokens = request.max_tokens or self.max_tokens
        budget = THINKING_BUDGETS.get(request.thinking_level)
        if budget is None:
            return max_tokens or DEFAULT_MAX_TOKENS, None
        if max_tokens is None:
            return budget + DEFAULT_MAX_TOKENS, budget
        if max_tokens > budget:
            return max_tokens, budget
        if max_tokens > MIN_THINKING_BUDGET:
            return max_tokens, max_tokens - 1  # the budget must stay below max_tokens
        return max_tokens, None  # too small a cap to think at all

    def encode_head(self, request: ModelRequest) -> bytes:
        """Model, output cap, stream flag, system prompt, tools and thinking budget."""
        max_tokens, budget = self._token_settings(request)
        head: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens}
        if self.stream:
            head["stream"] = True
        if request.system_prompt:
            head["system"] = request.system_prompt
        if request.tools:
            head["tools"] = [
                {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
                for tool in request.tools
            ]
        if budget is not None:
            head["thinking"] = {"type": "enabled", "budget_tokens": budget}
        head.update(self.extra_body)
        return dumps(head)[:-1] + b',"messages":['  # the messages close the object

    def encode_request(self, request: ModelRequest) -> bytes:
        """The Messages API body: consecutive user-side messages (tool results, steers) merged into one."""
        parts: list[bytes] = []
        role: str | None = None
        blocks: list[bytes] = []
        for message_role, fragment in self._messages.encode_all(request.messages):
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

    def parse_response(self, payload: Any) -> AssistantMessage:
        """A Messages API response body as an :class:`AssistantMessage`."""
        try:
            blocks: list[ContentBlock] = []
            for item in payload["content"]:
                kind = item.get("type")
                if kind == "text":
                    blocks.append(TextBlock(item["text"]))
                elif kind == "thinking":
                    blocks.append(ThinkingBlock(item.get("thinking", ""), item.get("signature")))
                elif kind == "redacted_thinking":
                    blocks.append(ThinkingBlock("", None, item["data"]))
                elif kind == "tool_use":
                    blocks.append(ToolCall(item["id"], item["name"], item.get("input") or {}))
            return AssistantMessage(
                tuple(blocks),
                _usage(payload.get("usage") or {}),
                payload.get("stop_reason") or "end_turn",
                payload.get("model") or self.model,
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise InvalidResponse(self.provider, f"unexpected response shape: {exc!r}") from None

    def stream_assembler(self) -> StreamAssembler:
        """An assembler for one Messages API event stream."""
        return _Stream(self)


class _Block:
    __slots__ = ("data", "id", "initial", "kind", "name", "parts", "signature")

    def __init__(self, kind: str, data: dict[str, Any]) -> None:
        self.kind = kind
        self.parts: list[str] = []
        self.id = data.get("id", "")
        self.name = data.get("name", "")
        self.initial = data.get("input")
        self.signature = data.get("signature") or None
        self.data = data.get("data")
        initial_text = data.get("text") or data.get("thinking")
        if initial_text:
            self.parts.append(initial_text)

    def build(self) -> ContentBlock | None:
        kind = self.kind
        if kind == "text":
            return TextBlock("".join(self.parts))
        if kind == "thinking":
            return ThinkingBlock("".join(self.parts), self.signature)
        if kind == "tool_use":
            return ToolCall(self.id, self.name, _arguments("".join(self.parts), self.initial))
        if kind == "redacted_thinking" and self.data:
            return ThinkingBlock("", None, self.data)
        return None  # server tools and block types added later: not represented


class _Stream(StreamAssembler):
    """Message start, content blocks by index, message delta, message stop."""

    __slots__ = ("_blocks", "_done", "_model", "_owner", "_stop_reason", "_usage")

    def __init__(self, owner: AnthropicModel) -> None:
        self._owner = owner
        self._blocks: dict[int, _Block] = {}
        self._usage = Usage()
        self._stop_reason = "end_turn"
        self._model = owner.model
        self._done = False

    async def feed(self, event: ServerSentEvent, emit: Emit) -> None:
        if event.event == "ping":
            return
        try:
            data = loads(event.data)
            kind = data.get("type") or event.event
            if kind == "content_block_delta":
                delta = data["delta"]
                delta_kind = delta["type"]
                block = self._blocks[data["index"]]
                if delta_kind == "text_delta":
                    text = delta["text"]
                    block.parts.append(text)
                    await emit(TextDelta(text))
                elif delta_kind == "input_json_delta":
                    block.parts.append(delta["partial_json"])
                elif delta_kind == "thinking_delta":
                    text = delta["thinking"]
                    block.parts.append(text)
                    await emit(ThinkingDelta(text))
                elif delta_kind == "signature_delta":
                    block.signature = delta["signature"]
            elif kind == "content_block_start":
                block_data = data["content_block"]
                self._blocks[data["index"]] = _Block(block_data["type"], block_data)
            elif kind == "message_start":
                message = data["message"]
                self._usage = _usage(message.get("usage") or {})
                self._model = message.get("model") or self._model
            elif kind == "message_delta":
                self._stop_reason = data.get("delta", {}).get("stop_reason") or self._stop_reason
                self._usage = _usage(data.get("usage") or {}, self._usage)
            elif kind == "message_stop":
                self._done = True
            elif kind == "error":
                raise self._owner.error_event(data)
            # content_block_stop and event types added later need nothing.
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StreamError(self._owner.provider, f"malformed {event.event!r} event: {exc!r}") from None

    def finish(self) -> AssistantMessage:
        if not self._done:
            raise StreamError(self._owner.provider, "the stream ended before message_stop")
        blocks = [self._blocks[index].build() for index in sorted(self._blocks)]
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
