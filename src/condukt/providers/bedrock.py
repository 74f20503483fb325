"""AWS Bedrock's Converse API: ``"bedrock:<model id>"`` (``bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0``).

From the Bedrock API reference (``Converse``, ``ConverseStream``) and AWS's
Signature Version 4 and event stream encoding pages:

- ``POST {base}/model/{modelId}/converse``, or ``/converse-stream`` when
  streaming; ``{base}`` is ``https://bedrock-runtime.{region}.amazonaws.com``
  (``base_url=`` replaces it); the model id (a model, an inference profile
  or an ARN) is percent-encoded in the path.
- The region: ``region=``, else ``AWS_REGION``, ``AWS_DEFAULT_REGION``, or
  the profile's ``region`` in ``~/.aws/config``.
- Authentication: a Bedrock API key as a bearer token (``api_key=`` or
  ``AWS_BEARER_TOKEN_BEDROCK``), else SigV4 signatures made by botocore's
  signer (the ``[bedrock]`` extra) from ``credentials=`` (botocore
  credentials), ``aws_access_key_id=``/``aws_secret_access_key=``/``aws_session_token=``,
  or botocore's credential chain (environment, ``profile=`` or
  ``AWS_PROFILE``, SSO, container and instance roles). The chain is
  searched, and temporary credentials renewed, in a worker thread before a
  request (never at agent start: it may ask the instance metadata
  service); nothing found, or credentials that expired and cannot be
  renewed, is :class:`~condukt.providers.MissingCredentials`, and no
  request is sent. Each attempt is signed anew (``X-Amz-Date``,
  ``Authorization``, ``X-Amz-Security-Token``).
- Body: ``system`` text blocks, ``messages`` (``user``/``assistant``,
  consecutive user-side messages merged) of ``text``, ``image``
  (``format`` and base64 ``source.bytes``), ``document`` (``format``:
  pdf, csv, doc, docx, xls, xlsx, html, txt, md; a ``name`` made of the
  characters the API allows), ``toolUse`` and ``toolResult`` (``status``
  ``error`` for a failed tool) blocks, ``reasoningContent`` sent back as
  it came (text with its signature, or redacted content; only Bedrock's
  own, tagged ``provider="bedrock"``); ``toolConfig.tools`` of
  ``toolSpec`` with ``inputSchema.json``; ``inferenceConfig``
  (``maxTokens``, ``temperature``, ``topP``, ``stopSequences``; no seed).
  ``thinking_level`` turns on Claude's extended thinking
  (``additionalModelRequestFields.thinking``, the budgets of
  :data:`~condukt.providers.anthropic.THINKING_BUDGETS`) for Anthropic
  models; other models get no thinking settings. ``prompt_cache``
  (``False`` by default: only some models take it) adds ``cachePoint``
  blocks after the system prompt, the tools and/or the conversation.
  ``extra_body`` adds top-level fields (``guardrailConfig``,
  ``additionalModelRequestFields``...).
- Responses: ``output.message.content`` blocks, ``stopReason``
  (``guardrail_intervened`` and ``content_filtered`` raise
  :class:`~condukt.providers.ModelRefused`), ``usage`` (``inputTokens``,
  ``outputTokens``, ``cacheReadInputTokens``, ``cacheWriteInputTokens``).
  Streams are ``application/vnd.amazon.eventstream`` frames
  (:class:`FrameDecoder` checks each frame's prelude and message CRC32; a
  mismatch is :class:`~condukt.providers.CorruptFrame`):
  ``messageStart``, ``contentBlockStart``/``Delta``/``Stop``,
  ``messageStop``, ``metadata``, or an exception frame
  (``throttlingException``...).
- Errors: the type in the ``x-amzn-ErrorType`` header (or ``__type``), the
  message in the body's ``message``. ``ThrottlingException`` and
  ``ModelNotReadyException`` (429) are :class:`~condukt.providers.RateLimited`,
  ``ServiceUnavailableException`` (503), ``InternalServerException`` and
  ``ModelTimeoutException`` are :class:`~condukt.providers.ProviderUnavailable`,
  all retried; ``ValidationException`` (an unknown model id too),
  ``ResourceNotFoundException`` and ``ModelErrorException`` are
  :class:`~condukt.providers.InvalidRequest`; ``AccessDeniedException``,
  ``UnrecognizedClientException``, ``ExpiredTokenException`` are
  :class:`~condukt.providers.AuthenticationFailed`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import struct
import time
import zlib
from collections.abc import Collection, Sequence
from typing import Any
from urllib.parse import quote

import httpx
import trio

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
from ._documents import note
from ._errors import CorruptFrame, MissingCredentials, StreamError
from ._http.errors import error_for_type
from ._http.keys import resolve_api_key
from ._http.model import HttpModel, StreamAssembler
from ._http.node import DEFAULT_BASE_URLS
from ._model import ModelRequest
from ._registry import register_provider
from ._wire import WireCache, WireError, check_depth, count, dumps, loads, obj, opt_obj, text, tool_arguments
from .anthropic import DEFAULT_MAX_TOKENS, MIN_THINKING_BUDGET, THINKING_BUDGETS

__all__ = [
    "DOCUMENT_FORMATS",
    "FrameDecoder",
    "IMAGE_FORMATS",
    "PROVIDER",
    "STOP_REASONS",
    "BedrockModel",
    "bedrock_model",
]

#: The provider prefix, also the ``provider`` of the reasoning blocks this protocol keeps.
PROVIDER = "bedrock"
#: The signing name of the Bedrock runtime in SigV4 credential scopes.
SERVICE = "bedrock"
#: An image's ``format`` for each media type the API takes.
IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
#: A document's ``format`` for each media type the API takes (any other ``text/*`` goes as ``txt``).
DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}
#: ``stopReason`` -> :class:`StopReason` (any other value is ``OTHER``).
STOP_REASONS: dict[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "guardrail_intervened": StopReason.CONTENT_FILTER,
    "content_filtered": StopReason.CONTENT_FILTER,
}
#: The places ``prompt_cache`` takes.
CACHE_PLACES = ("system", "tools", "messages")
HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_PROFILE, or"
    " AWS_BEARER_TOKEN_BEDROCK; or pass credentials=... or api_key=..."
)
_CACHE_POINT = {"cachePoint": {"type": "default"}}
_REGION = re.compile(r"^[a-z0-9-]+$")
#: A document ``name`` may hold letters, digits, single spaces, hyphens, parentheses and square brackets.
_NAME_DROPPED = re.compile(r"[^A-Za-z0-9\s\-()\[\]]")
_SPACES = re.compile(r"\s+")

DEFAULT_BASE_URLS[PROVIDER] = "https://bedrock-runtime.us-east-1.amazonaws.com"


def _document_name(block: DocumentBlock) -> str:
    name = _SPACES.sub(" ", _NAME_DROPPED.sub(" ", block.title or "")).strip()[:200]
    if name:
        return name
    # Names must tell documents apart: the same data gets the same name.
    return "document " + hashlib.sha256(block.data.encode("ascii", "replace")).hexdigest()[:8]


def _document_problem(block: DocumentBlock) -> str | None:
    if block.media_type not in DOCUMENT_FORMATS and not block.is_text:
        formats = ", ".join(sorted(set(DOCUMENT_FORMATS.values())))
        title = f"the document {block.title!r}" if block.title else "a document"
        return f"{title} has media type {block.media_type!r}: Bedrock takes {formats}"
    if not block.is_base64:
        return f"{f'the document {block.title!r}' if block.title else 'a document'} is not base64 data"
    return None


def _image(block: ImageBlock) -> dict[str, Any]:
    fmt = IMAGE_FORMATS.get(block.media_type)
    if fmt is None:
        return {"text": note(f"an image of type {block.media_type!r}, which Bedrock does not take")}
    return {"image": {"format": fmt, "source": {"bytes": block.data}}}


def _document(block: DocumentBlock) -> dict[str, Any]:
    reason = _document_problem(block)
    if reason is not None:  # only in the history: a new prompt's raised UnsupportedContent
        return {"text": note(reason)}
    fmt = DOCUMENT_FORMATS.get(block.media_type, "txt")
    return {"document": {"format": fmt, "name": _document_name(block), "source": {"bytes": block.data}}}


def _user_blocks(blocks: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        kind = type(block)
        if kind is TextBlock:
            if block.text:  # the API refuses blank text blocks
                out.append({"text": block.text})
        elif kind is ImageBlock:
            out.append(_image(block))
        elif kind is DocumentBlock:
            out.append(_document(block))
    return out


_Encoded = tuple[str, list[dict[str, Any]]]  # (role, content blocks)


def _encode_message(message: Any) -> _Encoded:
    kind = type(message)
    if kind is ToolResultMessage:
        content = _user_blocks(message.content) or [{"text": "(no output)"}]
        result = {"toolUseId": message.tool_call_id, "content": content}
        result["status"] = "error" if message.is_error else "success"
        return "user", [{"toolResult": result}]
    if kind is UserMessage:
        return "user", _user_blocks(message.content)
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        block_kind = type(block)
        if block_kind is TextBlock:
            if block.text:
                blocks.append({"text": block.text})
        elif block_kind is ToolCall:
            arguments = block.arguments if isinstance(block.arguments, dict) else {}
            blocks.append({"toolUse": {"toolUseId": block.id, "name": block.name, "input": arguments}})
        elif block_kind is ThinkingBlock:
            if block.provider != PROVIDER:
                continue  # another protocol's token means nothing here
            if block.redacted:
                blocks.append({"reasoningContent": {"redactedContent": block.redacted}})
            elif block.signature:
                reasoning = {"text": block.thinking, "signature": block.signature}
                blocks.append({"reasoningContent": {"reasoningText": reasoning}})
        elif block_kind is ImageBlock:
            blocks.append(_image(block))
    return "assistant", blocks


def _usage(data: dict[str, Any], where: str) -> Usage:
    return Usage(
        count(data, "inputTokens", where),
        count(data, "outputTokens", where),
        count(data, "cacheReadInputTokens", where),
        count(data, "cacheWriteInputTokens", where),
    )


def _stop_reason(value: str) -> StopReason:
    return STOP_REASONS.get(value, StopReason.OTHER) if value else StopReason.END_TURN


def _required(data: dict[str, Any], key: str, where: str) -> str:
    value = text(data, key, where)
    if not value:
        raise WireError(f"{where}.{key}: missing")
    return value


def _content_block(item: Any, where: str) -> ContentBlock | None:
    block = obj(item, where)
    if "text" in block:
        return TextBlock(text(block, "text", where))
    if "toolUse" in block:
        use = obj(block["toolUse"], f"{where}.toolUse")
        value = use.get("input")
        arguments = {} if value is None else check_depth(value, f"{where}.toolUse.input")
        return ToolCall(
            _required(use, "toolUseId", f"{where}.toolUse"), _required(use, "name", f"{where}.toolUse"), arguments
        )
    if "reasoningContent" in block:
        reasoning = obj(block["reasoningContent"], f"{where}.reasoningContent")
        redacted = text(reasoning, "redactedContent", f"{where}.reasoningContent")
        if redacted:
            return ThinkingBlock("", None, redacted, PROVIDER)
        body = opt_obj(reasoning, "reasoningText", f"{where}.reasoningContent")
        where = f"{where}.reasoningContent.reasoningText"
        return ThinkingBlock(text(body, "text", where), text(body, "signature", where) or None, None, PROVIDER)
    return None  # citationsContent, guardContent, images...: not represented


class _Credentials:
    """SigV4 credentials: given, or botocore's chain searched in a worker thread; renewed when they expire."""

    __slots__ = ("_credentials", "_lock", "_profile", "_searched", "last")

    def __init__(self, credentials: Any, profile: str | None) -> None:
        #: The frozen credentials the last request was signed with (for redaction).
        self.last: Any = None
        self._credentials = credentials
        self._profile = profile
        self._searched = credentials is not None
        self._lock = trio.Lock()

    async def frozen(self) -> Any:
        """Credentials to sign one request with (``access_key``, ``secret_key``, ``token``).

        Raises :class:`~condukt.providers.MissingCredentials` when none can
        be had; cancellable (a search or renewal in a thread is abandoned).
        """
        credentials = self._credentials
        if credentials is not None and not _needs_refresh(credentials):
            self.last = credentials.get_frozen_credentials()
            return self.last
        async with self._lock:
            try:
                self.last = await trio.to_thread.run_sync(self._frozen_blocking, abandon_on_cancel=True)
                return self.last
            except MissingCredentials:
                raise
            except Exception as exc:  # botocore's credential errors share no base class worth naming
                message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                raise MissingCredentials(
                    f"bedrock: the AWS credentials could not be had or renewed ({type(exc).__name__}: {message});"
                    f" {HINT}"
                ) from None

    def _frozen_blocking(self) -> Any:
        if not self._searched:
            import botocore.session  # the [bedrock] extra; slow to import: in this thread

            session = botocore.session.Session(profile=self._profile)
            self._credentials = session.get_credentials()
            self._searched = True
        credentials = self._credentials
        if credentials is None:
            raise MissingCredentials(f"bedrock: no AWS credentials found; {HINT}")
        frozen = credentials.get_frozen_credentials()
        if not frozen.access_key or not frozen.secret_key:
            raise MissingCredentials(f"bedrock: the AWS credentials are incomplete; {HINT}")
        expiry = getattr(credentials, "_expiry_time", None)
        if expiry is not None and expiry.timestamp() <= time.time():
            raise MissingCredentials(f"bedrock: the AWS credentials expired and could not be renewed; {HINT}")
        return frozen


