"""The one cattrs converter for messages, events and everything built on them.

Unions are tagged with a ``"type"`` field (``"text"``, ``"tool_call"``,
``"assistant"``, ``"turn_end"``...), so JSON written by one process (a session
store, the HTTP endpoint, another node) reads back into the same classes.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union

from . import events as _events
from . import messages as _messages

__all__ = ["converter", "dumps", "loads", "structure", "unstructure"]

T = TypeVar("T")


def _tag(cls: type) -> str:
    name = cls.__name__
    if name.endswith("Block") or name.endswith("Message"):
        name = name.removesuffix("Block").removesuffix("Message")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


converter = cattrs.Converter(omit_if_default=False)
configure_tagged_union(_messages.ContentBlock, converter, tag_generator=_tag, tag_name="type")
configure_tagged_union(
    _messages.TextBlock | _messages.ImageBlock, converter, tag_generator=_tag, tag_name="type"
)
# What user messages and tool results hold.
configure_tagged_union(
    _messages.TextBlock | _messages.ImageBlock | _messages.DocumentBlock, converter, tag_generator=_tag, tag_name="type"
)
configure_tagged_union(_messages.Message, converter, tag_generator=_tag, tag_name="type")
configure_tagged_union(_events.Event, converter, tag_generator=_tag, tag_name="type")
# A usage whose cost is unknown reads as before costs existed.
converter.register_unstructure_hook(
    _messages.Usage, make_dict_unstructure_fn(_messages.Usage, converter, cost=override(omit_if_default=True))
)


def unstructure(obj: Any, as_type: Any = None) -> Any:
    """Plain JSON-ready data for ``obj`` (tagged if ``as_type`` is a union)."""
    return converter.unstructure(obj, unstructure_as=as_type)


def structure(data: Any, as_type: type[T] | Any) -> T:
    """The object of type ``as_type`` that ``data`` describes."""
    result: T = converter.structure(data, as_type)
    return result


def dumps(obj: Any, as_type: Any = None) -> str:
    """JSON text for ``obj``."""
    return json.dumps(unstructure(obj, as_type), ensure_ascii=False, separators=(",", ":"))


def loads(text: str | bytes, as_type: type[T] | Any) -> T:
    """Parse JSON text written by :func:`dumps`."""
    result: T = structure(json.loads(text), as_type)
    return result
