"""The OpenAI Responses API (``POST {base_url}/responses``): ``"openai-responses:<model>"``.

The same key (``api_key=`` or ``OPENAI_API_KEY``) and base URL
(``base_url=``, ``OPENAI_BASE_URL`` or ``https://api.openai.com/v1``) as
``openai:``. Requests are stateless, as every condukt protocol is: the whole
conversation goes as ``input`` each turn with ``"store": false``, so
nothing is kept on OpenAI's side.

The wire format, from the public API reference:

- The system prompt is ``instructions``; user messages are ``input_text``,
  ``input_image`` (``data:`` URL) and ``input_file`` (``filename`` and
  ``file_data``, a ``data:`` URL) parts; documents of any media type are
  sent (the API takes PDF, text, code and office files); the model's text
  goes back as an assistant message, its tool calls as ``function_call``
  items and the results as ``function_call_output`` items (images and
  documents a tool returned follow in one user message, as the output is text).
- Tools are ``{"type": "function", "name", "description", "parameters",
  "strict": false}`` (the API's default is strict, which rejects most
  ordinary JSON schemas).
- ``thinking_level`` other than ``off`` sends ``reasoning: {"effort",
  "summary": "auto"}`` and asks for ``reasoning.encrypted_content``: the
  reasoning items come back as :class:`~condukt.messages.ThinkingBlock`
  (summary as ``thinking``, item id as ``signature``, the encrypted content as
  ``redacted``, ``provider="openai-responses"``) and are sent back in later
  turns, as reasoning models need during tool use without stored state.
- ``status``: ``completed`` is ``end_turn`` (``tool_use`` with function
  calls); ``incomplete`` with ``max_output_tokens`` is ``max_tokens``, with
  ``content_filter`` ``content_filter``; a ``refusal`` content part is
  ``refusal`` (both raise :class:`~condukt.providers.ModelRefused`); a
  ``failed`` response raises its error.
- Streams are named events (``response.output_text.delta``,
  ``response.reasoning_summary_text.delta``, ``response.output_item.done``,
  ``response.completed``...); the message is built from the final response,
  or from the finished items when a server leaves its output out.
- ``output_text`` annotations (``url_citation``...) become the text block's
  :class:`~condukt.messages.Citation` s.
- Usage: ``input_tokens`` less ``input_tokens_details.cached_tokens`` is input,
  ``output_tokens`` (reasoning included) output, cached tokens cache reads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..events import Event, TextDelta, ThinkingDelta, ToolCallDelta
from ..messages import (
    AssistantMessage,
    Citation,
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
from ._documents import attachment_words, data_url, filename, note, problem
from ._errors import StreamError
from ._http.keys import resolve_api_key
from ._http.model import HttpModel, StreamAssembler
from ._http.node import DEFAULT_BASE_URLS
from ._http.sse import ServerSentEvent
from ._model import ModelRequest
from ._registry import register_provider
from ._wire import WireCache, WireError, array, count, dumps, loads, obj, opt_obj, opt_text, text, tool_arguments
from .openai import checked_prompt_cache_key

__all__ = ["PROVIDER", "REASONING_EFFORTS", "OpenAIResponsesModel", "openai_responses_model"]

#: The provider prefix, also the ``provider`` of the reasoning blocks this protocol keeps.
PROVIDER = "openai-responses"
#: ``reasoning.effort`` for each ``thinking_level`` (``off``: not sent).
REASONING_EFFORTS = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}

DEFAULT_BASE_URLS[PROVIDER] = "https://api.openai.com/v1"

_Encoded = list[dict[str, Any]]  # the input items of one message


def _image(block: ImageBlock) -> dict[str, Any]:
    return {"type": "input_image", "image_url": f"data:{block.media_type};base64,{block.data}"}


def _file(block: DocumentBlock) -> dict[str, Any]:
    reason = problem(block, needs_text=False, any_type=True)
    if reason is not None:  # only in the history: a new prompt's raised UnsupportedContent
        return {"type": "input_text", "text": note(reason)}
    return {"type": "input_file", "filename": filename(block), "file_data": data_url(block)}


def _part(block: Any) -> dict[str, Any]:
    kind = type(block)
    if kind is TextBlock:
        return {"type": "input_text", "text": block.text}
    return _image(block) if kind is ImageBlock else _file(block)


def _encode_message(message: Any) -> _Encoded:
    kind = type(message)
    if kind is UserMessage:
        parts = [_part(block) for block in message.content if type(block) is not TextBlock or block.text]
        return [{"role": "user", "content": parts}] if parts else []
    if kind is ToolResultMessage:
        attached = [block for block in message.content if type(block) is not TextBlock]
        if not attached:
            return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": message.text}]
        placeholder, noun = attachment_words(attached)
        output = message.text or placeholder
        items: _Encoded = [{"type": "function_call_output", "call_id": message.tool_call_id, "output": output}]
        caption_text = f"{noun} returned by tool call {message.tool_call_id} ({message.name}):"
        caption = {"type": "input_text", "text": caption_text}
        items.append({"role": "user", "content": [caption, *(_part(block) for block in attached)]})
        return items
    items = []
    texts: list[str] = []
    for block in message.content:
        block_kind = type(block)
        if block_kind is TextBlock:
            texts.append(block.text)
        elif block_kind is ThinkingBlock:
            # Without stored state a reasoning item is only usable with its encrypted content.
            if block.provider == PROVIDER and block.signature and block.redacted:
                summary = [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
                reasoning = {"type": "reasoning", "id": block.signature, "summary": summary}
                items.append({**reasoning, "encrypted_content": block.redacted})
        elif block_kind is ToolCall:
            if texts:
                items.append({"role": "assistant", "content": "".join(texts)})
                texts = []
            arguments = block.arguments if isinstance(block.arguments, str) else dumps(block.arguments).decode()
            items.append({"type": "function_call", "call_id": block.id, "name": block.name, "arguments": arguments})
    if any(texts):
        items.append({"role": "assistant", "content": "".join(texts)})
    return items


def _usage(data: dict[str, Any], where: str) -> Usage:
    cached = count(opt_obj(data, "input_tokens_details", where), "cached_tokens", f"{where}.input_tokens_details")
    return Usage(max(0, count(data, "input_tokens", where) - cached), count(data, "output_tokens", where), cached, 0)


def _citation(item: Any, where: str) -> Citation:
    """An ``output_text`` annotation (``url_citation``, ``file_citation``...) as a :class:`Citation`."""
    data = obj(item, where)
    return Citation(
        text(data, "type", where) or "annotation",
        None,
        opt_text(data, "url", where),
        opt_text(data, "title", where) or opt_text(data, "filename", where),
    )


def _item(item: Any, where: str, blocks: list[ContentBlock]) -> bool:
    """Add one output item's blocks; ``True`` for a refusal."""
    data = obj(item, where)
    kind = text(data, "type", where)
    refused = False
    if kind == "message":
        for i, part in enumerate(array(data, "content", where)):
            part_where = f"{where}.content[{i}]"
            content = obj(part, part_where)
            part_kind = text(content, "type", part_where)
            if part_kind == "output_text":
                citations = tuple(
                    _citation(annotation, f"{part_where}.annotations[{j}]")
                    for j, annotation in enumerate(array(content, "annotations", part_where))
                )
                blocks.append(TextBlock(text(content, "text", part_where), citations))
            elif part_kind == "refusal":
                blocks.append(TextBlock(text(content, "refusal", part_where)))
                refused = True
    elif kind == "function_call":
        call_id = opt_text(data, "call_id", where)
        name = opt_text(data, "name", where)
        if call_id is None or name is None:
            raise WireError(f"{where}: a function_call without {'a call_id' if call_id is None else 'a name'}")
        blocks.append(ToolCall(call_id, name, tool_arguments(text(data, "arguments", where), f"{where}.arguments")))
    elif kind == "reasoning":
        summary = "\n\n".join(
            text(obj(part, f"{where}.summary[{i}]"), "text", f"{where}.summary[{i}]")
            for i, part in enumerate(array(data, "summary", where))
        )
        item_id = opt_text(data, "id", where)
        encrypted = opt_text(data, "encrypted_content", where)
        if summary or item_id:
            blocks.append(ThinkingBlock(summary, item_id, encrypted, PROVIDER))
    # web_search_call, file_search_call and item types added later: not represented
    return refused


