"""OpenAI Chat Completions (``POST {base_url}/chat/completions``) and its compatibles.

``"openai:<model>"`` plus the presets in :data:`PRESETS`, which differ only
in base URL, key variable and how they ask for reasoning: ``ollama:``
(local, no key), ``openrouter:``, ``groq:``, ``together:`` and ``vllm:``
(local, or any server given as ``base_url``). The key comes from
``api_key=`` or the preset's variable (``OPENAI_API_KEY``...), the base URL
from ``base_url=``, ``<PREFIX>_BASE_URL`` or the preset's default (it
includes the ``/v1``).

Streaming asks for ``stream_options.include_usage``; tool-call fragments
are assembled by their ``index``; images travel as ``data:`` URLs (tool
results that hold images are followed by one user message carrying them,
as tool messages can only hold text); reasoning text streamed as
``reasoning_content`` or ``reasoning`` becomes thinking deltas.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

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

__all__ = ["PRESETS", "OpenAIModel", "OpenAIPreset", "openai_factory"]

#: finish_reason -> the stop reasons condukt uses (Anthropic's vocabulary).
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


@attrs.frozen
class OpenAIPreset:
    """One OpenAI-compatible provider.

    ``reasoning`` says how ``thinking_level`` is sent: ``"reasoning_effort"``
    (a top-level field), ``"reasoning"`` (OpenRouter's ``{"reasoning":
    {"effort": ...}}``) or ``None`` (not sent). ``minimal_effort`` is what
    ``minimal`` becomes (only OpenAI knows ``"minimal"``).
    ``max_tokens_field`` names the output cap field.
    """

    prefix: str
    base_url: str
    key_env: str | None
    key_required: bool = True
    reasoning: str | None = "reasoning_effort"
    minimal_effort: str = "low"
    max_tokens_field: str = "max_tokens"


#: The presets sharing this module, by prefix.
PRESETS: dict[str, OpenAIPreset] = {
    preset.prefix: preset
    for preset in (
        OpenAIPreset(
            "openai",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            minimal_effort="minimal",
            max_tokens_field="max_completion_tokens",
        ),
        OpenAIPreset("ollama", "http://localhost:11434/v1", "OLLAMA_API_KEY", key_required=False),
        OpenAIPreset("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", reasoning="reasoning"),
        OpenAIPreset("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        OpenAIPreset("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
        OpenAIPreset("vllm", "http://localhost:8000/v1", "VLLM_API_KEY", key_required=False),
    )
}

_Encoded = tuple[bytes, bytes]  # (the wire message, image parts a tool result adds to a user message)


def _data_url(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.media_type};base64,{block.data}"}}


def _encode_message(message: Any) -> _Encoded:
    kind = type(message)
    if kind is UserMessage:
        blocks = message.content
        if all(type(block) is TextBlock for block in blocks):
            # Plain string content: every compatible server understands it.
            return dumps({"role": "user", "content": message.text}), b""
        parts = [
            {"type": "text", "text": block.text} if type(block) is TextBlock else _data_url(block)
            for block in blocks
            if type(block) is not TextBlock or block.text
        ]
        return dumps({"role": "user", "content": parts}), b""
    if kind is ToolResultMessage:
        images = [block for block in message.content if type(block) is ImageBlock]
        text = message.text or ("(see the attached image)" if images else "")
        wire = dumps({"role": "tool", "tool_call_id": message.tool_call_id, "content": text})
        if not images:
            return wire, b""
        image_parts: list[dict[str, Any]] = [
            {"type": "text", "text": f"Image returned by tool call {message.tool_call_id} ({message.name}):"}
        ]
        image_parts.extend(_data_url(block) for block in images)
        return wire, dumps(image_parts)[1:-1]
    text = message.text
    calls = message.tool_calls
    # Content may be null only beside tool calls.
    wire_message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        wire_message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments if isinstance(call.arguments, str) else dumps(call.arguments).decode(),
                },
            }
            for call in calls
        ]
    return dumps(wire_message), b""


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    details = data.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    # Input tokens exclude cached ones, as Anthropic counts them.
    return Usage(
        max(0, int(data.get("prompt_tokens") or 0) - cached),
        int(data.get("completion_tokens") or 0),
        cached,
        0,
    )


def _arguments(raw: str) -> Any:
    if not raw:
        return {}
    try:
        return loads(raw)
    except ValueError:
        return raw  # the agent reports invalid JSON to the model


class OpenAIModel(HttpModel):
    """A model behind an OpenAI-compatible Chat Completions endpoint.

    ``preset`` is an :class:`OpenAIPreset` (``PRESETS["openai"]`` by
    default); other options: see :class:`~condukt.providers.HttpModel`.
    """

    path = "/chat/completions"

    def __init__(self, model: str, *, preset: OpenAIPreset | None = None, **options: Any) -> None:
        self.preset = preset or PRESETS["openai"]
        options.setdefault("provider", self.preset.prefix)
        super().__init__(model, **options)
        self._messages: WireCache[_Encoded] = WireCache(_encode_message)

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``Authorization: Bearer <key>`` when there is a key."""
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def encode_head(self, request: ModelRequest) -> bytes:
        """Model, stream options, output cap, tools, reasoning, and the system message."""
        preset = self.preset
        head: dict[str, Any] = {"model": self.model}
        if self.stream:
            head["stream"] = True
            head["stream_options"] = {"include_usage": True}
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            head[preset.max_tokens_field] = max_tokens
        if request.tools:
            head["tools"] = [
                {
                    "type": "function",
                    "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
                }
                for tool in request.tools
            ]
        level = request.thinking_level
        if level != "off" and preset.reasoning is not None:
            effort = preset.minimal_effort if level == "minimal" else level
            if preset.reasoning == "reasoning":
                head["reasoning"] = {"effort": effort}
            else:
                head["reasoning_effort"] = effort
        head.update(self.extra_body)
        prefix = dumps(head)[:-1] + b',"messages":['
        if request.system_prompt:
            prefix += dumps({"role": "system", "content": request.system_prompt})
        return prefix

    def encode_request(self, request: ModelRequest) -> bytes:
        """The Chat Completions body: images from a run of tool results follow it in one user message."""
        head = self.head(request)
        parts: list[bytes] = []
        pending_images: list[bytes] = []
        for wire, images in self._messages.encode_all(request.messages):
            if pending_images and not wire.startswith(b'{"role":"tool"'):
                parts.append(b'{"role":"user","content":[%s]}' % b",".join(pending_images))
                pending_images = []
            parts.append(wire)
            if images:
                pending_images.append(images)
        if pending_images:
            parts.append(b'{"role":"user","content":[%s]}' % b",".join(pending_images))
        if request.system_prompt and parts:
            return head + b"," + b",".join(parts) + b"]}"
        return head + b",".join(parts) + b"]}"

    def parse_response(self, payload: Any) -> AssistantMessage:
        """A Chat Completions response body as an :class:`AssistantMessage`."""
        try:
            choice = payload["choices"][0]
            message = choice["message"]
            blocks: list[ContentBlock] = []
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                blocks.append(ThinkingBlock(reasoning))
            content = message.get("content")
            if isinstance(content, str) and content:
                blocks.append(TextBlock(content))
            for call in message.get("tool_calls") or ():
                function = call["function"]
                blocks.append(ToolCall(call["id"], function["name"], _arguments(function.get("arguments") or "")))
            finish = choice.get("finish_reason") or "stop"
            return AssistantMessage(
                tuple(blocks),
                _usage(payload.get("usage")),
                STOP_REASONS.get(finish, finish),
                payload.get("model") or self.model,
            )
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise InvalidResponse(self.provider, f"unexpected response shape: {exc!r}") from None

    def stream_assembler(self) -> StreamAssembler:
        """An assembler for one Chat Completions chunk stream."""
        return _Stream(self)


