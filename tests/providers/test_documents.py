"""Documents (PDF and text) on every wire protocol, end to end through a real Agent and the local server.

Each expected shape is the provider's public API reference: Anthropic's
``document`` block (a ``base64`` PDF source, a ``text`` plain-text source,
``title``), Chat Completions' ``file`` part (``filename``, ``file_data`` as a
``data:`` URL; PDF only, text goes as a ``text`` part as OpenAI advises),
the Responses API's ``input_file`` part, Gemini's ``inlineData`` part.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

import condukt
from condukt import serialization
from condukt.events import ToolCallEnd
from condukt.messages import DocumentBlock, Message, TextBlock, ToolResultMessage, UserMessage
from condukt.providers import InvalidRequest, UnsupportedContent
from condukt.sessions import DiskStore
from condukt.testing.server import ProtocolServer, reply, tool_use

from .helpers import ALL_PROTOCOLS, API_KEY, collect, spawn

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PDF_B64 = base64.b64encode(PDF).decode()
PDF_URL = f"data:application/pdf;base64,{PDF_B64}"
NOTES = "Meeting notes: ship on Friday."
NOTES_B64 = base64.b64encode(NOTES.encode()).decode()

streaming = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
protocols = pytest.mark.parametrize("protocol", ALL_PROTOCOLS)


@pytest.fixture
def report(tmp_path: Path) -> Path:
    path = tmp_path / "report.pdf"
    path.write_bytes(PDF)
    return path


def user_turn(protocol: str, body: dict[str, Any]) -> Any:
    """The first message of a request body, as the protocol spells it."""
    key = {"gemini": "contents", "openai-responses": "input"}.get(protocol, "messages")
    return body[key][0]


#: The user message of ``run("Summarise", documents=[report.pdf])``, by protocol.
PDF_PROMPT = {
    "anthropic": {
        "role": "user",
        "content": [
            {"type": "text", "text": "Summarise"},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
                "title": "report.pdf",
                "cache_control": {"type": "ephemeral"},  # the conversation's cache breakpoint: the last block
            },
        ],
    },
    "openai": {
        "role": "user",
        "content": [
            {"type": "text", "text": "Summarise"},
            {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}},
        ],
    },
    "openai-responses": {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Summarise"},
            {"type": "input_file", "filename": "report.pdf", "file_data": PDF_URL},
        ],
    },
    "gemini": {
        "role": "user",
        "parts": [{"text": "Summarise"}, {"inlineData": {"mimeType": "application/pdf", "data": PDF_B64}}],
    },
}


@protocols
@streaming
async def test_a_pdf_path_is_sent_as_the_protocols_document_part(
    node: condukt.Node, server: ProtocolServer, report: Path, protocol: str, stream: bool
) -> None:
    server.add(reply("A one-page report."))
    agent = await spawn(node, server, protocol, stream=stream)
    assert await agent.run("Summarise", documents=[report]) == "A one-page report."
    [request] = server.requests
    assert request.streaming is stream
    assert user_turn(protocol, request.body) == PDF_PROMPT[protocol]
    assert len(request.documents) == 1
    prompt, _ = await agent.history()
    assert prompt == UserMessage((TextBlock("Summarise"), DocumentBlock("application/pdf", PDF_B64, "report.pdf")))


@protocols
async def test_a_text_document_is_sent_as_text_where_the_protocol_takes_text(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    server.add(reply("Friday."))
    agent = await spawn(node, server, protocol)
    notes = DocumentBlock.from_text(NOTES, title="notes.txt")
    assert await agent.run("When do we ship?", documents=[notes]) == "Friday."
    sent = user_turn(protocol, server.requests[0].body)
    document = {
        # Anthropic's plain-text source carries the text itself.
        "anthropic": {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": NOTES},
            "title": "notes.txt",
            "cache_control": {"type": "ephemeral"},
        },
        # Chat Completions takes only PDF files: the text goes as a text part.
        "openai": {"type": "text", "text": f"[document: notes.txt]\n{NOTES}"},
        "openai-responses": {
            "type": "input_file",
            "filename": "notes.txt",
            "file_data": f"data:text/plain;base64,{NOTES_B64}",
        },
        "gemini": {"inlineData": {"mimeType": "text/plain", "data": NOTES_B64}},
    }[protocol]
    assert (sent["parts"] if protocol == "gemini" else sent["content"])[-1] == document


@protocols
async def test_a_prompt_of_only_a_document_is_not_empty(
    node: condukt.Node, server: ProtocolServer, report: Path, protocol: str
) -> None:
    server.add(reply("A report."))
    agent = await spawn(node, server, protocol, stream=False)
    assert await agent.run("", documents=[report]) == "A report."
    sent = user_turn(protocol, server.requests[0].body)
    parts = sent["parts"] if protocol == "gemini" else sent["content"]
    assert len(parts) == 1 and len(server.requests[0].documents) == 1  # the empty text is left out


class Fetch(condukt.Tool):
    """Returns the report as a document, with a line of text."""

    name = "fetch_report"
    description = "Fetches the quarterly report."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return [TextBlock("Here it is."), DocumentBlock.from_bytes(PDF, "application/pdf", "q3.pdf")]


@protocols
async def test_a_document_a_tool_returns_reaches_the_next_request(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    server.add(reply(tools=tool_use("fetch_report", {}, id="t1")), reply("Revenue is up."))
    agent = await spawn(node, server, protocol, tools=[Fetch])
    events, stream = await collect(agent, "How was Q3?")
    assert stream.result == "Revenue is up."
    [end] = [e for e in events if isinstance(e, ToolCallEnd)]
    assert end.result == f"Here it is.[document application/pdf, {len(PDF_B64) * 3 // 4} bytes]"
    body = server.requests[1].body
    if protocol == "anthropic":
        [result] = body["messages"][2]["content"]
        assert result == {
            "type": "tool_result",
            "tool_use_id": "t1",
            # Anthropic takes documents inside a tool result.
            "content": [
                {"type": "text", "text": "Here it is."},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
                    "title": "q3.pdf",
                },
            ],
            "cache_control": {"type": "ephemeral"},
        }
    elif protocol == "openai":
        # A tool message holds text only: the document follows in one user message.
        assert body["messages"][2:] == [
            {"role": "tool", "tool_call_id": "t1", "content": "Here it is."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Document returned by tool call t1 (fetch_report):"},
                    {"type": "file", "file": {"filename": "q3.pdf", "file_data": PDF_URL}},
                ],
            },
        ]
    elif protocol == "openai-responses":
        assert body["input"][2:] == [
            {"type": "function_call_output", "call_id": "t1", "output": "Here it is."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Document returned by tool call t1 (fetch_report):"},
                    {"type": "input_file", "filename": "q3.pdf", "file_data": PDF_URL},
                ],
            },
        ]
    else:
        assert body["contents"][2] == {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "fetch_report", "response": {"output": "Here it is."}, "id": "t1"}},
                {"inlineData": {"mimeType": "application/pdf", "data": PDF_B64}},
            ],
        }
    assert len(server.requests[1].documents) == 1
    result = (await agent.history())[2]
    assert isinstance(result, ToolResultMessage) and result.content[1] == DocumentBlock(
        "application/pdf", PDF_B64, "q3.pdf"
    )


async def test_a_document_only_tool_result_gets_a_placeholder_where_output_is_text(
    node: condukt.Node, server: ProtocolServer
) -> None:
    @condukt.tool
    async def scan() -> DocumentBlock:
        """Scans the page."""
        return DocumentBlock.from_bytes(PDF, "application/pdf")

    server.add(reply(tools=tool_use("scan", {}, id="s1")), reply("Scanned."))
    agent = await spawn(node, server, "openai", tools=[scan])
    assert await agent.run("Scan it") == "Scanned."
    tool, follow = server.requests[1].body["messages"][2:]
    assert tool == {"role": "tool", "tool_call_id": "s1", "content": "(see the attached document)"}
    assert follow["content"][1] == {"type": "file", "file": {"filename": "document.pdf", "file_data": PDF_URL}}


DOCX = DocumentBlock.from_bytes(b"PK\x03\x04", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")


@pytest.mark.parametrize("protocol", ["anthropic", "openai", "gemini"])
async def test_a_type_the_protocol_cannot_take_fails_before_any_request(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    agent = await spawn(node, server, protocol)
    with pytest.raises(UnsupportedContent) as info:
        await agent.run("Summarise", documents=[DOCX])
    error = info.value
    assert isinstance(error, InvalidRequest) and isinstance(error, ValueError)
    assert error.provider == protocol and "application/vnd.openxmlformats" in str(error)
    assert "PDF" in str(error)
    assert server.requests == []  # no 400 from the server: nothing was sent
    assert await agent.history() == ()  # the failed run left nothing behind
    server.add(reply("Still here."))
    assert await agent.run("Hello") == "Still here."  # and the agent carries on



class Archive(condukt.Tool):
    """Returns a document of a type most protocols cannot carry."""

    name = "archive"
    description = "Fetches the site archive."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return DocumentBlock.from_bytes(b"PK\x03\x04", "application/zip", "site.zip")


@pytest.mark.parametrize("protocol", ["anthropic", "openai", "gemini"])
async def test_a_type_a_tool_returns_that_the_protocol_cannot_take_becomes_a_note(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    """Not an error: the model reads why it got nothing, and the conversation is not stuck on it."""
    server.add(reply(tools=tool_use("archive", {}, id="a1")), reply("I cannot open zip files."), reply("Sure."))
    agent = await spawn(node, server, protocol, tools=[Archive])
    assert await agent.run("What is in the archive?") == "I cannot open zip files."
    note = (
        "[the document 'site.zip' has media type 'application/zip': this protocol takes PDF (application/pdf)"
        " and text (text/*) documents; it was not sent]"
    )
    sent = server.requests[1]
    assert sent.documents == [] and note in sent.raw.decode()
    assert await agent.run("Never mind.") == "Sure."  # the history (which keeps the document) still goes
    assert note in server.requests[2].raw.decode()
    result = (await agent.history())[2]
    assert isinstance(result, ToolResultMessage) and result.content[0].media_type == "application/zip"  # type: ignore[union-attr]


async def test_the_responses_api_takes_other_document_types(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("A letter."))
    agent = await spawn(node, server, "openai-responses")
    assert await agent.run("What is it?", documents=[DOCX]) == "A letter."
    [document] = server.requests[0].documents
    assert document == {
        "type": "input_file",
        "filename": "document",
        "file_data": f"data:{DOCX.media_type};base64,{DOCX.data}",
    }


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
async def test_a_text_document_that_is_not_utf8_fails_before_any_request(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    agent = await spawn(node, server, protocol)
    latin1 = DocumentBlock.from_bytes("caf\xe9".encode("latin-1"), "text/plain", "menu.txt")
    with pytest.raises(UnsupportedContent, match="'menu.txt'.*not base64-encoded UTF-8"):
        await agent.run("Read the menu", documents=[latin1])
    assert server.requests == []


async def test_the_preset_is_named_in_the_error(node: condukt.Node, server: ProtocolServer) -> None:
    agent = await spawn(node, server, "ollama")
    with pytest.raises(UnsupportedContent) as info:
        await agent.run("Summarise", documents=[DOCX])
    assert info.value.provider == "ollama" and str(info.value).startswith("ollama: ")


@pytest.mark.parametrize(
    ("documents", "error", "match"),
    [
        ("report.pdf", TypeError, "must be a list of documents.*wrap it in a list"),
        (DocumentBlock("application/pdf", PDF_B64), TypeError, "wrap it in a list"),
        (5, TypeError, "must be a list of DocumentBlocks or paths, got int"),
        ([b"%PDF-1.4"], TypeError, r"DocumentBlock\.from_bytes\(data, media_type\)"),
        ([42], TypeError, "DocumentBlock or a path"),
        (["slides.pptx"], ValueError, r"slides\.pptx is not a supported document \(csv, htm, html, markdown, md, pdf, txt, xml\)"),
        ([DocumentBlock("", PDF_B64)], ValueError, "needs a media type"),
        ([DocumentBlock("application/pdf", PDF)], TypeError, "data is base64 text, got bytes"),  # type: ignore[arg-type]
        ([DocumentBlock("application/pdf", PDF_B64, 7)], TypeError, "title is a str or None, got int"),  # type: ignore[arg-type]
        ([DocumentBlock("application/pdf", "%PDF-1.4 not encoded")], ValueError, "data is not base64"),
        ([DocumentBlock("text/plain", base64.encodebytes(NOTES.encode() * 9).decode())], ValueError, "not base64"),
    ],
)
async def test_bad_documents_raise_in_the_caller(
    node: condukt.Node, server: ProtocolServer, documents: Any, error: type[Exception], match: str
) -> None:
    agent = await spawn(node, server, "anthropic")
    with pytest.raises(error, match=match):
        await agent.run("Summarise", documents=documents)
    with pytest.raises(error, match=match):
        async with agent.stream("Summarise", documents=documents):
            pass
    assert server.requests == []
    server.add(reply("ok"))
    assert await agent.run("hi") == "ok"


class Garbled(condukt.Tool):
    """Returns a document whose data is not base64 (a tool's bug)."""

    name = "garbled"
    description = "Fetches a broken export."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return DocumentBlock("application/pdf", "%PDF-1.4 raw bytes, not base64", "export.pdf")


@protocols
async def test_a_document_a_tool_returns_that_is_not_base64_becomes_a_note(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    """Sent as it is, every later request of the conversation would be a 400: the model reads a note instead."""
    server.add(reply(tools=tool_use("garbled", {}, id="g1")), reply("The export is broken."), reply("Sure."))
    agent = await spawn(node, server, protocol, tools=[Garbled])
    assert await agent.run("Read the export") == "The export is broken."
    note = "[the document 'export.pdf' (application/pdf) is not base64 data; it was not sent]"
    assert server.requests[1].documents == [] and note in server.requests[1].raw.decode()
    assert await agent.run("Never mind.") == "Sure."
    assert note in server.requests[2].raw.decode()


@pytest.mark.parametrize("media_type", ["text/markdown", "text/x-rst", "text/plain; charset=utf-8"])
async def test_gemini_gets_every_text_document_as_plain_text(
    node: condukt.Node, server: ProtocolServer, media_type: str
) -> None:
    """Gemini answers 400 to a text type it does not list, and reads all of them as plain text anyway."""
    server.add(reply("Friday."))
    agent = await spawn(node, server, "gemini")
    notes = DocumentBlock.from_text(NOTES, media_type, "notes")
    assert await agent.run("When do we ship?", documents=[notes]) == "Friday."
    assert server.requests[0].documents == [{"inlineData": {"mimeType": "text/plain", "data": NOTES_B64}}]
    assert (await agent.history())[0].content[1] == notes  # the history keeps its media type


async def test_a_title_longer_than_anthropics_limit_is_cut(node: condukt.Node, server: ProtocolServer) -> None:
    """The API takes titles of 1 to 500 characters: a longer one (a tool's) would fail every later request."""
    server.add(reply("Read."))
    agent = await spawn(node, server, "anthropic")
    title = "quarterly report " * 40 + ".pdf"
    assert await agent.run("Summarise", documents=[DocumentBlock("application/pdf", PDF_B64, title)]) == "Read."
    [document] = server.requests[0].documents
    assert document["title"] == title[:500]
    prompt, _ = await agent.history()
    assert prompt.content[1] == DocumentBlock("application/pdf", PDF_B64, title)  # the history keeps it whole


async def test_a_file_name_that_is_not_utf8_gives_a_title_providers_take(
    node: condukt.Node, server: ProtocolServer, tmp_path: Path
) -> None:
    """Such a name (from ``Path.iterdir``) holds a lone surrogate, which JSON can only send as an escape
    that Anthropic refuses ("no low surrogate in string"): every request of the conversation would fail."""
    name = os.fsdecode(b"r\xe9sum\xe9.pdf")  # Latin-1 bytes on disk
    (tmp_path / name).write_bytes(PDF)
    server.add(reply("Read."), reply("Still here."))
    agent = await spawn(node, server, "anthropic", stream=False)
    assert await agent.run("Summarise", documents=[tmp_path / name]) == "Read."
    assert await agent.run("And?") == "Still here."
    for request in server.requests:
        assert b"\\ud" not in request.raw  # no surrogate escape on the wire
        assert request.documents[0]["title"] == "r\ufffdsum\ufffd.pdf"
    built = DocumentBlock("application/pdf", PDF_B64, "x\udce9\ud800.pdf").title  # any lone surrogate
    assert built is not None and built.encode("utf-8").endswith(".pdf".encode()) and "\ufffd" in built


async def test_a_missing_file_raises_in_the_caller(node: condukt.Node, server: ProtocolServer, tmp_path: Path) -> None:
    agent = await spawn(node, server, "anthropic")
    with pytest.raises(FileNotFoundError):
        await agent.run("Summarise", documents=[tmp_path / "gone.pdf"])
    with pytest.raises(ValueError, match="give a prompt, images, documents or an input"):
        await agent.run("", documents=[])
    assert server.requests == []


async def test_history_and_a_disk_snapshot_round_trip_documents(
    node: condukt.Node, server: ProtocolServer, report: Path, tmp_path: Path
) -> None:
    store = DiskStore(tmp_path / "sessions")
    server.add(reply(tools=tool_use("fetch_report", {}, id="t1")), reply("Both read."), reply("Still two."))
    agent = await spawn(node, server, "anthropic", id="reader", session_store=store, tools=[Fetch])
    notes = DocumentBlock.from_text(NOTES, "text/markdown", "notes.md")
    assert await agent.run("Read these", documents=[report, notes]) == "Both read."
    history = await agent.history()
    for message in history:
        assert serialization.loads(serialization.dumps(message, Message), Message) == message
    snapshot = await DiskStore(tmp_path / "sessions").load("reader")  # the base and its journal
    assert snapshot is not None and snapshot.messages == tuple(history)
    stored = json.loads((tmp_path / "sessions" / "reader.json").read_text())
    assert stored["messages"][0]["content"][2] == {
        "type": "document", "media_type": "text/markdown", "data": NOTES_B64, "title": "notes.md"
    }  # fmt: skip
    await agent.stop()

    # A new incarnation reloads the documents and sends them again, unchanged.
    again = await spawn(node, server, "anthropic", id="reader", session_store=store, tools=[Fetch])
    assert await again.history() == history
    assert await again.run("How many documents?") == "Still two."
    assert len(server.requests[-1].documents) == 3  # the two of the prompt and the tool's


async def test_a_one_shot_run_takes_documents(node: condukt.Node, server: ProtocolServer, report: Path) -> None:
    server.add(reply("One page."))
    answer = await condukt.run(
        "Summarise", model="gemini:test-model", api_key=API_KEY, base_url=server.url, documents=[report], node=node
    )
    assert answer == "One page."
    assert server.requests[0].documents == [{"inlineData": {"mimeType": "application/pdf", "data": PDF_B64}}]
