"""Google Gemini's ``generateContent`` API: ``"gemini:<model>"`` (e.g. ``"gemini:gemini-2.5-flash"``).

Requests go to ``{base_url}/v1beta/models/{model}:generateContent``, or
``:streamGenerateContent?alt=sse`` when streaming (server-sent events, each
a whole ``GenerateContentResponse`` carrying the next parts). The key travels
in ``x-goog-api-key`` and comes from ``api_key=``, ``GEMINI_API_KEY`` or
``GOOGLE_API_KEY``; the base URL from ``base_url=``, ``GEMINI_BASE_URL`` or
``https://generativelanguage.googleapis.com``.

The wire format, from the public API reference:

- Roles are ``user`` and ``model``; the system prompt is
  ``systemInstruction``. Tool results are ``functionResponse`` parts
  (``{"name", "id", "response": {"output": text}}``, ``{"error": text}`` for
  an error result) in one ``user`` turn, in call order; images and
  documents a tool returned follow them as ``inlineData`` parts of that turn.
- Images and documents are ``inlineData`` parts (``mimeType``, base64
  ``data``); documents must be PDF or ``text/*`` (sent as ``text/plain``:
  Gemini reads every text format as plain text), else :class:`~condukt.providers.UnsupportedContent`
  for a new prompt's, a text note saying so for one in the history.
  The API has no field for a document's title: it is not sent.
- Tools are ``functionDeclarations`` whose ``parametersJsonSchema`` carries
  the tool's JSON schema as it is.
- ``functionCall`` parts become :class:`~condukt.messages.ToolCall`; a call
  without an ``id`` (older models send none) gets one made up here, never
  sent back. Parts with ``"thought": true`` are thinking.
- ``thoughtSignature`` (an opaque token on a part, which Gemini 3 requires
  back with the function calls of the current turn) is kept as a
  :class:`~condukt.messages.ThinkingBlock` with ``provider="gemini"`` placed
  before the block it came with, and sent back on that same part.
- ``thinking_level`` other than ``off`` sets ``generationConfig.thinkingConfig``
  with ``includeThoughts``: a ``thinkingBudget`` from :data:`THINKING_BUDGETS`,
  or for ``gemini-3`` models a ``thinkingLevel``. ``off`` sends no thinking
  settings (the model's default: 2.5 Pro cannot switch thinking off).
- ``finishReason``: ``STOP`` is ``end_turn`` (``tool_use`` when the answer
  holds function calls), ``MAX_TOKENS`` ``max_tokens``; ``SAFETY``,
  ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII`` and
  ``IMAGE_SAFETY`` (and a prompt blocked by ``promptFeedback.blockReason``)
  are ``content_filter``, so the model raises
  :class:`~condukt.providers.ModelRefused`; the rest are ``other``.
- Usage: ``promptTokenCount`` less ``cachedContentTokenCount`` is input
  (cached tokens are reported as cache reads, as for the other providers),
  ``candidatesTokenCount`` plus ``thoughtsTokenCount`` is output.
- Errors: ``{"error": {"code", "message", "status"}}``; the status names
  (``RESOURCE_EXHAUSTED``, ``UNAVAILABLE``...) and an ``API_KEY_INVALID``
  reason map to the usual :class:`~condukt.providers.ProviderError` types.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import Any

from ..events import Event, TextDelta, ThinkingDelta
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
from ._documents import note, problem
from ._errors import MissingApiKey, StreamError
from ._http.keys import resolve_api_key
from ._http.model import HttpModel, StreamAssembler
from ._http.node import DEFAULT_BASE_URLS
from ._http.sse import ServerSentEvent
from ._model import ModelRequest
from ._registry import register_provider
from ._wire import WireCache, WireError, array, check_depth, count, dumps, loads, obj, opt_obj, opt_text, text

__all__ = ["API_VERSION", "FINISH_REASONS", "THINKING_BUDGETS", "GeminiModel", "gemini_model"]

#: The API version in the request path.
API_VERSION = "v1beta"
#: ``thinkingConfig.thinkingBudget`` for each ``thinking_level`` (Gemini 2.5 models).
THINKING_BUDGETS = {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}
#: ``thinkingConfig.thinkingLevel`` for each ``thinking_level`` (Gemini 3 models).
THINKING_LEVELS = {"minimal": "low", "low": "low", "medium": "high", "high": "high"}
#: Ids made up for function calls that came without one start with this; they are not sent back.
GENERATED_ID_PREFIX = "gemini-call-"

DEFAULT_BASE_URLS["gemini"] = "https://generativelanguage.googleapis.com"

_FILTERED = StopReason.CONTENT_FILTER
#: ``finishReason`` values of the API reference, as :class:`StopReason`.
FINISH_REASONS: dict[str, StopReason] = {
    "STOP": StopReason.END_TURN,
    "MAX_TOKENS": StopReason.MAX_TOKENS,
    "SAFETY": _FILTERED,
    "RECITATION": _FILTERED,
    "BLOCKLIST": _FILTERED,
    "PROHIBITED_CONTENT": _FILTERED,
    "SPII": _FILTERED,
    "IMAGE_SAFETY": _FILTERED,
    "IMAGE_PROHIBITED_CONTENT": _FILTERED,
}

_ids = itertools.count(1)
_Encoded = tuple[str, list[dict[str, Any]]]  # (role, parts)


def _inline(block: ImageBlock | DocumentBlock) -> dict[str, Any]:
    if type(block) is DocumentBlock:
        reason = problem(block, needs_text=False)
        if reason is not None:  # only in the history: a new prompt's raised UnsupportedContent
            return {"text": note(reason)}
        if block.is_text:
            # Gemini reads every text document as plain text, and answers 400 to a text type it
            # does not list (text/x-rst, one with a charset parameter...): text/plain always goes.
            return {"inlineData": {"mimeType": "text/plain", "data": block.data}}
    return {"inlineData": {"mimeType": block.media_type, "data": block.data}}


def _call_part(call: ToolCall) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": call.name,
        "args": call.arguments if isinstance(call.arguments, dict) else {},
    }
    if not call.id.startswith(GENERATED_ID_PREFIX):
        function["id"] = call.id
    return {"functionCall": function}


def _encode_message(message: Any) -> _Encoded:
    kind = type(message)
    if kind is ToolResultMessage:
        output = "".join(block.text for block in message.content if type(block) is TextBlock)
        key = "error" if message.is_error else "output"
        response: dict[str, Any] = {"name": message.name, "response": {key: output}}
        if not message.tool_call_id.startswith(GENERATED_ID_PREFIX):
            response["id"] = message.tool_call_id
        parts: list[dict[str, Any]] = [{"functionResponse": response}]
        parts.extend(_inline(block) for block in message.content if type(block) is not TextBlock)
        return "user", parts
    if kind is UserMessage:
        user: list[dict[str, Any]] = []
        for block in message.content:
            if type(block) is TextBlock:
                if block.text:
                    user.append({"text": block.text})
            else:  # an image or a document
                user.append(_inline(block))
        return "user", user
    parts = []
    signature: str | None = None
    for block in message.content:
        block_kind = type(block)
        part: dict[str, Any]
        if block_kind is ThinkingBlock:
            if block.provider == "gemini" and block.signature:
                signature = block.signature  # it goes on the part that follows
            continue  # thought summaries are not sent back (the signature carries the reasoning)
        if block_kind is TextBlock:
            if not block.text and signature is None:
                continue
            part = {"text": block.text}
        elif block_kind is ToolCall:
            part = _call_part(block)
        elif block_kind is ImageBlock:
            part = _inline(block)
        else:
            continue
        if signature is not None:
            part["thoughtSignature"] = signature
            signature = None
        parts.append(part)
    if signature is not None:  # a signature with nothing after it: on an empty text part, as the API sent it
        parts.append({"text": "", "thoughtSignature": signature})
    return "model", parts


def _usage(data: dict[str, Any], where: str) -> Usage:
    cached = count(data, "cachedContentTokenCount", where)
    return Usage(
        max(0, count(data, "promptTokenCount", where) - cached),
        count(data, "candidatesTokenCount", where) + count(data, "thoughtsTokenCount", where),
        cached,
        0,
    )


def _finish(data: dict[str, Any], where: str) -> StopReason | None:
    reason = text(data, "finishReason", where)
    if not reason:
        return None
    return FINISH_REASONS.get(reason, StopReason.OTHER)


def _blocked(body: dict[str, Any]) -> bool:
    """Whether ``promptFeedback.blockReason`` says the prompt itself was blocked."""
    return bool(text(opt_obj(body, "promptFeedback", "response"), "blockReason", "promptFeedback"))


class _Parts:
    """Collects a response's parts into content blocks; streamed text pieces join up."""

    __slots__ = ("blocks", "calls", "pending")

    def __init__(self) -> None:
        self.blocks: list[ContentBlock] = []
        self.calls = False
        #: Text pieces of the open text (or thought) block: ``(is_thought, pieces)``.
        self.pending: tuple[bool, list[str]] | None = None

    def _close(self) -> None:
        if self.pending is not None:
            thought, pieces = self.pending
            joined = "".join(pieces)
            self.blocks.append(ThinkingBlock(joined, None, None, "gemini") if thought else TextBlock(joined))
            self.pending = None

    def add(self, item: Any, where: str) -> Event | None:
        """Take one part; return the delta it carries, if any."""
        part = obj(item, where)
        signature = opt_text(part, "thoughtSignature", where)
        if signature is not None:
            self._close()
            self.blocks.append(ThinkingBlock("", signature, None, "gemini"))
        call = part.get("functionCall")
        if call is not None:
            self._close()
            function = obj(call, f"{where}.functionCall")
            name = text(function, "name", f"{where}.functionCall")
            if not name:
                raise WireError(f"{where}.functionCall.name: missing")
            args = function.get("args")
            arguments = {} if args is None else check_depth(args, f"{where}.functionCall.args")
            call_id = opt_text(function, "id", f"{where}.functionCall") or f"{GENERATED_ID_PREFIX}{next(_ids)}"
            self.blocks.append(ToolCall(call_id, name, arguments))
            self.calls = True
            return None
        inline = part.get("inlineData")
        if inline is not None:
            self._close()
            self.blocks.append(_image(inline, f"{where}.inlineData"))
            return None
        piece = part.get("text")
        if piece is None:
            return None  # executableCode, codeExecutionResult, fileData... : not represented
        piece = text(part, "text", where)
        if not piece:
            return None  # an empty part (a stream's last chunk often is one): nothing to keep
        thought = part.get("thought") is True
        if self.pending is None or self.pending[0] is not thought:
            self._close()
            self.pending = (thought, [])
        self.pending[1].append(piece)
        return ThinkingDelta(piece) if thought else TextDelta(piece)

    def finish(self) -> tuple[ContentBlock, ...]:
        self._close()
        return tuple(self.blocks)


