"""Which kind of structured type a class is: attrs, dataclass, TypedDict or pydantic model.

pydantic is not a dependency: a class is a pydantic model only if pydantic
is already imported (it must be, for the user to have defined one), so
nothing here imports it.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any

import attrs

__all__ = ["is_pydantic_model", "is_structured_type", "is_typeddict"]


def is_typeddict(tp: Any) -> bool:
    """True for a ``typing.TypedDict`` or ``typing_extensions.TypedDict`` class."""
    if typing.is_typeddict(tp):
        return True
    # typing_extensions has its own TypedDict on older Pythons; it is only
    # looked at if something already imported it.
    extensions = sys.modules.get("typing_extensions")
    return extensions is not None and bool(extensions.is_typeddict(tp))


def is_pydantic_model(tp: Any) -> bool:
    """True for a pydantic ``BaseModel`` subclass (never imports pydantic)."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(tp, type):
        return False
    base = getattr(pydantic, "BaseModel", None)
    return isinstance(base, type) and issubclass(tp, base) and tp is not base


def is_structured_type(tp: Any) -> bool:
    """True for classes with named fields: attrs classes, dataclasses, TypedDicts, pydantic models.

    Values of these types are converted from JSON data (and back) field by
    field; every other type is plain JSON data already.
    """
    if not isinstance(tp, type):
        return False
    return attrs.has(tp) or dataclasses.is_dataclass(tp) or is_typeddict(tp) or is_pydantic_model(tp)
