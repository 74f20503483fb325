"""JSON for clients, total: every string Python holds can be sent, lone surrogates included.

A lone surrogate (``"\\ud800"``) is legal in a JSON escape and in a model's
output, and Python strings hold it, but it has no UTF-8 encoding:
``json.dumps(..., ensure_ascii=False).encode()`` raises on it, which used
to turn a finished run into a 500 and kill a stream at its first byte.
Here such a character is written as its JSON escape (``\\ud800``), which
every JSON parser reads back to the same string (Python's and
JavaScript's included): nothing is lost and the bytes stay valid UTF-8.
Non-finite floats, which JSON cannot carry, become ``null``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import JSONResponse as _StarletteJSONResponse

__all__ = ["JSONResponse", "dumps", "sse"]

_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def dumps(data: Any) -> bytes:
    """``data`` (JSON data: dicts, lists, str, numbers, bools, None) as compact UTF-8 JSON; never fails on a str.

    Raises ``TypeError`` only for a value that is not JSON data (an object
    of another type), as :func:`json.dumps` does.
    """
    try:
        text = _encode(data)
    except ValueError:  # NaN or an infinity: null, as JavaScript's JSON.stringify writes them
        text = _encode(_finite(data))
    # Only a lone surrogate can fail to encode; it sits inside a JSON string, where
    # backslashreplace writes exactly its JSON escape (\udXXX).
    return text.encode("utf-8", "backslashreplace")


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(item) for item in data]
    return data


def sse(event: str, data: Any) -> bytes:
    """One Server-Sent Event: ``event: <event>`` and ``data: <JSON of data>`` (a blank line ends it)."""
    return b"event: " + event.encode("ascii") + b"\ndata: " + dumps(data) + b"\n\n"


class JSONResponse(_StarletteJSONResponse):
    """Starlette's ``JSONResponse``, encoded with :func:`dumps` (lone surrogates escaped, never a 500)."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
