"""Schema.convert and Schema.dump: valid JSON data to instances and back, for every kind of class."""

from __future__ import annotations

from typing import Any

import attrs
import pydantic
import pytest

from condukt.schema import Schema

from .models import (
    DICT_REVIEW,
    VALID,
    AttrsComment,
    AttrsReview,
    DataComment,
    DataReview,
    DictReview,
    Priority,
    PydanticComment,
    PydanticReview,
)

EXPECTED: list[tuple[type, Any]] = [
    (AttrsReview, AttrsReview("approve", [AttrsComment(3, "rename")], Priority.HIGH)),
    (DataReview, DataReview("approve", [DataComment(3, "rename")], Priority.HIGH)),
    (DictReview, {"verdict": "approve", "comments": [{"line": 3, "text": "rename"}], "priority": Priority.HIGH}),
    (
        PydanticReview,
        PydanticReview(verdict="approve", comments=[PydanticComment(line=3, text="rename")], priority=Priority.HIGH),
    ),
]


@pytest.mark.parametrize(("spec", "instance"), EXPECTED, ids=lambda x: getattr(x, "__name__", ""))
def test_valid_data_converts_to_an_instance_and_dumps_back(spec: type, instance: Any) -> None:
    schema = Schema.of(spec)
    converted = schema.convert(VALID)
    assert converted == instance
    assert type(converted) is type(instance)
    dumped = schema.dump(converted)
    assert dumped == VALID
    assert schema.is_valid(dumped)


def test_optional_typed_dict_keys_may_be_missing() -> None:
    schema = Schema.of(DictReview)
    data = {"verdict": "reject", "comments": []}
    assert schema.is_valid(data)
    assert schema.convert(data) == data
    assert schema.dump(data) == data


def test_defaults_fill_in_what_the_data_leaves_out() -> None:
    data = {"verdict": "reject", "comments": []}
    assert Schema.of(AttrsReview).convert(data) == AttrsReview("reject", [], Priority.LOW)
    assert Schema.of(PydanticReview).convert(data).priority is Priority.LOW


def test_a_dict_schema_returns_the_data_unchanged() -> None:
    schema = Schema.of(DICT_REVIEW)
    assert schema.convert(VALID) is VALID
    assert schema.dump(VALID) == VALID


def test_plain_types_convert_too() -> None:
    assert Schema.of(Priority).convert("high") is Priority.HIGH
    assert Schema.of(Priority).dump(Priority.HIGH) == "high"
    assert Schema.of(tuple[int, ...]).convert([1, 2]) == (1, 2)


def test_a_class_nested_in_another_kind_converts_too() -> None:
    @attrs.frozen
    class Batch:
        reviews: list[PydanticReview]
        first: DictReview | None = None

    schema = Schema.of(Batch)
    data = {"reviews": [VALID], "first": {"verdict": "approve", "comments": []}}
    assert schema.is_valid(data)
    batch = schema.convert(data)
    assert isinstance(batch.reviews[0], PydanticReview) and batch.reviews[0].priority is Priority.HIGH
    assert schema.dump(batch) == {"reviews": [VALID], "first": {"verdict": "approve", "comments": []}}


def test_data_that_does_not_convert_is_a_value_error_saying_why() -> None:
    @attrs.frozen
    class Positive:
        n: int = attrs.field(validator=attrs.validators.gt(0))

    with pytest.raises(ValueError, match=r"could not convert the value to .*Positive: .*'n' must be > 0"):
        Schema.of(Positive).convert({"n": -1})
    with pytest.raises(ValueError, match=r"could not convert the value to PydanticReview: verdict: Input should be"):
        Schema.of(PydanticReview).convert({"verdict": "maybe", "comments": []})
    with pytest.raises(ValueError, match="could not convert the value to AttrsReview"):
        Schema.of(AttrsReview).convert("not even an object")


def test_pydantic_validators_run_on_conversion() -> None:
    class Slug(pydantic.BaseModel):
        value: str

        @pydantic.field_validator("value")
        @classmethod
        def lower(cls, value: str) -> str:
            return value.lower()

    assert Schema.of(Slug).convert({"value": "ABC"}) == Slug(value="abc")
