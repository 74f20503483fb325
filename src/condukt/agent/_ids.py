"""Session ids: UUIDv7 (time-ordered, RFC 9562)."""

from __future__ import annotations

import os
import time

__all__ = ["uuid7"]


def uuid7() -> str:
    """A new UUIDv7 string: 48-bit Unix milliseconds, version 7, 74 random bits."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    h = f"{value:032x}"  # formatted by hand: uuid.UUID costs more than the rest of this function
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
