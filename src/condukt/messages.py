"""Conversation data: messages, content blocks, usage and tool definitions.

Plain frozen attrs classes, shared by every layer above and serialised by the
one converter in :mod:`condukt.serialization`.
"""

from __future__ import annotations

import base64
import enum
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, final

import attrs

__all__ = [
    "AssistantMessage",
    "Citation",
    "DOCUMENT_TYPES",
    "ContentBlock",
    "DocumentBlock",
    "ImageBlock",
    "Message",
    "ProviderBlock",
    "StopReason",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "ToolDefinition",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
]


@attrs.frozen
class Citation:
    """A source the model cited for a text block (web search results, documents, URLs).

    ``kind`` is the provider's own name for it (Anthropic's
    ``web_search_result_location``, ``char_location``, ``page_location``...;
    OpenAI's ``url_citation``); ``cited_text`` the passage quoted, when the
    provider gives it; ``url`` and ``title`` the source, when it has them.
    """

    kind: str
    cited_text: str | None = None
    url: str | None = None
    title: str | None = None


@final
@attrs.frozen
class TextBlock:
    """Plain text, with the :class:`Citation` s the provider attached to it, if any."""

    text: str
    citations: tuple[Citation, ...] = ()


@final
@attrs.frozen
class ImageBlock:
    """An image, base64-encoded. ``media_type`` is e.g. ``"image/png"``."""

    media_type: str
    data: str

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str) -> ImageBlock:
        """Build an image block from raw bytes."""
        return cls(media_type, base64.b64encode(data).decode("ascii"))

    def to_bytes(self) -> bytes:
        """The raw image bytes."""
        return base64.b64decode(self.data)


#: File suffixes :meth:`DocumentBlock.from_path` reads, and their media types:
#: PDF, and plain-text formats (sent as text where a protocol takes text only).
DOCUMENT_TYPES: Mapping[str, str] = {
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "text/xml",
}


def _unicode(title: Any) -> Any:
    """``title`` with lone surrogates (a file name that is not UTF-8, from ``os.listdir``) as U+FFFD.

    JSON can carry one only as an escape that providers refuse ("no low
    surrogate in string"), a 400 for every request of the conversation.
    """
    if type(title) is str and not title.isascii():
        try:
            title.encode("utf-8")
        except UnicodeEncodeError:
            try:
                raw = title.encode("utf-8", "surrogateescape")  # the file name's own bytes
            except UnicodeEncodeError:
                raw = title.encode("utf-8", "surrogatepass")
            return raw.decode("utf-8", "replace")
    return title


@final
@attrs.frozen
class DocumentBlock:
    """A document (a PDF, or a text file), base64-encoded, sent to the model as a file.

    ``media_type`` is e.g. ``"application/pdf"`` or ``"text/plain"``;
    ``title`` names it to the model (Anthropic's document ``title``, the
    OpenAI ``filename``), ``None`` for a generic name; lone surrogates in it
    (a file name that is not UTF-8) become U+FFFD. PDF and ``text/*``
    documents go on every protocol, other types only on the OpenAI
    Responses API: a prompt's is checked before any request
    (:class:`~condukt.providers.UnsupportedContent`), and one a tool
    returned is replaced by a note saying it was not sent.
    """

    media_type: str
    data: str
    title: str | None = attrs.field(default=None, converter=_unicode)

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str, title: str | None = None) -> DocumentBlock:
        """Build a document block from raw bytes."""
        return cls(media_type, base64.b64encode(data).decode("ascii"), title)

    @classmethod
    def from_text(cls, text: str, media_type: str = "text/plain", title: str | None = None) -> DocumentBlock:
        """Build a text document block from ``text`` (encoded as UTF-8)."""
        return cls.from_bytes(text.encode("utf-8"), media_type, title)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], title: str | None = None) -> DocumentBlock:
        """Read the file at ``path``; its media type comes from its suffix (:data:`DOCUMENT_TYPES`).

        ``title`` defaults to the file's name. Raises ``ValueError`` for a
        suffix not in :data:`DOCUMENT_TYPES`, ``TypeError`` for a ``path``
        that is not a ``str`` or path, and ``OSError`` if the file cannot be read.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"a document is a DocumentBlock or a path (str or PathLike), got {type(path).__name__}")
        file = Path(path)
        media_type = DOCUMENT_TYPES.get(file.suffix.lower())
        if media_type is None:
            known = ", ".join(sorted({suffix.lstrip(".") for suffix in DOCUMENT_TYPES}))
            raise ValueError(f"{file} is not a supported document ({known}); build a DocumentBlock for other types")
        return cls.from_bytes(file.read_bytes(), media_type, file.name if title is None else title)

    def to_bytes(self) -> bytes:
        """The raw document bytes."""
        return base64.b64decode(self.data)

    def to_text(self) -> str:
        """The document's bytes decoded as UTF-8 (for a ``text/*`` one); ``ValueError`` if they are not."""
        return self.to_bytes().decode("utf-8")

    @property
    def is_text(self) -> bool:
        """Whether the media type is a ``text/*`` one (its bytes are UTF-8 text)."""
        return self.media_type.startswith("text/")

    @property
    def is_base64(self) -> bool:
        """Whether ``data`` is standard base64 without line breaks, the only form providers take.

        Decodes the whole document: about a millisecond a megabyte.
        """
        try:
            base64.b64decode(self.data, validate=True)
        except ValueError:  # binascii.Error
            return False
        return True


