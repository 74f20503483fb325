"""The same "review" shape written as every kind of schema a user may pass."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Literal, NotRequired, TypedDict

import attrs
import pydantic


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@attrs.frozen
class AttrsComment:
    line: int
    text: str = attrs.field(metadata={"description": "What to change"})


@attrs.frozen
class AttrsReview:
    """A code review."""

    verdict: Literal["approve", "reject"]
    comments: list[AttrsComment]
    priority: Priority = Priority.LOW


@dataclasses.dataclass
class DataComment:
    line: int
    text: str = dataclasses.field(metadata={"description": "What to change"})


@dataclasses.dataclass
class DataReview:
    """A code review."""

    verdict: Literal["approve", "reject"]
    comments: list[DataComment]
    priority: Priority = Priority.LOW


class DictComment(TypedDict):
    line: int
    text: str


class DictReview(TypedDict):
    """A code review."""

    verdict: Literal["approve", "reject"]
    comments: list[DictComment]
    priority: NotRequired[Priority]


class PydanticComment(pydantic.BaseModel):
    line: int
    text: str = pydantic.Field(description="What to change")


class PydanticReview(pydantic.BaseModel):
    """A code review."""

    verdict: Literal["approve", "reject"]
    comments: list[PydanticComment]
    priority: Priority = Priority.LOW


DICT_REVIEW: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["approve", "reject"]},
        "comments": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"line": {"type": "integer"}, "text": {"type": "string"}},
                "required": ["line", "text"],
            },
        },
        "priority": {"enum": ["low", "high"]},
    },
    "required": ["verdict", "comments"],
}

#: Every kind of spec, with the same valid and invalid data.
SPECS: list[Any] = [DICT_REVIEW, AttrsReview, DataReview, DictReview, PydanticReview]
VALID: dict[str, Any] = {"verdict": "approve", "comments": [{"line": 3, "text": "rename"}], "priority": "high"}
INVALID: dict[str, Any] = {"verdict": "maybe", "comments": [{"line": "three", "text": "rename"}]}
