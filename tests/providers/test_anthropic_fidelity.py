"""Anthropic wire fidelity: server tools and pause_turn, citations, output caps per model family.

Bodies and events as the Messages API reference documents them for web
search (``server_tool_use``, ``web_search_tool_result``, ``citations`` and
``citations_delta``) and long server-tool turns (``stop_reason: "pause_turn"``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import condukt
from condukt.messages import AssistantMessage, Citation, ProviderBlock, StopReason, TextBlock, Usage
from condukt.testing.server import ProtocolServer, Raw, reply

from .helpers import API_KEY, spawn, tokens

WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
SEARCH_CALL = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "trio structured concurrency"}}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": [
        {"type": "web_search_result", "url": "https://trio.readthedocs.io", "title": "Trio docs", "encrypted_content": "EqgfCioI", "page_age": None}
    ],
}
CITATION = {
    "type": "web_search_result_location",
    "url": "https://trio.readthedocs.io",
    "title": "Trio docs",
    "encrypted_index": "Eo8BCioI",
    "cited_text": "Trio is a library for async concurrency and I/O.",
}


def body(content: list[dict[str, Any]], stop_reason: str, usage: tuple[int, int] = (10, 5)) -> Raw:
    message = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop_reason,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }
    return Raw(json.dumps(message).encode(), content_type="application/json")


def sse(*events: dict[str, Any]) -> Raw:
    return Raw(b"".join(b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events))


async def test_a_paused_turn_is_sent_back_and_resumed(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(
        body([{"type": "text", "text": "Let me search. "}, SEARCH_CALL, SEARCH_RESULT], "pause_turn", (100, 20)),
        body([{"type": "text", "text": "Trio is an async library.", "citations": [CITATION]}], "end_turn", (150, 30)),
    )
    agent = await spawn(node, server, "anthropic", stream=False, model_options={"stream": False, "server_tools": [WEB_SEARCH]})
    assert await agent.run("What is trio?") == "Let me search. Trio is an async library."

    first, second = server.requests
    assert first.body["tools"][-1]["name"] == "web_search" and first.body["tools"][-1]["type"] == "web_search_20250305"
    # The paused answer goes back as the last message, server tool blocks as they came.
    paused = second.body["messages"][-1]
    assert paused["role"] == "assistant"
    assert [{k: v for k, v in block.items() if k != "cache_control"} for block in paused["content"]] == [
        {"type": "text", "text": "Let me search. "},
        SEARCH_CALL,
        SEARCH_RESULT,
    ]
    [user, answer] = await agent.history()
    assert isinstance(answer, AssistantMessage)
    assert answer.stop_reason == StopReason.END_TURN and tokens(answer.usage) == Usage(250, 50)
    kinds = [b.kind for b in answer.content if isinstance(b, ProviderBlock)]
    assert kinds == ["server_tool_use", "web_search_tool_result"]
    [*_, cited] = answer.content
    assert cited == TextBlock(
        "Trio is an async library.",
        (Citation("web_search_result_location", CITATION["cited_text"], "https://trio.readthedocs.io", "Trio docs"),),
    )

    # The next turn carries the server tool blocks in the history.
    server.add(reply("You're welcome."))
    await agent.run("Thanks")
    sent = server.requests[2].body["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["text", "server_tool_use", "web_search_tool_result", "text"]


async def test_a_streamed_pause_and_citations(node: condukt.Node, server: ProtocolServer) -> None:
    start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}
    server.add(
        sse(
            start,
            {"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"query": "trio struc'}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": 'tured concurrency"}'}},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": SEARCH_RESULT},
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "pause_turn"}, "usage": {"output_tokens": 12}},
            {"type": "message_stop"},
        ),
        sse(
            start,
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "", "citations": []}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": CITATION}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Trio is async."}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
            {"type": "message_stop"},
        ),
    )
    agent = await spawn(node, server, "anthropic", model_options={"server_tools": [WEB_SEARCH]})
    assert await agent.run("What is trio?") == "Trio is async."
    resent = server.requests[1].body["messages"][-1]["content"]
    assert resent[0] == SEARCH_CALL  # the input assembled from its fragments
    [_, answer] = await agent.history()
    assert tokens(answer.usage) == Usage(20, 19)
    assert answer.content[-1].citations[0].url == "https://trio.readthedocs.io"  # type: ignore[union-attr]


async def test_resumes_stop_at_the_limit(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(body([SEARCH_CALL, SEARCH_RESULT], "pause_turn"), body([SEARCH_CALL, SEARCH_RESULT], "pause_turn"))
    agent = await spawn(node, server, "anthropic", stream=False, model_options={"stream": False, "max_pause_resumes": 1})
    await agent.run("search a lot")
    assert len(server.requests) == 2
    [_, answer] = await agent.history()
    assert answer.stop_reason == StopReason.PAUSE_TURN  # the caller sees it was cut short


@pytest.mark.parametrize(
    "model,level,options,expected",
    [
        # Thinking "high" asks for 32768 + 8192: more than Opus 4 allows (32000); the budget leaves room to answer.
        ("claude-opus-4-20250514", "high", {}, (32000, 32000 - 8192)),
        ("claude-sonnet-4-5", "high", {}, (32768 + 8192, 32768)),
        ("claude-3-5-haiku-latest", "off", {}, (8192, None)),
        ("claude-3-haiku-20240307", "off", {}, (4096, None)),
        ("claude-3-haiku-20240307", "off", {"max_tokens": 100000}, (4096, None)),
        # An explicit limit wins; an unknown model is not clamped.
        ("claude-opus-4-20250514", "high", {"output_limit": 64000}, (32768 + 8192, 32768)),
        ("claude-next", "high", {"max_tokens": 100000}, (100000, 32768)),
    ],
)
async def test_max_tokens_stay_within_the_models_output_limit(
    node: condukt.Node, server: ProtocolServer, model: str, level: str, options: dict[str, Any], expected: tuple[int, int | None]
) -> None:
    server.add(reply("ok"))
    agent: condukt.AgentHandle = await node.spawn(
        condukt.Agent, model=f"anthropic:{model}", api_key=API_KEY, base_url=server.url, thinking_level=level, model_options=options
    )
    await agent.run("hi")
    sent = server.requests[0].body
    budget = sent["thinking"]["budget_tokens"] if "thinking" in sent else None
    assert (sent["max_tokens"], budget) == expected


async def test_bad_options_fail_at_spawn(node: condukt.Node, server: ProtocolServer) -> None:
    for options, error in (
        ({"server_tools": {"type": "web_search_20250305"}}, TypeError),
        ({"output_limit": 0}, ValueError),
        ({"max_pause_resumes": -1}, ValueError),
    ):
        with pytest.raises(error):
            await node.spawn(condukt.Agent, model="anthropic:claude-sonnet-4-5", api_key=API_KEY, base_url=server.url, model_options=options)