@final
@attrs.frozen
class ThinkingBlock:
    """A model's reasoning. ``signature`` is the provider's opaque token, if any.

    ``redacted`` holds reasoning the provider encrypted instead of showing
    (Anthropic's ``redacted_thinking``; ``thinking`` is then empty): it is
    kept only to be sent back unchanged, as the provider requires.
    ``provider`` names the protocol whose token ``signature`` is when it is
    not Anthropic's (``"gemini"``: a thought signature, which may come with
    no thinking text), so each protocol sends back only its own tokens.
    """

    thinking: str
    signature: str | None = None
    redacted: str | None = None
    provider: str | None = None


@final
@attrs.frozen
class ToolCall:
    """A model's request to run a tool.

    ``arguments`` is the decoded JSON object; if the model sent text that is
    not valid JSON it is that raw string, and the agent reports the error to
    the model instead of calling the tool.
    """

    id: str
    name: str
    arguments: Any = attrs.field(factory=dict)


@final
@attrs.frozen
class ProviderBlock:
    """A block only its provider understands, kept to be sent back to it as it came.

    Anthropic's server tools (``server_tool_use``, ``web_search_tool_result``,
    ``code_execution_tool_result``...) run on Anthropic's side: the agent
    does not run them, but the conversation must carry them. ``data`` is the
    block's JSON text, ``kind`` its ``type``; other providers leave it out.
    """

    provider: str
    kind: str
    data: str


ContentBlock = Union[TextBlock, ImageBlock, ThinkingBlock, ToolCall, ProviderBlock]


