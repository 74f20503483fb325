"""Every message and event round-trips through condukt.serialization."""

from __future__ import annotations

import json
import re
import typing
from typing import Any

import pytest

import condukt
from condukt import serialization
from condukt.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    ApprovalDecided,
    ApprovalRequested,
    CompactionFallback,
    Done,
    Error,
    Event,
    HandedOff,
    InputReceived,
    InputRequested,
    MaxTurnsReached,
    PartialOutput,
    Retry,
    SubagentEvent,
    Summarized,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolProgress,
    TurnEnd,
    TurnStart,
)
from condukt.messages import (
    AssistantMessage,
    Citation,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from condukt.testing import ScriptedModel, call, reply

from .helpers import Add, Recorder

IMAGE = ImageBlock.from_bytes(b"\x89PNG\r\n\x1a\nfake", "image/png")
PDF = DocumentBlock.from_bytes(b"%PDF-1.4 fake", "application/pdf", "report.pdf")
NOTES = DocumentBlock.from_text("plain notes")
ASSISTANT = AssistantMessage(
    (
        ThinkingBlock("hmm", signature="sig=="),
        ThinkingBlock("", signature="gemini-sig", provider="gemini"),
        TextBlock("Looking.", (Citation("web_search_result_location", "the quote", "https://example.com/a", "A page"),)),
        ProviderBlock("anthropic", "server_tool_use", '{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}}'),
        ToolCall("c1", "read", {"path": "a.txt", "nested": {"list": [1, 2.5, None, True]}}),
        ToolCall("c2", "read", "{not json"),
    ),
    Usage(10, 20, 3, 4),
    "tool_use",
    "scripted",
)
MESSAGES: list[Any] = [
    UserMessage((TextBlock("hello"), IMAGE, PDF)),
    ASSISTANT,
    ToolResultMessage("c1", "read", (TextBlock("contents"), IMAGE, NOTES), False),
    ToolResultMessage("c2", "read", (TextBlock("Error: bad"),), True),
    AssistantMessage((TextBlock("Bye"),)),
]
EVENTS: list[Any] = [
    AgentStart("0190-session", "hello"),
    TurnStart(1),
    TextDelta("Look"),
    ToolCallDelta(0, "c1", "submit_result", '{"title": "Hal'),
    PartialOutput({"title": "Hal", "tags": ["a"]}),
    Summarized(40, 4, 2800, 300, True, False),
    CompactionFallback("ToolResultPrune", "the summariser did not answer within 60s", True, 2800, 900),
    ThinkingDelta("hmm"),
    ToolCallStart("c1", "read", {"path": "a.txt"}),
    ToolCallEnd("c1", "read", "contents", False, 0.25),
    ToolProgress("c1", "step 2 of 3", 2, 3),
    ToolProgress("c1", "working"),
    ApprovalRequested("c2", "deploy", {"env": "prod"}, 1760000000.0),
    ApprovalDecided("c2", "deploy", False, "not on a Friday"),
    InputRequested("q1", "Which colour?", "ask_user", {"question": "Which colour?"}),
    InputReceived("q1", "ask_user"),
    HandedOff("h1", "transfer_to_billing", "agent-5"),
    TurnEnd(1, ASSISTANT),
    Retry("anthropic", 2, "overloaded", 1.5),
    MaxTurnsReached(50),
    AgentEnd("Bye", Usage(1, 2), 3),
    Error("ModelError", "boom"),
    Done("completed"),
    SubagentEvent("researcher", "agent-2", TurnEnd(2, AssistantMessage((TextBlock("sub"),)))),
    SubagentEvent("outer", "agent-3", SubagentEvent("inner", "agent-4", Done("aborted"))),
    AgentEvent("0190-session", ToolCallStart("c9", "bash", {"command": "ls"})),
]


def test_the_samples_cover_every_message_and_event_class() -> None:
    assert {type(e) for e in EVENTS} == set(typing.get_args(Event))
    assert {type(m) for m in MESSAGES} == set(typing.get_args(Message))
    assert {type(b) for b in ASSISTANT.content} | {ImageBlock} == set(typing.get_args(ContentBlock))


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_messages_round_trip(message: Any) -> None:
    text = serialization.dumps(message, Message)
    back = serialization.loads(text, Message)
    assert back == message and type(back) is type(message)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_events_round_trip(event: Any) -> None:
    text = serialization.dumps(event, Event)
    back = serialization.loads(text, Event)
    assert back == event and type(back) is type(event)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_to_json_is_the_tagged_json_shape_and_reads_back(event: Any) -> None:
    data = condukt.events.to_json(event)
    assert json.loads(json.dumps(data)) == data  # plain JSON
    assert data["type"] == re.sub(r"(?<!^)(?=[A-Z])", "_", type(event).__name__).lower()  # TextDelta: text_delta
    assert serialization.structure(data, Event) == event


@pytest.mark.parametrize("block", ASSISTANT.content + (IMAGE,), ids=lambda b: type(b).__name__)
def test_content_blocks_round_trip(block: Any) -> None:
    assert serialization.loads(serialization.dumps(block, ContentBlock), ContentBlock) == block


def test_json_is_tagged_with_a_type_field() -> None:
    data = json.loads(serialization.dumps(ASSISTANT, Message))
    assert data["type"] == "assistant"
    assert [b["type"] for b in data["content"]] == ["thinking", "thinking", "text", "provider", "tool_call", "tool_call"]
    assert json.loads(serialization.dumps(TurnEnd(1, ASSISTANT), Event))["type"] == "turn_end"
    assert json.loads(serialization.dumps(MESSAGES[2], Message))["type"] == "tool_result"
    assert json.loads(serialization.dumps(IMAGE, ContentBlock))["type"] == "image"


def test_documents_are_tagged_and_a_missing_title_reads_as_none() -> None:
    data = json.loads(serialization.dumps(MESSAGES[0], Message))
    assert data["content"][2] == {"type": "document", "media_type": "application/pdf", "data": PDF.data, "title": "report.pdf"}
    del data["content"][2]["title"]
    message = serialization.structure(data, Message)
    assert message.content[2] == DocumentBlock("application/pdf", PDF.data)
    assert message.content[2].to_bytes() == b"%PDF-1.4 fake" and NOTES.to_text() == "plain notes"


def test_plain_classes_round_trip_without_a_union() -> None:
    definition = ToolDefinition("add", "Adds.", Add.parameters)
    assert serialization.loads(serialization.dumps(definition), ToolDefinition) == definition
    assert serialization.loads(serialization.dumps(Usage(1, 2, 3, 4)), Usage) == Usage(1, 2, 3, 4)
    assert serialization.structure(serialization.unstructure(ASSISTANT), AssistantMessage) == ASSISTANT


def test_a_whole_conversation_round_trips_as_one_document() -> None:
    text = serialization.dumps(tuple(MESSAGES), tuple[Message, ...])
    assert serialization.loads(text, tuple[Message, ...]) == tuple(MESSAGES)
    text = serialization.dumps(EVENTS, list[Event])
    assert serialization.loads(text, list[Event]) == EVENTS


async def test_a_real_runs_events_and_history_round_trip() -> None:
    log: list[Any] = []
    model = ScriptedModel(
        [[reply("Adding.", thinking="tool time"), call("add", {"a": 1, "b": 2}), call("nope")], reply("3")]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[Add()], log=log)
        await agent.run("1+2?", images=[IMAGE], documents=[PDF])
        history = await agent.history()
    assert {type(e) for e in log} >= {AgentStart, TurnStart, TextDelta, ThinkingDelta, ToolCallStart,
                                       ToolCallEnd, TurnEnd, AgentEnd, Done}  # fmt: skip
    for event in log:
        assert serialization.loads(serialization.dumps(event, Event), Event) == event
    for message in history:
        assert serialization.loads(serialization.dumps(message, Message), Message) == message
