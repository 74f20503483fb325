"""OpenAI Chat Completions (``POST {base_url}/chat/completions``) and its compatibles.

``"openai:<model>"`` plus the presets in :data:`PRESETS`, which differ only
in base URL, key variable, how they ask for reasoning and which settings
they take: ``ollama:`` (local, no key), ``openrouter:``, ``groq:``,
``together:``, ``vllm:`` (local, or any server given as ``base_url``),
``mistral:``, ``xai:`` and ``deepseek:`` (docs/providers.md lists their quirks). The key comes from
``api_key=`` or the preset's variable (``OPENAI_API_KEY``...), the base URL
from ``base_url=``, ``<PREFIX>_BASE_URL`` or the preset's default (it
includes the ``/v1``).

Streaming asks for ``stream_options.include_usage``; tool-call fragments
are assembled by their ``index``; images travel as ``data:`` URLs, PDF
documents as ``file`` parts (``filename`` and ``file_data``, a ``data:``
URL), text documents as ``text`` parts holding their text (the API takes
only PDF files; it recommends sending a file's text that way), any other
document type raises :class:`~condukt.providers.UnsupportedContent` in a
new prompt and goes as a text note saying so from the history; tool
results that hold images or documents are followed by one user message
carrying them, as tool messages can only hold text; reasoning text streamed as
``reasoning_content`` or ``reasoning`` becomes thinking deltas.

A ``refusal`` (a message or delta field of its own, ``content`` staying
null) becomes the message's text with the stop reason
:attr:`~condukt.messages.StopReason.REFUSAL`, so the model raises
:class:`~condukt.providers.ModelRefused` with it; refusal deltas are not
emitted as text. Tool ``arguments`` sent as a JSON object rather than a
string (some compatible servers do) are taken as they are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import attrs

from ..events import Event, TextDelta, ThinkingDelta, ToolCallDelta
from ..messages import (
    AssistantMessage,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._documents import PDF, attachment_words, data_url, filename, note, problem, text_of
from ._errors import StreamError
from ._http.keys import resolve_api_key
from ._http.model import HttpModel, StreamAssembler
from ._http.node import DEFAULT_BASE_URLS
from ._http.sse import ServerSentEvent
from ._model import ModelRequest
from ._registry import register_provider
from ._wire import (
    WireCache,
    WireError,
    array,
    check_depth,
    count,
    dumps,
    field,
    loads,
    obj,
    opt_obj,
    text,
    tool_arguments,
)

__all__ = ["PRESETS", "OpenAIModel", "OpenAIPreset", "openai_factory"]

#: ``finish_reason`` -> :class:`StopReason` (any other value is ``OTHER``).
STOP_REASONS: dict[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "end_turn": StopReason.END_TURN,
    "eos": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
    "refusal": StopReason.REFUSAL,
}


@attrs.frozen
class OpenAIPreset:
    """One OpenAI-compatible provider.

    ``reasoning`` says how ``thinking_level`` is sent: ``"reasoning_effort"``
    (a top-level field), ``"reasoning"`` (OpenRouter's ``{"reasoning":
    {"effort": ...}}``) or ``None`` (not sent). ``minimal_effort`` is what
    ``minimal`` becomes (only OpenAI knows ``"minimal"``).
    ``max_tokens_field`` names the output cap field, ``seed_field`` the
    seed's (``None``: the provider takes no seed), ``stop`` whether it takes
    stop sequences; ``parallel_tool_calls`` and ``stream_usage`` say whether
    it accepts those fields (``stream_options.include_usage`` is sent only
    where it does; usage then comes, or not, as the server decides).
    """

    prefix: str
    base_url: str
    key_env: str | None
    key_required: bool = True
    reasoning: str | None = "reasoning_effort"
    minimal_effort: str = "low"
    max_tokens_field: str = "max_tokens"
    seed_field: str | None = "seed"
    stop: bool = True
    stream_usage: bool = True


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
        # Mistral: the seed is ``random_seed``; no ``stream_options`` (usage comes in the last chunk anyway);
        # Magistral models reason without being asked (their reasoning arrives as thinking).
        OpenAIPreset(
            "mistral",
            "https://api.mistral.ai/v1",
            "MISTRAL_API_KEY",
            reasoning=None,
            seed_field="random_seed",
            stream_usage=False,
        ),
        # xAI: reasoning_effort only on grok-3-mini (low/high): not sent from thinking_level.
        OpenAIPreset("xai", "https://api.x.ai/v1", "XAI_API_KEY", reasoning=None),
        # DeepSeek: deepseek-reasoner reasons by its model name (reasoning_content), takes no seed.
        OpenAIPreset("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", reasoning=None, seed_field=None),
    )
}

_Encoded = tuple[bytes, bytes]  # (the wire message, image parts a tool result adds to a user message)


def checked_prompt_cache_key(value: Any) -> str | None:
    """The ``prompt_cache_key`` option (Chat Completions and the Responses API): ``None`` or a non-empty str."""
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"prompt_cache_key must be a non-empty str, got {value!r}")
    return value


def _data_url(block: ImageBlock) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.media_type};base64,{block.data}"}}


def _document(block: DocumentBlock) -> dict[str, Any]:
    """A PDF as a ``file`` part; a text document as a ``text`` part with its text (the API takes only PDF files)."""
    reason = problem(block, needs_text=True)
    if reason is not None:  # only in the history: a new prompt's raised UnsupportedContent
        return {"type": "text", "text": note(reason)}
    if block.media_type == PDF:
        return {"type": "file", "file": {"filename": filename(block), "file_data": data_url(block)}}
    text = text_of(block)
    return {"type": "text", "text": f"[document: {block.title}]\n{text}" if block.title else text}


def _part(block: Any) -> dict[str, Any]:
    kind = type(block)
    if kind is TextBlock:
        return {"type": "text", "text": block.text}
    return _data_url(block) if kind is ImageBlock else _document(block)


def _encode_message(message: Any) -> _Encoded:
    kind = type(message)
    if kind is UserMessage:
        blocks = message.content
        if all(type(block) is TextBlock for block in blocks):
            # Plain string content: every compatible server understands it.
            return dumps({"role": "user", "content": message.text}), b""
        parts = [_part(block) for block in blocks if type(block) is not TextBlock or block.text]
        return dumps({"role": "user", "content": parts}), b""
    if kind is ToolResultMessage:
        attached = [block for block in message.content if type(block) is not TextBlock]
        if not attached:
            return dumps({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}), b""
        placeholder, noun = attachment_words(attached)
        text = message.text or placeholder
        wire = dumps({"role": "tool", "tool_call_id": message.tool_call_id, "content": text})
        extra: list[dict[str, Any]] = [
            {"type": "text", "text": f"{noun} returned by tool call {message.tool_call_id} ({message.name}):"}
        ]
        extra.extend(_part(block) for block in attached)
        return wire, dumps(extra)[1:-1]
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


def _usage(data: dict[str, Any], where: str) -> Usage:
    details = opt_obj(data, "prompt_tokens_details", where)
    cached = count(details, "cached_tokens", f"{where}.prompt_tokens_details")
    # Input tokens exclude cached ones, as Anthropic counts them.
    return Usage(
        max(0, count(data, "prompt_tokens", where) - cached),
        count(data, "completion_tokens", where),
        cached,
        0,
    )


def _stop_reason(finish: str) -> StopReason:
    return STOP_REASONS.get(finish, StopReason.OTHER) if finish else StopReason.END_TURN


def _reasoning(data: dict[str, Any], where: str) -> str:
    # Some servers send reasoning as something other than text (an object of
    # OpenRouter's reasoning details): not thinking text, so left out.
    for key in ("reasoning_content", "reasoning"):
        value = data.get(key)
        if type(value) is str and value:
            return value
    return ""


def _function_arguments(value: Any, where: str) -> Any:
    """``function.arguments``: JSON text (the usual), or an object some servers send as is."""
    if value is None or type(value) is str:
        return tool_arguments(value or "", where)
    if type(value) is dict:
        return check_depth(value, where)
    raise WireError(f"{where}: expected a string or an object")


def _content(data: dict[str, Any], key: str, where: str) -> str:
    """``content`` or ``refusal``: a string, or (Mistral and others) an array of parts whose text parts count."""
    value = data.get(key)
    if type(value) is not list:
        return text(data, key, where)
    pieces = []
    for i, item in enumerate(value):
        part = obj(item, f"{where}.{key}[{i}]")
        kind = text(part, "type", f"{where}.{key}[{i}]")
        if kind in ("text", "refusal"):
            pieces.append(text(part, kind, f"{where}.{key}[{i}]"))
    return "".join(pieces)


def _tool_call(item: Any, index: int, where: str) -> ToolCall:
    call = obj(item, where)
    function = obj(call.get("function"), f"{where}.function")
    name = text(function, "name", f"{where}.function")
    if not name:
        raise WireError(f"{where}.function.name: missing")
    arguments = _function_arguments(function.get("arguments"), f"{where}.function.arguments")
    return ToolCall(text(call, "id", where) or f"call_{index}", name, arguments)


class OpenAIModel(HttpModel):
    """A model behind an OpenAI-compatible Chat Completions endpoint.

    ``preset`` is an :class:`OpenAIPreset` (``PRESETS["openai"]`` by
    default); ``prompt_cache_key`` (OpenAI) groups requests that share a
    long prefix so they hit the same prompt cache; other options: see
    :class:`~condukt.providers.HttpModel`.
    """

    path = "/chat/completions"
    protocol = "Chat Completions"

    def __init__(
        self, model: str, *, preset: OpenAIPreset | None = None, prompt_cache_key: str | None = None, **options: Any
    ) -> None:
        self.preset = preset or PRESETS["openai"]
        options.setdefault("provider", self.preset.prefix)
        super().__init__(model, **options)
        #: Sent as ``prompt_cache_key``: requests sharing it are routed to share OpenAI's prompt cache.
        self.prompt_cache_key = checked_prompt_cache_key(prompt_cache_key)
        self._messages: WireCache[_Encoded] = WireCache(_encode_message)

    def document_problem(self, block: DocumentBlock) -> str | None:
        """PDF (a ``file`` part) and UTF-8 ``text/*`` documents (their text) only."""
        return problem(block, needs_text=True)

    def setting_problem(self, name: str, request: ModelRequest) -> str | None:
        """What the preset does not take (``seed`` on DeepSeek's API...)."""
        preset = self.preset
        if name == "seed" and preset.seed_field is None:
            return f"{preset.prefix}'s API has no seed setting"
        if name == "stop" and not preset.stop:
            return f"{preset.prefix}'s API takes no stop sequences"
        return None

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``Authorization: Bearer <key>`` when there is a key."""
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def encode_head(self, request: ModelRequest) -> bytes:
        """Model, stream options, output cap, tools, reasoning, and the system message."""
        preset = self.preset
        head: dict[str, Any] = {"model": self.model}
        if self.stream:
            head["stream"] = True
            if preset.stream_usage:
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
        if self.prompt_cache_key is not None:
            head["prompt_cache_key"] = self.prompt_cache_key
        settings = request.settings
        if settings is not None:
            if settings.temperature is not None:
                head["temperature"] = settings.temperature
            if settings.top_p is not None:
                head["top_p"] = settings.top_p
            if settings.stop is not None:
                head["stop"] = list(settings.stop)
            if settings.seed is not None and preset.seed_field is not None:
                head[preset.seed_field] = settings.seed
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
        """A Chat Completions response body as an :class:`AssistantMessage` (:class:`WireError` if it is not one)."""
        body = obj(payload, "response")
        if body.get("error") is not None or body.get("object") == "error":  # an error body sent with a 200
            raise self.error_event(body)
        choices = field(body, "choices", "response")
        if type(choices) is not list or not choices:
            raise WireError("response.choices: expected a non-empty array")
        choice = obj(choices[0], "choices[0]")
        message = obj(field(choice, "message", "choices[0]"), "choices[0].message")
        where = "choices[0].message"
        blocks: list[ContentBlock] = []
        reasoning = _reasoning(message, where)
        if reasoning:
            blocks.append(ThinkingBlock(reasoning))
        content = _content(message, "content", where)
        refusal = _content(message, "refusal", where)
        if content or refusal:
            blocks.append(TextBlock(content or refusal))
        for i, call in enumerate(array(message, "tool_calls", where)):
            blocks.append(_tool_call(call, i, f"{where}.tool_calls[{i}]"))
        stop = StopReason.REFUSAL if refusal else _stop_reason(text(choice, "finish_reason", "choices[0]"))
        return AssistantMessage(
            tuple(blocks),
            _usage(opt_obj(body, "usage", "response"), "usage"),
            stop,
            text(body, "model", "response") or self.model,
        )

    def stream_assembler(self) -> StreamAssembler:
        """An assembler for one Chat Completions chunk stream."""
        return _Stream(self)


class _Call:
    __slots__ = ("arguments", "id", "name", "object")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []
        self.object: dict[str, Any] | None = None


_NOTHING: tuple[Event, ...] = ()


class _Stream(StreamAssembler):
    """``chat.completion.chunk`` objects until ``[DONE]``; tool calls assembled by index."""

    __slots__ = ("_calls", "_done", "_finish", "_model", "_owner", "_refusal", "_text", "_thinking", "_usage")

    def __init__(self, owner: OpenAIModel) -> None:
        self._owner = owner
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._usage = Usage()
        self._finish = ""
        self._model = owner.model
        self._done = False

    def take(self, event: ServerSentEvent) -> Sequence[Event]:
        data = event.data
        if data == "[DONE]":
            self._done = True
            return _NOTHING
        chunk = obj(loads(data), "chunk")
        if chunk.get("error") is not None or chunk.get("object") == "error":
            raise self._owner.error_event(chunk)
        usage = chunk.get("usage")
        if usage:
            self._usage = _usage(obj(usage, "chunk.usage"), "chunk.usage")
        out: list[Event] = []
        for i, item in enumerate(array(chunk, "choices", "chunk")):
            where = f"choices[{i}]"
            choice = obj(item, where)
            delta = opt_obj(choice, "delta", where)
            where += ".delta"
            reasoning = _reasoning(delta, where)
            if reasoning:
                self._thinking.append(reasoning)
                out.append(ThinkingDelta(reasoning))
            content = text(delta, "content", where)
            if content:
                self._text.append(content)
                out.append(TextDelta(content))
            refusal = text(delta, "refusal", where)
            if refusal:
                self._refusal.append(refusal)
            for j, item in enumerate(array(delta, "tool_calls", where)):
                piece = self._fragment(obj(item, f"{where}.tool_calls[{j}]"), f"{where}.tool_calls[{j}]")
                if piece is not None:
                    out.append(piece)
            finish = text(choice, "finish_reason", where)
            if finish:
                self._finish = finish
        model = text(chunk, "model", "chunk")
        if model:
            self._model = model
        return out

    def _fragment(self, fragment: dict[str, Any], where: str) -> ToolCallDelta | None:
        """Add a piece of a tool call; the piece of its arguments as an event (sent on only for the tools asked for)."""
        index = fragment.get("index", len(self._calls))
        if type(index) is not int or index.bit_length() > 32:
            raise WireError(f"{where}.index: expected an integer")
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _Call()
        call_id = text(fragment, "id", where)
        if call_id:
            call.id = call_id
        function = opt_obj(fragment, "function", where)
        name = text(function, "name", f"{where}.function")
        if name:
            call.name = name
        arguments = function.get("arguments")
        if type(arguments) is str:
            if arguments:
                call.arguments.append(arguments)
                return ToolCallDelta(index, call.id, call.name, arguments)
        elif type(arguments) is dict:
            call.object = check_depth(arguments, f"{where}.function.arguments")
        elif arguments is not None:
            raise WireError(f"{where}.function.arguments: expected a string or an object")
        return None

    def finish(self) -> AssistantMessage:
        # Some compatible servers end the body after the last chunk without
        # "[DONE]"; a finish_reason tells that the answer is whole anyway.
        if not self._done and not self._finish:
            raise StreamError(self._owner.provider, "the stream ended before its last chunk")
        blocks: list[ContentBlock] = []
        if self._thinking:
            blocks.append(ThinkingBlock("".join(self._thinking)))
        if self._text or self._refusal:
            blocks.append(TextBlock("".join(self._text) or "".join(self._refusal)))
        for index in sorted(self._calls):
            call = self._calls[index]
            where = f"tool_calls[{index}]"
            if not call.name:
                raise StreamError(self._owner.provider, f"tool call {index} has no name")
            raw = "".join(call.arguments)
            arguments = call.object
            if raw or arguments is None:
                arguments = tool_arguments(raw, f"{where}.function.arguments")
            blocks.append(ToolCall(call.id or f"call_{index}", call.name, arguments))
        stop = StopReason.REFUSAL if self._refusal else _stop_reason(self._finish)
        return AssistantMessage(tuple(blocks), self._usage, stop, self._model)


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
