"""The server-sent events decoder."""

from __future__ import annotations

from pathlib import Path

import pytest

from condukt.providers.lowlevel import ServerSentEvent, SSEDecoder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def test_events_fields_and_comments() -> None:
    body = b": keep-alive\n\nevent: ping\ndata: {}\n\ndata: a\ndata: b\nid: 7\nretry: 1500\n\ndata\n\n"
    assert decode(body) == [
        ServerSentEvent("ping", "{}"),
        ServerSentEvent("message", "a\nb", "7", 1500),
        ServerSentEvent("message", "", "7", 1500),
    ]


def test_one_space_after_the_colon_is_dropped_and_no_more() -> None:
    assert decode(b"data:x\n\ndata:  two\n\n") == [ServerSentEvent("message", "x"), ServerSentEvent("message", " two")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(newline: bytes) -> None:
    body = b"event: a" + newline + b"data: 1" + newline + newline + b"data: 2" + newline + newline
    assert decode(body) == [ServerSentEvent("a", "1"), ServerSentEvent("message", "2")]


def test_any_split_gives_the_same_events() -> None:
    body = (FIXTURES / "anthropic_stream_thinking_tool_use.sse").read_bytes().replace(b"\n", b"\r\n")
    whole = decode(body)
    assert len(whole) == 18
    for size in (1, 2, 3, 7, 64):
        chunks = [body[i : i + size] for i in range(0, len(body), size)]
        assert decode(*chunks) == whole


def test_an_unfinished_event_is_not_dispatched() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: cut") == [ServerSentEvent("message", "complete")]
    assert decoder.has_partial_event


def test_unicode_and_separators_inside_data() -> None:
    text = "caf\u00e9 \u2028 line".encode()
    assert decode(b"data: " + text + b"\n\n") == [ServerSentEvent("message", text.decode())]