class _Call:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class _Stream(StreamAssembler):
    """``chat.completion.chunk`` objects until ``[DONE]``; tool calls assembled by index."""

    __slots__ = ("_calls", "_done", "_finish", "_model", "_owner", "_text", "_thinking", "_usage")

    def __init__(self, owner: OpenAIModel) -> None:
        self._owner = owner
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._usage = Usage()
        self._finish: str | None = None
        self._model = owner.model
        self._done = False

    async def feed(self, event: ServerSentEvent, emit: Emit) -> None:
        data = event.data
        if data == "[DONE]":
            self._done = True
            return
        try:
            chunk = loads(data)
            if "error" in chunk:
                raise self._owner.error_event(chunk)
            usage = chunk.get("usage")
            if usage:
                self._usage = _usage(usage)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning and isinstance(reasoning, str):
                    self._thinking.append(reasoning)
                    await emit(ThinkingDelta(reasoning))
                content = delta.get("content")
                if content:
                    self._text.append(content)
                    await emit(TextDelta(content))
                for fragment in delta.get("tool_calls") or ():
                    index = fragment.get("index", len(self._calls))
                    call = self._calls.get(index)
                    if call is None:
                        call = self._calls[index] = _Call()
                    if fragment.get("id"):
                        call.id = fragment["id"]
                    function = fragment.get("function") or {}
                    if function.get("name"):
                        call.name = function["name"]
                    arguments = function.get("arguments")
                    if arguments:
                        call.arguments.append(arguments)
                finish = choice.get("finish_reason")
                if finish:
                    self._finish = finish
            if chunk.get("model"):
                self._model = chunk["model"]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StreamError(self._owner.provider, f"malformed chunk: {exc!r}") from None

    def finish(self) -> AssistantMessage:
        # Some compatible servers end the body after the last chunk without
        # "[DONE]"; a finish_reason tells that the answer is whole anyway.
        if not self._done and self._finish is None:
            raise StreamError(self._owner.provider, "the stream ended before its last chunk")
        blocks: list[ContentBlock] = []
        if self._thinking:
            blocks.append(ThinkingBlock("".join(self._thinking)))
        if self._text:
            blocks.append(TextBlock("".join(self._text)))
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise StreamError(self._owner.provider, f"tool call {index} has no name")
            blocks.append(ToolCall(call.id or f"call_{index}", call.name, _arguments("".join(call.arguments))))
        finish = self._finish or "stop"
        return AssistantMessage(tuple(blocks), self._usage, STOP_REASONS.get(finish, finish), self._model)


def openai_factory(preset: OpenAIPreset) -> Any:
    """The factory registered for ``preset``: key and base URL from options or the environment."""

    def factory(
        model: str, *, api_key: str | None = None, base_url: str | None = None, node: Any = None, **options: Any
    ) -> OpenAIModel:
        key = resolve_api_key(preset.prefix, api_key, preset.key_env, required=preset.key_required)
        url = base_url or os.environ.get(f"{preset.prefix.upper()}_BASE_URL") or None
        return OpenAIModel(model, preset=preset, api_key=key, base_url=url, node=node, **options)

    factory.__name__ = f"{preset.prefix}_model"
    factory.__doc__ = f"The ``{preset.prefix}:`` factory ({preset.base_url})."
    return factory


for _preset in PRESETS.values():
    DEFAULT_BASE_URLS[_preset.prefix] = _preset.base_url
    register_provider(_preset.prefix, openai_factory(_preset), replace=True)