def _message(owner: OpenAIResponsesModel, body: dict[str, Any], items: list[Any] | None = None) -> AssistantMessage:
    """The message of a whole ``response`` object (``items``: the streamed ones, if its output is empty)."""
    status = text(body, "status", "response")
    if status == "failed":
        error = body.get("error")
        raise owner.error_event({"error": error} if type(error) is dict else {"message": "the response failed"})
    output = array(body, "output", "response") or items or []
    blocks: list[ContentBlock] = []
    refused = False
    for i, item in enumerate(output):
        refused = _item(item, f"output[{i}]", blocks) or refused
    calls = any(type(block) is ToolCall for block in blocks)
    if refused:
        stop = StopReason.REFUSAL
    elif status == "incomplete":
        reason = text(opt_obj(body, "incomplete_details", "response"), "reason", "response.incomplete_details")
        stop = {"max_output_tokens": StopReason.MAX_TOKENS, "content_filter": StopReason.CONTENT_FILTER}.get(
            reason, StopReason.OTHER
        )
    else:
        stop = StopReason.TOOL_USE if calls else StopReason.END_TURN
    return AssistantMessage(
        tuple(blocks),
        _usage(opt_obj(body, "usage", "response"), "usage"),
        stop,
        text(body, "model", "response") or owner.model,
    )


