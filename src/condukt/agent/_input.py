"""Structured input: a value rendered into a run's prompt as JSON, checked against its schema first.

Used at the edge (``AgentHandle.run(input=..., input_schema=...)``, so a bad
input fails in the caller) and by the sub-agents' tool (a role's ``input``).
"""

from __future__ import annotations

import json
from typing import Any

from ..schema import Schema, is_structured_type
from ._errors import InvalidInput

__all__ = ["render_input"]


def render_input(value: Any, schema: Any) -> str:
    """Validate ``value`` against ``schema`` and render it for the prompt.

    ``value`` may be plain JSON data or an instance of an attrs class, a
    dataclass or a pydantic model (dumped to its fields first). Raises
    :class:`InvalidInput` (before any model request) when it does not fit.
    """
    data = Schema.of(type(value)).dump(value) if is_structured_type(type(value)) else value
    if schema is not None:
        errors = Schema.of(schema).errors(data)
        if errors:
            raise InvalidInput("input does not match its schema: " + "; ".join(errors), errors)
    try:
        text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"input is not JSON-serialisable: {exc}", [str(exc)]) from exc
    return f"Input:\n```json\n{text}\n```"