@attrs.frozen
class Usage:
    """Token accounting for one response or, summed with ``+``, for a run.

    ``input_tokens`` excludes the prompt tokens read from or written to the
    provider's cache (``cache_read_tokens``, ``cache_write_tokens``), as
    Anthropic counts them. ``cost`` is in US dollars, from the model's
    prices (a maintained price table, or prices given): ``None`` when they
    are not known, rather than a guess. A sum knows its cost only when
    every part with tokens did.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            _sum_cost(self, other),
        )

    @property
    def has_tokens(self) -> bool:
        """Whether any token was counted."""
        return bool(self.input_tokens or self.output_tokens or self.cache_read_tokens or self.cache_write_tokens)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


def _sum_cost(a: Usage, b: Usage) -> float | None:
    """The cost of ``a + b``: unknown when a part with tokens has none; an empty part counts nothing."""
    cost_a, cost_b = a.cost, b.cost
    if cost_a is not None and cost_b is not None:
        return cost_a + cost_b
    if cost_a is None and a.has_tokens or cost_b is None and b.has_tokens:
        return None
    return cost_a if cost_b is None else cost_b


def _text_of(blocks: tuple[Any, ...]) -> str:
    if len(blocks) == 1:  # the usual message: no generator, no join
        block = blocks[0]
        return block.text if type(block) is TextBlock else ""
    return "".join(block.text for block in blocks if type(block) is TextBlock)


@final
@attrs.frozen
class UserMessage:
    """What the user (or a steer / follow-up) said."""

    content: tuple[TextBlock | ImageBlock | DocumentBlock, ...]

    @property
    def role(self) -> Literal["user"]:
        """Always ``"user"``."""
        return "user"

    @property
    def text(self) -> str:
        """The text blocks joined."""
        return _text_of(self.content)

    @classmethod
    def from_text(cls, text: str, images: tuple[ImageBlock | DocumentBlock, ...] = ()) -> UserMessage:
        """A message with ``text`` followed by ``images`` (and documents)."""
        return cls((TextBlock(text), *images))


class StopReason(enum.StrEnum):
    """Why a model stopped: every provider's stop or finish reason maps to one of these.

    A ``str`` enum, so ``message.stop_reason == "end_turn"`` holds and it
    serialises as its value. Provider values: Anthropic's ``stop_reason``
    is used as is; OpenAI's ``finish_reason`` ``stop`` is ``END_TURN``,
    ``tool_calls``/``function_call`` ``TOOL_USE``, ``length``
    ``MAX_TOKENS``, ``content_filter`` ``CONTENT_FILTER``; a message carrying
    an OpenAI ``refusal`` is ``REFUSAL``. A value no provider documents is ``OTHER``.
    An HTTP provider raises :class:`~condukt.providers.ModelRefused` instead of
    returning a ``REFUSAL`` or ``CONTENT_FILTER`` message.
    """

    #: The model finished its answer.
    END_TURN = "end_turn"
    #: The model asked for tools.
    TOOL_USE = "tool_use"
    #: The output cap (``max_tokens``) cut the answer.
    MAX_TOKENS = "max_tokens"
    #: A stop sequence ended the answer.
    STOP_SEQUENCE = "stop_sequence"
    #: Anthropic paused a long server-tool turn; sending the message back resumes it.
    PAUSE_TURN = "pause_turn"
    #: The model declined to answer.
    REFUSAL = "refusal"
    #: The provider's content filter withheld (part of) the answer.
    CONTENT_FILTER = "content_filter"
    #: A reason none of the above covers.
    OTHER = "other"


@final
@attrs.frozen
class AssistantMessage:
    """One complete model response.

    ``stop_reason`` is a :class:`StopReason` when a provider built the
    message (a plain ``str`` equal to one when it was read back from storage).
    """

    content: tuple[ContentBlock, ...]
    usage: Usage = Usage()
    stop_reason: str = "end_turn"
    model: str | None = None

    @property
    def role(self) -> Literal["assistant"]:
        """Always ``"assistant"``."""
        return "assistant"

    @property
    def text(self) -> str:
        """The text blocks joined (thinking excluded)."""
        return _text_of(self.content)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls, in the order the model made them."""
        content = self.content
        if len(content) == 1:  # one block: the content itself, or nothing (no new tuple)
            return content if type(content[0]) is ToolCall else ()  # type: ignore[return-value]
        return tuple(block for block in content if type(block) is ToolCall)


@final
@attrs.frozen
class ToolResultMessage:
    """The outcome of one tool call, sent back to the model."""

    tool_call_id: str
    name: str
    content: tuple[TextBlock | ImageBlock | DocumentBlock, ...]
    is_error: bool = False

    @property
    def role(self) -> Literal["tool"]:
        """Always ``"tool"``."""
        return "tool"

    @property
    def text(self) -> str:
        """The text blocks joined."""
        return _text_of(self.content)


Message = Union[UserMessage, AssistantMessage, ToolResultMessage]


@attrs.frozen
class ToolDefinition:
    """What the model is told about a tool: name, description, JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]