class OpenAIResponsesModel(HttpModel):
    """An OpenAI model over the Responses API. Options: see :class:`~condukt.providers.HttpModel`."""

    path = "/responses"
    protocol = "the OpenAI Responses API"

    def __init__(self, model: str, *, prompt_cache_key: str | None = None, **options: Any) -> None:
        options.setdefault("provider", PROVIDER)
        super().__init__(model, **options)
        #: Sent as ``prompt_cache_key``: requests sharing it are routed to share OpenAI's prompt cache.
        self.prompt_cache_key = checked_prompt_cache_key(prompt_cache_key)
        self._messages: WireCache[_Encoded] = WireCache(_encode_message)

    def document_problem(self, block: DocumentBlock) -> str | None:
        """Documents of every media type, as long as their data is base64."""
        return problem(block, needs_text=False, any_type=True)

    def setting_problem(self, name: str, request: ModelRequest) -> str | None:
        """No ``stop`` and no ``seed``: the Responses API has neither."""
        if name in ("stop", "seed"):
            return f"the API has no {name} setting"
        return None

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``Authorization: Bearer``."""
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def encode_head(self, request: ModelRequest) -> bytes:
        """Model, instructions, tools, reasoning and the output cap: everything before ``input``."""
        head: dict[str, Any] = {"model": self.model, "store": False}
        if self.stream:
            head["stream"] = True
        if request.system_prompt:
            head["instructions"] = request.system_prompt
        if request.tools:
            head["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": False,
                }
                for tool in request.tools
            ]
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            head["max_output_tokens"] = max_tokens
        effort = REASONING_EFFORTS.get(request.thinking_level)
        if effort is not None:
            head["reasoning"] = {"effort": effort, "summary": "auto"}
            head["include"] = ["reasoning.encrypted_content"]
        if self.prompt_cache_key is not None:
            head["prompt_cache_key"] = self.prompt_cache_key
        settings = request.settings
        if settings is not None:
            if settings.temperature is not None:
                head["temperature"] = settings.temperature
            if settings.top_p is not None:
                head["top_p"] = settings.top_p
        head.update(self.extra_body)
        return dumps(head)[:-1] + b',"input":['

    def encode_request(self, request: ModelRequest) -> bytes:
        """The body: the conversation as ``input`` items."""
        items = [dumps(item) for encoded in self._messages.encode_all(request.messages) for item in encoded]
        return self.head(request) + b",".join(items) + b"]}"

    def parse_response(self, payload: Any) -> AssistantMessage:
        """A ``response`` object as an :class:`AssistantMessage` (:class:`WireError` if it is not one)."""
        body = obj(payload, "response")
        if body.get("error") is not None and "output" not in body:  # an error body sent with a 200
            raise self.error_event(body)
        return _message(self, body)

    def stream_assembler(self) -> StreamAssembler:
        """An assembler for one Responses API event stream."""
        return _Stream(self)


_NOTHING: tuple[Event, ...] = ()
_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


class _Stream(StreamAssembler):
    """Deltas as they come; the message from the final ``response`` (or the finished items)."""

    __slots__ = ("_calls", "_items", "_message", "_owner")

    def __init__(self, owner: OpenAIResponsesModel) -> None:
        self._owner = owner
        self._items: dict[int, Any] = {}
        self._message: AssistantMessage | None = None
        #: Function calls as they start, by output index: (call id, name), for their argument deltas.
        self._calls: dict[int, tuple[str, str]] = {}

    def take(self, event: ServerSentEvent) -> Sequence[Event]:
        data = obj(loads(event.data), event.event or "event")
        kind = text(data, "type", "event") or event.event
        if kind == "response.output_text.delta":
            piece = text(data, "delta", kind)
            return (TextDelta(piece),) if piece else _NOTHING
        if kind == "response.reasoning_summary_text.delta":
            piece = text(data, "delta", kind)
            return (ThinkingDelta(piece),) if piece else _NOTHING
        if kind == "response.function_call_arguments.delta":
            index = data.get("output_index")
            piece = text(data, "delta", kind)
            started = self._calls.get(index) if type(index) is int else None
            if started is None or not piece:
                return _NOTHING
            return (ToolCallDelta(index, started[0], started[1], piece),)  # type: ignore[arg-type]
        if kind == "response.output_item.added":
            index = data.get("output_index")
            item = data.get("item")
            if type(index) is int and type(item) is dict and item.get("type") == "function_call":
                self._calls[index] = (str(item.get("call_id") or ""), str(item.get("name") or ""))
            return _NOTHING
        if kind == "response.output_item.done":
            index = data.get("output_index")
            if type(index) is not int or index.bit_length() > 32:
                raise WireError(f"{kind}.output_index: expected an item index")
            self._items[index] = obj(data.get("item"), f"{kind}.item")
        elif kind in _FINAL:
            items = [self._items[index] for index in sorted(self._items)]
            self._message = _message(self._owner, obj(data.get("response"), f"{kind}.response"), items)
        elif kind == "error":
            error = {"type": data.get("code"), "code": data.get("code"), "message": data.get("message")}
            raise self._owner.error_event({"error": error})
        # response.created, *.added, *.done of parts, refusal and argument deltas: the final response has them.
        return _NOTHING

    def finish(self) -> AssistantMessage:
        if self._message is None:
            raise StreamError(self._owner.provider, "the stream ended before response.completed")
        return self._message


def openai_responses_model(
    model: str, *, api_key: str | None = None, base_url: str | None = None, node: Any = None, **options: Any
) -> OpenAIResponsesModel:
    """The ``openai-responses:`` factory: raises :class:`~condukt.providers.MissingApiKey` at once without a key."""
    key = resolve_api_key(PROVIDER, api_key, "OPENAI_API_KEY")
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    return OpenAIResponsesModel(model, api_key=key, base_url=url, node=node, **options)


register_provider(PROVIDER, openai_responses_model, replace=True)
