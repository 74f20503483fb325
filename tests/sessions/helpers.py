"""Snapshots used across the session store tests."""

from __future__ import annotations

from condukt.messages import (
    AssistantMessage,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from condukt.sessions import Snapshot

IMAGE = ImageBlock.from_bytes(b"\x89PNG\r\n\x1a\nfake", "image/png")

#: One of every message type and content block, with awkward values.
EVERY_MESSAGE: tuple[Message, ...] = (
    UserMessage((TextBlock('hello ünïcödé 日本 \U0001f600 "quoted"\n'), IMAGE)),
    AssistantMessage(
        (
            ThinkingBlock("hmm", signature="sig=="),
            ThinkingBlock("unsigned"),
            TextBlock("Looking."),
            ToolCall("c1", "read", {"path": "a.txt", "nested": {"list": [1, 2.5, None, True]}}),
            ToolCall("c2", "read", "{not json"),
            ToolCall("c3", "noargs"),
        ),
        Usage(10, 20, 3, 4),
        "tool_use",
        "scripted",
    ),
    ToolResultMessage("c1", "read", (TextBlock("contents"), IMAGE), False),
    ToolResultMessage("c2", "read", (TextBlock("Error: bad"),), True),
    ToolResultMessage("c3", "noargs", ()),
    UserMessage.from_text("lone surrogate \udcff survives"),
    AssistantMessage((TextBlock("Bye"),)),
)


def full_snapshot(id: str = "0190-session") -> Snapshot:
    """A snapshot with every field set and every message type."""
    return Snapshot(
        id,
        EVERY_MESSAGE,
        model="anthropic:claude-sonnet-4-5",
        thinking_level="medium",
        system_prompt="You review pull requests.",
        created_at=1760000000.25,
        updated_at=1760000042.5,
    )


def big_snapshot(tag: str, messages: int = 200, size: int = 20_000) -> Snapshot:
    """A snapshot of about ``messages * size`` bytes whose every message carries ``tag``."""
    filler = "x" * size
    history = tuple(
        UserMessage.from_text(f"{tag}:{i}:{filler}")
        if i % 2 == 0
        else AssistantMessage((TextBlock(f"{tag}:{i}:{filler}"),))
        for i in range(messages)
    )
    return Snapshot("big", history, system_prompt=tag)


def tag_of(snapshot: Snapshot) -> str:
    """The tag of a :func:`big_snapshot`, checking that every message carries it."""
    tag = snapshot.system_prompt
    assert tag is not None
    for i, message in enumerate(snapshot.messages):
        assert message.text.startswith(f"{tag}:{i}:"), f"message {i} is not from snapshot {tag}"
    return tag