def _image(value: Any, where: str) -> ImageBlock:
    """An ``inlineData`` part the model produced: a media type and base64 data, both non-empty strings.

    A part missing either (``{}``, ``{"mimeType": ""}``) is a :class:`WireError`, not an
    image with empty fields that the next request would send back for the server to refuse.
    """
    inline = obj(value, where)
    media_type = text(inline, "mimeType", where)
    data = text(inline, "data", where)
    if not media_type or not data:
        raise WireError(f"{where}.{'data' if media_type else 'mimeType'}: missing")
    return ImageBlock(media_type, data)


def _candidate(body: dict[str, Any], where: str) -> dict[str, Any] | None:
    candidates = array(body, "candidates", where)
    if not candidates:
        return None
    return obj(candidates[0], f"{where}.candidates[0]")


def _content_parts(candidate: dict[str, Any], where: str) -> list[Any]:
    return array(opt_obj(candidate, "content", where), "parts", f"{where}.content")


class GeminiModel(HttpModel):
    """A Gemini model over ``generateContent``. Options: see :class:`~condukt.providers.HttpModel`."""

    path = f"/{API_VERSION}/models"
    protocol = "Gemini generateContent"

    def __init__(self, model: str, **options: Any) -> None:
        options.setdefault("provider", "gemini")
        super().__init__(model, **options)
        self._messages: WireCache[_Encoded] = WireCache(_encode_message)

    def endpoint_path(self) -> str:
        """``/v1beta/models/{model}:generateContent``, or ``:streamGenerateContent?alt=sse`` when streaming."""
        method = "streamGenerateContent?alt=sse" if self.stream else "generateContent"
        return f"{self.path}/{self.model}:{method}"

    def document_problem(self, block: DocumentBlock) -> str | None:
        """PDF and ``text/*`` documents only (Gemini reads the text formats as plain text)."""
        return problem(block, needs_text=False)

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``x-goog-api-key``."""
        return {"x-goog-api-key": api_key} if api_key else {}

    def _thinking(self, level: str) -> dict[str, Any] | None:
        if level == "off" or level not in THINKING_BUDGETS:
            return None
        if self.model.startswith("gemini-3"):
            return {"thinkingLevel": THINKING_LEVELS[level], "includeThoughts": True}
        return {"thinkingBudget": THINKING_BUDGETS[level], "includeThoughts": True}

    def encode_head(self, request: ModelRequest) -> bytes:
        """System instruction, tools and generation settings: everything before ``contents``."""
        head: dict[str, Any] = {}
        if request.system_prompt:
            head["systemInstruction"] = {"parts": [{"text": request.system_prompt}]}
        if request.tools:
            head["tools"] = [
                {
                    "functionDeclarations": [
                        {"name": tool.name, "description": tool.description, "parametersJsonSchema": tool.parameters}
                        for tool in request.tools
                    ]
                }
            ]
        config: dict[str, Any] = {}
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            config["maxOutputTokens"] = max_tokens
        thinking = self._thinking(request.thinking_level)
        if thinking is not None:
            config["thinkingConfig"] = thinking
        settings = request.settings
        if settings is not None:
            if settings.temperature is not None:
                config["temperature"] = settings.temperature
            if settings.top_p is not None:
                config["topP"] = settings.top_p
            if settings.stop is not None:
                config["stopSequences"] = list(settings.stop)
            if settings.seed is not None:
                config["seed"] = settings.seed
        if config:
            head["generationConfig"] = config
        head.update(self.extra_body)
        if not head:
            return b'{"contents":['
        return dumps(head)[:-1] + b',"contents":['

    def encode_request(self, request: ModelRequest) -> bytes:
        """The body: the conversation as ``contents``, consecutive turns of one role merged
        (a turn's tool results go back together, as the API requires)."""
        contents: list[bytes] = []
        role: str | None = None
        parts: list[dict[str, Any]] = []
        for message_role, message_parts in self._messages.encode_all(request.messages):
            if not message_parts:
                continue
            if message_role != role:
                if parts:
                    contents.append(dumps({"role": role, "parts": parts}))
                role, parts = message_role, []
            parts.extend(message_parts)
        if parts:
            contents.append(dumps({"role": role, "parts": parts}))
        return self.head(request) + b",".join(contents) + b"]}"

    def parse_response(self, payload: Any) -> AssistantMessage:
        """A ``GenerateContentResponse`` as an :class:`AssistantMessage` (:class:`WireError` if it is not one)."""
        body = obj(payload, "response")
        if "error" in body and "candidates" not in body:  # an error body sent with a 200
            raise self.error_event(body)
        usage = _usage(opt_obj(body, "usageMetadata", "response"), "usageMetadata")
        model = text(body, "modelVersion", "response") or self.model
        candidate = _candidate(body, "response")
        if candidate is None:
            if _blocked(body):
                return AssistantMessage((), usage, StopReason.CONTENT_FILTER, model)
            raise WireError("response.candidates: missing")
        collected = _Parts()
        for i, item in enumerate(_content_parts(candidate, "candidates[0]")):
            collected.add(item, f"candidates[0].content.parts[{i}]")
        stop = _finish(candidate, "candidates[0]") or StopReason.END_TURN
        if stop is StopReason.END_TURN and collected.calls:
            stop = StopReason.TOOL_USE
        return AssistantMessage(collected.finish(), usage, stop, model)

    def stream_assembler(self) -> StreamAssembler:
        """An assembler for one ``streamGenerateContent`` event stream."""
        return _Stream(self)


class _Stream(StreamAssembler):
    """Each event is a whole response holding the next parts; the last one has the finish reason."""

    __slots__ = ("_model", "_owner", "_parts", "_stop", "_usage")

    def __init__(self, owner: GeminiModel) -> None:
        self._owner = owner
        self._parts = _Parts()
        self._usage = Usage()
        self._stop: StopReason | None = None
        self._model = owner.model

    def take(self, event: ServerSentEvent) -> Sequence[Event]:
        body = obj(loads(event.data), "chunk")
        if "error" in body and "candidates" not in body:
            raise self._owner.error_event(body)
        metadata = body.get("usageMetadata")
        if metadata is not None:  # cumulative: the last one counts
            self._usage = _usage(obj(metadata, "chunk.usageMetadata"), "chunk.usageMetadata")
        self._model = text(body, "modelVersion", "chunk") or self._model
        candidate = _candidate(body, "chunk")
        if candidate is None:
            if _blocked(body):
                self._stop = StopReason.CONTENT_FILTER
            return ()
        deltas: list[Event] = []
        for i, item in enumerate(_content_parts(candidate, "chunk.candidates[0]")):
            delta = self._parts.add(item, f"chunk.candidates[0].content.parts[{i}]")
            if delta is not None:
                deltas.append(delta)
        stop = _finish(candidate, "chunk.candidates[0]")
        if stop is not None:
            self._stop = stop
        return deltas

    def finish(self) -> AssistantMessage:
        stop = self._stop
        if stop is None:
            raise StreamError(self._owner.provider, "the stream ended before a finishReason")
        if stop is StopReason.END_TURN and self._parts.calls:
            stop = StopReason.TOOL_USE
        return AssistantMessage(self._parts.finish(), self._usage, stop, self._model)


def gemini_model(
    model: str, *, api_key: str | None = None, base_url: str | None = None, node: Any = None, **options: Any
) -> GeminiModel:
    """The ``gemini:`` factory: raises :class:`~condukt.providers.MissingApiKey` at once without a key."""
    key = resolve_api_key("gemini", api_key, "GEMINI_API_KEY", required=False) or resolve_api_key(
        "gemini", None, "GOOGLE_API_KEY", required=False
    )
    if key is None:
        raise MissingApiKey("gemini: no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass api_key=...")
    url = base_url or os.environ.get("GEMINI_BASE_URL") or None
    return GeminiModel(model, api_key=key, base_url=url, node=node, **options)


register_provider("gemini", gemini_model, replace=True)
