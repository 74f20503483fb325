"""Schemas, types and agents shared by the structured-output, one-shot, operation and input tests."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Literal

import attrs

import condukt
from condukt.messages import TextBlock, UserMessage

#: A review as a JSON Schema: ``verdict`` is an enum.
REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["approve", "reject"]},
        "summary": {"type": "string"},
    },
    "required": ["verdict", "summary"],
    "additionalProperties": False,
}

GOOD = {"verdict": "approve", "summary": "Looks fine."}
BAD = {"verdict": "maybe", "summary": "Not sure."}


class Verdict(enum.Enum):
    APPROVE = "approve"
    REJECT = "reject"


@attrs.frozen
class Review:
    verdict: Verdict
    summary: str


@dataclasses.dataclass
class ReviewRecord:
    verdict: Literal["approve", "reject"]
    summary: str
    score: int = 0


@attrs.frozen
class PullRequest:
    repo: str
    number: int


@dataclasses.dataclass
class Ticket:
    title: str
    priority: int


def first_user_text(request: condukt.ModelRequest) -> str:
    """The text of the request's first message, which must be a user message."""
    message = request.messages[0]
    assert isinstance(message, UserMessage), message
    return "".join(b.text for b in message.content if isinstance(b, TextBlock))


def tool_names(request: condukt.ModelRequest) -> list[str]:
    """The names of the tools the request offers, in order."""
    return [tool.name for tool in request.tools]
