"""Session ids: UUIDv7 (time-ordered, RFC 9562)."""

from __future__ import annotations

import os
import time

__all__ = ["uuid7"]


#: The 74 random bits of a UUIDv7 (all but the version and variant fields), and those two fields.
_RANDOM = ((1 << 80) - 1) & ~(0xF << 76) & ~(0b11 << 62)
_VERSION_VARIANT = (0x7 << 76) | (0b10 << 62)


def uuid7() -> str:
    """A new UUIDv7 string: 48-bit Unix milliseconds, version 7, 74 random bits."""
    millis = time.time_ns() // 1_000_000
    value = ((millis & 0xFFFFFFFFFFFF) << 80) | (int.from_bytes(os.urandom(10), "big") & _RANDOM) | _VERSION_VARIANT
    h = f"{value:032x}"  # formatted by hand: uuid.UUID costs more than the rest of this function
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
