"""What every protocol of the server shares: :class:`WireProtocol`, the registry, and :class:`RecordedRequest`.

A protocol module (:mod:`.anthropic`, :mod:`.openai`...) defines one
:class:`WireProtocol` and registers it; the server routes each request to
the first registered protocol whose :meth:`~WireProtocol.matches` takes
its path, and renders its scripted step through it.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from ._steps import Reply

__all__ = ["PROTOCOLS", "RecordedRequest", "WireProtocol", "dumps", "pieces", "protocol_for", "register", "sse"]


def dumps(value: Any) -> bytes:
    """Compact JSON bytes."""
    return json.dumps(value, separators=(",", ":")).encode()


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut into ``size``-character pieces (one empty piece for an empty text)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def sse(event: str, data: dict[str, Any]) -> bytes:
    """A named server-sent event carrying ``data`` as JSON."""
    return b"event: " + event.encode() + b"\ndata: " + dumps(data) + b"\n\n"


class WireProtocol:
    """How the server speaks one provider protocol: which paths are its, how it renders a step.

    The defaults fit a JSON protocol whose body says ``"stream": true`` and
    ``"model"``, streaming server-sent events; a protocol module overrides
    what differs.
    """

    #: The protocol's name, as :attr:`RecordedRequest.protocol` holds it.
    name: str = "?"
    #: The body field that holds the conversation.
    messages_key: str = "messages"
    #: The ``type`` of the parts that carry a document.
    document_types: tuple[str, ...] = ()
    #: The content type of a streamed response.
    stream_content_type: str = "text/event-stream"
    #: The model prefix of the condukt provider that speaks it (``"openai"`` in ``"openai:gpt-4o"``).
    provider: str = "?"
    #: What the server's URL needs after it to make that provider's ``base_url`` (``"/v1"`` for OpenAI's).
    base_path: str = ""

    def matches(self, route: str) -> bool:
        """Whether a request to ``route`` (its path, without the query) speaks this protocol."""
        raise NotImplementedError

    def streaming(self, request: RecordedRequest) -> bool:
        """Whether the client asked for a stream."""
        return isinstance(request.body, dict) and bool(request.body.get("stream"))

    def model(self, request: RecordedRequest) -> str:
        """The model asked for."""
        return request.body.get("model", "model") if isinstance(request.body, dict) else "model"

    def is_document(self, part: dict[str, Any]) -> bool:
        """Whether a message part carries a document."""
        return part.get("type") in self.document_types

    def last_is_tool_result(self, request: RecordedRequest) -> bool:
        """Whether the conversation ends with tool results (the model answers them)."""
        raise NotImplementedError

    def body(self, step: Reply, request: RecordedRequest, server: Any) -> bytes:
        """A whole (not streamed) answer."""
        raise NotImplementedError

    def frames(self, step: Reply, request: RecordedRequest, server: Any) -> list[bytes]:
        """A streamed answer, one frame per network write."""
        raise NotImplementedError

    def error_body(self, status: int, error_type: str | None, message: str) -> bytes:
        """An HTTP error's body."""
        raise NotImplementedError

    def error_headers(self, status: int, error_type: str | None) -> tuple[tuple[str, str], ...]:
        """Headers an HTTP error carries besides the content type (the default: none)."""
        return ()

    def stream_error(self, error_type: str, message: str) -> bytes:
        """The frame of an error reported inside a stream."""
        raise NotImplementedError

    def garbage(self) -> bytes:
        """A frame that breaks the protocol (malformed JSON in an SSE event)."""
        return b'event: content_block_delta\ndata: {"type": "content_bl\n\n'


#: The protocols the server speaks, by name, in routing order.
PROTOCOLS: dict[str, WireProtocol] = {}


def register(protocol: WireProtocol) -> WireProtocol:
    """Add ``protocol`` to the server's (replacing one of the same name)."""
    PROTOCOLS[protocol.name] = protocol
    return protocol


def protocol_for(route: str) -> WireProtocol | None:
    """The protocol of a request to ``route``; ``None`` when none matches."""
    for protocol in PROTOCOLS.values():
        if protocol.matches(route):
            return protocol
    return None


@attrs.define
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    time: float
    protocol: str
    client_closed: bool = False

    @property
    def wire(self) -> WireProtocol | None:
        """The :class:`WireProtocol` the request spoke (``None`` for an unknown path)."""
        return PROTOCOLS.get(self.protocol)

    @property
    def streaming(self) -> bool:
        """Whether the client asked for a streamed answer."""
        wire = self.wire
        return wire is not None and wire.streaming(self)

    @property
    def messages(self) -> list[Any]:
        """The body's ``messages`` (Gemini: its ``contents``; the Responses API: its ``input``)."""
        wire = self.wire
        key = wire.messages_key if wire is not None else "messages"
        return list(self.body.get(key, [])) if isinstance(self.body, dict) else []

    @property
    def documents(self) -> list[dict[str, Any]]:
        """The document parts of the body's messages, in order, as sent.

        Anthropic's ``document`` blocks (tool results' included), Chat
        Completions' ``file`` parts, the Responses API's ``input_file`` parts,
        Gemini's ``inlineData`` parts whose ``mimeType`` is not an image's.
        """
        wire = self.wire
        found: list[dict[str, Any]] = []
        if wire is None:
            return found

        def visit(value: Any) -> None:
            if isinstance(value, list):
                for item in value:
                    visit(item)
            elif isinstance(value, dict):
                if wire.is_document(value):
                    found.append(value)
                    return
                for key in ("content", "parts"):
                    visit(value.get(key))

        visit(self.messages)
        return found

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools the request declares, in order, whatever the protocol.

        Anthropic's and the Responses API's ``tools[].name``, Chat
        Completions' ``tools[].function.name``, Gemini's
        ``tools[].functionDeclarations[].name``, Bedrock's
        ``toolConfig.tools[].toolSpec.name``.
        """
        body = self.body if isinstance(self.body, dict) else {}
        config = body.get("toolConfig")
        declared = body.get("tools") or (config.get("tools") if isinstance(config, dict) else None) or []
        names: list[str] = []
        for tool in declared if isinstance(declared, list) else []:
            if not isinstance(tool, dict):
                continue
            entries = tool.get("functionDeclarations")
            if not isinstance(entries, list):
                entries = [tool.get("function") or tool.get("toolSpec") or tool]
            for entry in entries:
                name = entry.get("name") if isinstance(entry, dict) else None
                if isinstance(name, str):
                    names.append(name)
        return names

    @property
    def model(self) -> str:
        """The model asked for: the body's ``model`` (Gemini: the one in the path)."""
        wire = self.wire
        if wire is None:
            return self.body.get("model", "model") if isinstance(self.body, dict) else "model"
        return wire.model(self)