def _needs_refresh(credentials: Any) -> bool:
    refresh_needed = getattr(credentials, "refresh_needed", None)
    return bool(refresh_needed()) if refresh_needed is not None else False


class BedrockModel(HttpModel):
    """A model on AWS Bedrock over the Converse API. Options: see the module docstring and
    :class:`~condukt.providers.lowlevel.HttpModel`.

    Its own: ``region``, ``credentials``, ``profile``, ``aws_access_key_id``,
    ``aws_secret_access_key``, ``aws_session_token``, ``prompt_cache``.
    """

    path = "/model"
    protocol = "Bedrock Converse"
    stream_content_type = b"application/vnd.amazon.eventstream"

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        credentials: Any = None,
        profile: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        prompt_cache: bool | Collection[str] = False,
        **options: Any,
    ) -> None:
        options.setdefault("provider", PROVIDER)
        if not model or any(c.isspace() for c in model):
            raise ValueError(f"bedrock: invalid model id {model!r}")
        profile = profile or os.environ.get("AWS_PROFILE") or None
        #: The AWS region requests go to (and are signed for).
        self.region = _region(region, profile)
        if not options.get("base_url"):
            options["base_url"] = f"https://bedrock-runtime.{self.region}.amazonaws.com"
        self.prompt_cache = _cache_places(prompt_cache)
        api_key = options.get("api_key")
        self._signer: _Credentials | None = None
        if not api_key:
            if importlib.util.find_spec("botocore") is None:
                raise MissingCredentials(
                    "bedrock: SigV4 signing needs botocore: pip install 'condukt[bedrock]', or set"
                    " AWS_BEARER_TOKEN_BEDROCK (a Bedrock API key)"
                )
            if aws_access_key_id or aws_secret_access_key:
                if not (aws_access_key_id and aws_secret_access_key):
                    raise MissingCredentials("bedrock: give both aws_access_key_id and aws_secret_access_key")
                from botocore.credentials import Credentials

                credentials = Credentials(aws_access_key_id, aws_secret_access_key, aws_session_token)
            elif credentials is not None and not callable(getattr(credentials, "get_frozen_credentials", None)):
                raise TypeError(f"bedrock: credentials must be botocore credentials, got {type(credentials).__name__}")
            self._signer = _Credentials(credentials, profile)
        self.signs_requests = self._signer is not None
        super().__init__(model, **options)
        self._messages: WireCache[_Encoded] = WireCache(_encode_message)
        self._url_text = str(self._url)
        self._is_claude = "anthropic." in model

    def endpoint_path(self) -> str:
        """``/model/{modelId}/converse`` or ``/converse-stream``, the id percent-encoded."""
        return f"{self.path}/{quote(self.model, safe='')}/{'converse-stream' if self.stream else 'converse'}"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``Authorization: Bearer <Bedrock API key>`` when there is one (else each request is signed)."""
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    async def request_headers(self, body: bytes) -> Sequence[tuple[bytes, bytes]]:
        """SigV4 headers for this request (``X-Amz-Date``, ``Authorization``, ``X-Amz-Security-Token``).

        Signed by botocore's ``SigV4Auth`` over the method, URL, ``Content-Type``
        and body. Raises :class:`~condukt.providers.MissingCredentials` when
        no credentials can be had (the request is not sent); cancellable.
        """
        signer = self._signer
        if signer is None:
            return ()
        return sign(await signer.frozen(), self.region, self._url_text, body)

    def secret_values(self) -> Sequence[str]:
        """The Bedrock API key, or the secret key and session token of the signing credentials."""
        signer = self._signer
        values = list(super().secret_values())
        if signer is not None and signer.last is not None:
            values.extend(value for value in (signer.last.secret_key, signer.last.token) if value)
        return values

    def document_problem(self, block: DocumentBlock) -> str | None:
        """The formats of :data:`DOCUMENT_FORMATS` and any ``text/*`` (as ``txt``), as base64 data."""
        return _document_problem(block)

    def setting_problem(self, name: str, request: ModelRequest) -> str | None:
        """No ``seed`` (``inferenceConfig`` has none)."""
        if name == "seed":
            return "inferenceConfig has no seed"
        return None

    def describe_error(self, payload: Any, headers: httpx.Headers) -> tuple[str | None, Any, str | None]:
        """The type from ``x-amzn-ErrorType`` (``ThrottlingException:http://...``) or ``__type``; the ``message``."""
        kind = headers.get("x-amzn-errortype", "").partition(":")[0] or None
        message = None
        if type(payload) is dict:
            if kind is None and type(payload.get("__type")) is str:
                kind = payload["__type"].rpartition("#")[2] or None
            for key in ("message", "Message"):
                if type(payload.get(key)) is str:
                    message = payload[key]
                    break
        return kind, None, message

    def _thinking_budget(self, request: ModelRequest) -> tuple[int | None, int | None]:
        max_tokens = request.max_tokens or self.max_tokens
        budget = THINKING_BUDGETS.get(request.thinking_level) if self._is_claude else None
        if budget is None:
            return max_tokens, None
        if max_tokens is None:
            max_tokens = budget + DEFAULT_MAX_TOKENS
        if max_tokens <= budget:
            budget = max_tokens - 1 if max_tokens > MIN_THINKING_BUDGET else None
        return max_tokens, budget

    def encode_head(self, request: ModelRequest) -> bytes:
        """System, tools, inference settings and thinking: everything but ``messages``."""
        head: dict[str, Any] = {}
        if request.system_prompt:
            system: list[dict[str, Any]] = [{"text": request.system_prompt}]
            if "system" in self.prompt_cache:
                system.append(_CACHE_POINT)
            head["system"] = system
        if request.tools:
            tools: list[dict[str, Any]] = [
                {"toolSpec": {"name": t.name, "description": t.description, "inputSchema": {"json": t.parameters}}}
                for t in request.tools
            ]
            if "tools" in self.prompt_cache:
                tools.append(_CACHE_POINT)
            head["toolConfig"] = {"tools": tools}
        config: dict[str, Any] = {}
        max_tokens, budget = self._thinking_budget(request)
        if max_tokens:
            config["maxTokens"] = max_tokens
        settings = request.settings
        if settings is not None:
            if settings.temperature is not None:
                config["temperature"] = settings.temperature
            if settings.top_p is not None:
                config["topP"] = settings.top_p
            if settings.stop is not None:
                config["stopSequences"] = list(settings.stop)
        if config:
            head["inferenceConfig"] = config
        if budget is not None:
            head["additionalModelRequestFields"] = {"thinking": {"type": "enabled", "budget_tokens": budget}}
        head.update(self.extra_body)
        return dumps(head)[:-1] + (b',"messages":[' if head else b'"messages":[')

    def encode_request(self, request: ModelRequest) -> bytes:
        """The Converse body: consecutive messages of one role merged (a turn's tool results go together)."""
        parts: list[bytes] = []
        role: str | None = None
        blocks: list[dict[str, Any]] = []
        for message_role, message_blocks in self._messages.encode_all(request.messages):
            if not message_blocks:
                continue
            if message_role != role:
                if blocks:
                    parts.append(dumps({"role": role, "content": blocks}))
                role, blocks = message_role, []
            blocks.extend(message_blocks)
        if blocks:
            if "messages" in self.prompt_cache:
                blocks = [*blocks, _CACHE_POINT]
            parts.append(dumps({"role": role, "content": blocks}))
        head = self.head(request)
        return head + b",".join(parts) + b"]}"

    def parse_response(self, payload: Any) -> AssistantMessage:
        """A ``Converse`` response body as an :class:`AssistantMessage` (:class:`WireError` if it is not one)."""
        body = obj(payload, "response")
        message = obj(opt_obj(body, "output", "response").get("message"), "output.message")
        content = message.get("content")
        if type(content) is not list:
            raise WireError("output.message.content: expected an array")
        blocks = [_content_block(item, f"output.message.content[{i}]") for i, item in enumerate(content)]
        return AssistantMessage(
            tuple(block for block in blocks if block is not None),
            _usage(opt_obj(body, "usage", "response"), "usage"),
            _stop_reason(text(body, "stopReason", "response")),
            self.model,
        )

    def stream_decoder(self) -> FrameDecoder:
        """An event-stream frame decoder, each frame's CRCs checked (:class:`~condukt.providers.CorruptFrame`)."""
        return FrameDecoder(self.provider)

    def stream_assembler(self) -> StreamAssembler:
        """An assembler for one ``ConverseStream`` event stream."""
        return _Stream(self)


def sign(credentials: Any, region: str, url: str, body: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """The SigV4 headers botocore's signer makes for ``POST url`` with ``body`` as JSON (``bedrock`` service)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(credentials, SERVICE, region).add_auth(request)
    headers = request.headers
    out = [
        (b"X-Amz-Date", headers["X-Amz-Date"].encode("ascii")),
        (b"Authorization", headers["Authorization"].encode("ascii")),
    ]
    token = headers.get("X-Amz-Security-Token")
    if token:
        out.append((b"X-Amz-Security-Token", token.encode("ascii")))
    return tuple(out)


class _Frame:
    """One event-stream message: its name (event or exception type), kind (``event``, ``exception``, ``error``)."""

    __slots__ = ("event", "kind", "payload")

    def __init__(self, event: str, kind: str, payload: bytes) -> None:
        self.event = event
        self.kind = kind
        self.payload = payload


#: The largest frame and headers section the decoder accepts (AWS's limits: 16 MiB, 128 KiB).
MAX_FRAME = 16 * 1024 * 1024
MAX_HEADERS = 128 * 1024
_PRELUDE = struct.Struct(">III")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
#: The size of the value of each fixed-size header type (0, 1: booleans without a value; 6, 7: sized).
_FIXED_VALUES = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


class FrameDecoder:
    """``application/vnd.amazon.eventstream`` frames, cut from a body however it is chunked.

    Each frame is a prelude (total length, headers length, their CRC32), the
    headers (name, type, value), the payload and the CRC32 of all before it,
    big-endian, per AWS's event stream encoding. Both CRCs and the lengths
    are checked: a frame that fails raises :class:`~condukt.providers.CorruptFrame`.

    Written here rather than taken from botocore (whose ``EventStreamBuffer``
    the tests use as the reference decoder) because botocore's parser costs
    several times this one's CPU per frame, enough to put a streamed Bedrock
    answer well past the other protocols' cost (``benchmarks/providers_cloud.py``
    measures both).
    """

    __slots__ = ("_pending", "_provider")

    def __init__(self, provider: str = PROVIDER) -> None:
        self._pending = b""
        self._provider = provider

    def _corrupt(self, what: str) -> CorruptFrame:
        return CorruptFrame(self._provider, f"a corrupt event-stream frame: {what}")

    def feed(self, chunk: bytes) -> list[_Frame]:
        """The frames ``chunk`` completes (it may end anywhere)."""
        data = self._pending + chunk if self._pending else chunk
        view = memoryview(data)
        size = len(data)
        position = 0
        frames: list[_Frame] = []
        crc32 = zlib.crc32
        while size - position >= 12:
            total, headers_length, prelude_crc = _PRELUDE.unpack_from(data, position)
            if crc32(view[position : position + 8]) != prelude_crc:
                raise self._corrupt("prelude CRC32 mismatch")
            if total < 16 or total > MAX_FRAME or headers_length > MAX_HEADERS or headers_length > total - 16:
                raise self._corrupt(f"impossible lengths (total {total}, headers {headers_length})")
            end = position + total
            if end > size:
                break  # the rest of the frame is still to come
            if crc32(view[position : end - 4]) != _U32.unpack_from(data, end - 4)[0]:
                raise self._corrupt("message CRC32 mismatch")
            headers_end = position + 12 + headers_length
            headers = self._headers(data, position + 12, headers_end)
            frames.append(_frame(headers, data[headers_end : end - 4]))
            position = end
        self._pending = data[position:] if position < size else b""
        return frames

    def _headers(self, data: bytes, start: int, end: int) -> dict[str, Any]:
        headers: dict[str, Any] = {}
        at = start
        try:
            while at < end:
                length = data[at]
                name = data[at + 1 : at + 1 + length].decode("utf-8")
                at += 1 + length
                kind = data[at]
                at += 1
                if kind == 7 or kind == 6:
                    size = _U16.unpack_from(data, at)[0]
                    raw = data[at + 2 : at + 2 + size]
                    at += 2 + size
                    value: Any = raw.decode("utf-8") if kind == 7 else raw
                elif kind in _FIXED_VALUES:
                    size = _FIXED_VALUES[kind]
                    value = kind == 0 if size == 0 else int.from_bytes(data[at : at + size], "big", signed=True)
                    at += size
                else:
                    raise self._corrupt(f"unknown header type {kind}")
                headers[name] = value
        except (IndexError, UnicodeDecodeError, struct.error) as exc:
            raise self._corrupt(f"malformed headers ({type(exc).__name__})") from None
        if at != end:
            raise self._corrupt("headers overrun their length")
        return headers


def _frame(headers: dict[str, Any], payload: bytes) -> _Frame:
    kind = headers.get(":message-type", "event")
    if kind == "event":
        return _Frame(str(headers.get(":event-type", "")), "event", payload)
    if kind == "exception":
        return _Frame(str(headers.get(":exception-type", "")), "exception", payload)
    message = dumps({"message": str(headers.get(":error-message", ""))})
    return _Frame(str(headers.get(":error-code", "error")), "error", message)


class _Block:
    __slots__ = ("id", "kind", "name", "parts", "redacted", "signature")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.parts: list[str] = []
        self.id = self.name = ""
        self.signature: str | None = None
        self.redacted: str | None = None


_NOTHING: tuple[Event, ...] = ()


class _Stream(StreamAssembler):
    """``messageStart``, content blocks by ``contentBlockIndex``, ``messageStop``, ``metadata``."""

    __slots__ = ("_blocks", "_done", "_owner", "_stop", "_usage")

    def __init__(self, owner: BedrockModel) -> None:
        self._owner = owner
        self._blocks: dict[int, _Block] = {}
        self._usage = Usage()
        self._stop = StopReason.END_TURN
        self._done = False

    def _index(self, data: dict[str, Any], where: str) -> int:
        index = data.get("contentBlockIndex")
        if type(index) is not int or index.bit_length() > 32:
            raise WireError(f"{where}.contentBlockIndex: expected a block index")
        return index

    def _block(self, index: int, kind: str) -> _Block:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block(kind)
        return block

    def take(self, event: Any) -> Sequence[Event]:
        name = event.event
        if event.kind != "event":
            payload = loads(event.payload) if event.payload else {}
            message = text(payload, "message", name) if type(payload) is dict else ""
            raise error_for_type(self._owner.provider, name or "error", self._owner.redact(message or name))
        data = obj(loads(event.payload), name)
        if name == "contentBlockDelta":
            index = self._index(data, name)
            delta = obj(data.get("delta"), f"{name}.delta")
            where = f"{name}[{index}].delta"
            if "text" in delta:
                piece = text(delta, "text", where)
                self._block(index, "text").parts.append(piece)
                return (TextDelta(piece),) if piece else _NOTHING
            if "toolUse" in delta:
                use = obj(delta["toolUse"], f"{where}.toolUse")
                self._block(index, "toolUse").parts.append(text(use, "input", f"{where}.toolUse"))
            elif "reasoningContent" in delta:
                reasoning = obj(delta["reasoningContent"], f"{where}.reasoningContent")
                block = self._block(index, "reasoning")
                piece = text(reasoning, "text", f"{where}.reasoningContent")
                if piece:
                    block.parts.append(piece)
                    return (ThinkingDelta(piece),)
                signature = text(reasoning, "signature", f"{where}.reasoningContent")
                if signature:
                    block.signature = signature
                redacted = text(reasoning, "redactedContent", f"{where}.reasoningContent")
                if redacted:
                    block.redacted = redacted
        elif name == "contentBlockStart":
            index = self._index(data, name)
            start = opt_obj(data, "start", name)
            if "toolUse" in start:
                use = obj(start["toolUse"], f"{name}.start.toolUse")
                block = self._block(index, "toolUse")
                block.id = _required(use, "toolUseId", f"{name}.start.toolUse")
                block.name = _required(use, "name", f"{name}.start.toolUse")
        elif name == "messageStop":
            self._stop = _stop_reason(text(data, "stopReason", name))
            self._done = True
        elif name == "metadata":
            self._usage = _usage(opt_obj(data, "usage", name), f"{name}.usage")
        # messageStart, contentBlockStop and event types added later need nothing.
        return _NOTHING

    def finish(self) -> AssistantMessage:
        if not self._done:
            raise StreamError(self._owner.provider, "the stream ended before messageStop")
        blocks: list[ContentBlock] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            joined = "".join(block.parts)
            if block.kind == "text":
                blocks.append(TextBlock(joined))
            elif block.kind == "reasoning":
                if block.redacted:
                    blocks.append(ThinkingBlock("", None, block.redacted, PROVIDER))
                else:
                    blocks.append(ThinkingBlock(joined, block.signature, None, PROVIDER))
            else:
                if not block.id or not block.name:
                    raise WireError(f"contentBlock[{index}]: a toolUse without its start")
                arguments = tool_arguments(joined, f"contentBlock[{index}].toolUse.input")
                blocks.append(ToolCall(block.id, block.name, arguments))
        return AssistantMessage(tuple(blocks), self._usage, self._stop, self._owner.model)


def _cache_places(value: Any) -> frozenset[str]:
    if value is True:
        return frozenset(CACHE_PLACES)
    if value is False or value is None:
        return frozenset()
    if isinstance(value, str) or not isinstance(value, Collection):
        raise TypeError(f"prompt_cache takes True, False or a collection of {CACHE_PLACES}, got {value!r}")
    places = frozenset(value)
    unknown = places - set(CACHE_PLACES)
    if unknown:
        raise ValueError(f"prompt_cache: unknown place(s) {sorted(map(str, unknown))} (expected {CACHE_PLACES})")
    return places


def _region(region: str | None, profile: str | None) -> str:
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    if region is None and importlib.util.find_spec("botocore") is not None:
        import botocore.session

        try:
            region = botocore.session.Session(profile=profile).get_config_variable("region") or None
        except Exception:  # a profile that does not exist: no region from it
            region = None
    if region is None:
        raise MissingCredentials("bedrock: no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION) or pass region=...")
    if not _REGION.match(region):
        raise ValueError(f"bedrock: invalid region {region!r}")
    return region


def bedrock_model(
    model: str, *, api_key: str | None = None, base_url: str | None = None, node: Any = None, **options: Any
) -> BedrockModel:
    """The ``bedrock:`` factory: :class:`~condukt.providers.MissingCredentials` at once without a region,
    or without a Bedrock API key when botocore (the ``[bedrock]`` extra) is not installed."""
    key = resolve_api_key(PROVIDER, api_key, "AWS_BEARER_TOKEN_BEDROCK", required=False)
    return BedrockModel(model, api_key=key, base_url=base_url, node=node, **options)


register_provider(PROVIDER, bedrock_model, replace=True)
