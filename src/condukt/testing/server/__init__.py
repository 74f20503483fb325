"""A local HTTP/1.1 server speaking the providers' wire formats: Anthropic, OpenAI, Gemini, Bedrock, Vertex AI, Azure.

For your own tests of agents on real providers' wire formats, without a
network: ``from condukt.testing.server import ProtocolServer, reply, Status``.
condukt's own provider tests run on it.

Real sockets on 127.0.0.1, HTTP/1.1 read by httptools (llhttp, a core
dependency), kept alive unless the client asks to close, streams sent
chunked, one chunk per event. Each request takes the next step of
``server.script`` (or ``server.responder(request)`` once the script is
empty) and renders it in the protocol of the path it came to
(``.../v1/messages``, ``.../chat/completions``, OpenAI's ``.../responses``
or Gemini's ``.../models/{model}:generateContent``), streamed as server-sent events
when the body says ``"stream": true`` (Gemini: the path asks for
``:streamGenerateContent``; Bedrock: ``/converse-stream``, answered in
binary event-stream frames). Responses are built from the
providers' public API references (condukt's repository keeps
recorded-format samples in ``tests/fixtures/``).

Steps: :class:`Reply` (text, thinking, tool calls, usage), :class:`Status`
(an HTTP error with the provider's error body and headers), :class:`Fault`
(a stream that drops, hangs until the client leaves, sends an SSE error
event or garbage, or waits on a gate), :class:`Malformed` (a 200 whose body
is not JSON), :class:`Disconnect` (close without answering), :class:`Slow`
(delay the first byte of another step), :class:`Raw` (a recorded body).

One module per protocol, as in :mod:`condukt.providers`: :mod:`.anthropic`
(Claude on Vertex AI's ``:rawPredict`` too), :mod:`.openai` (Azure
OpenAI's deployments too), :mod:`.openai_responses`, :mod:`.gemini` (Vertex
AI's ``publishers/google`` paths too) and :mod:`.bedrock` (``Converse``,
``ConverseStream`` in AWS's binary event-stream framing), each defining
how its protocol renders a step and registering it; the HTTP plumbing is
shared.

Every request is recorded (headers, JSON body, time; its document parts,
of whatever protocol, in :attr:`RecordedRequest.documents`) and concurrent
requests are counted. :func:`load_script` reads a script of JSON lines
(``{"reply": "text"}``, ``{"call": "tool", "arguments": {...}}``,
``{"error": 429}``...) into steps. Run as a program (``python -m
condukt.testing.server --script answers.jsonl``, or ``condukt
test-server``) it serves in its own process and prints its base URL
first (see :mod:`condukt.testing.server.__main__`).
"""

from __future__ import annotations

# The protocol modules register themselves, in routing order.
from . import anthropic, bedrock, gemini, openai, openai_responses  # noqa: F401
from ._program import main
from ._prompt_cache import PromptCache
from ._protocol import RecordedRequest
from ._script import ScriptError, load_script, parse_script
from ._server import ProtocolServer, tool_then_answer
from ._steps import Disconnect, Fault, Malformed, Raw, Reply, Slow, Status, ToolUse, reply, tool_use
from .anthropic import anthropic_body, anthropic_error, anthropic_frames
from .bedrock import bedrock_body, bedrock_error, bedrock_frames, event_frame
from .gemini import gemini_body, gemini_error, gemini_frames
from .openai import openai_body, openai_error, openai_frames
from .openai_responses import responses_body, responses_frames

__all__ = [
    "Disconnect", "Fault", "Malformed", "PromptCache", "ProtocolServer", "Raw", "RecordedRequest", "Reply",
    "ScriptError", "Slow", "Status",
    "ToolUse", "anthropic_body", "anthropic_error", "anthropic_frames", "bedrock_body", "bedrock_error",
    "bedrock_frames", "event_frame", "gemini_body", "gemini_error",
    "gemini_frames", "load_script", "main", "openai_body", "openai_error", "openai_frames", "parse_script", "reply",
    "responses_body", "responses_frames",
    "tool_then_answer", "tool_use",
]  # fmt: skip
