"""API keys: taken from an option or the environment, checked once, at agent start."""

from __future__ import annotations

import os

from .._errors import MissingApiKey

__all__ = ["resolve_api_key"]


def resolve_api_key(provider: str, api_key: str | None, env_var: str | None, *, required: bool = True) -> str | None:
    """``api_key``, else the environment variable ``env_var``; :class:`MissingApiKey` if required and neither is set.

    A key that cannot go into an HTTP header (control characters such as a
    trailing newline pasted with it, non-ASCII characters) raises
    ``ValueError`` here, at agent start, rather than failing every request.
    The message never shows the key.
    """
    if api_key:
        return _checked_key(provider, api_key, "api_key")
    if env_var:
        value = os.environ.get(env_var)
        if value:
            return _checked_key(provider, value, env_var)
    if required:
        where = f"set {env_var} or " if env_var else ""
        raise MissingApiKey(f"{provider}: no API key: {where}pass api_key=... when starting the agent")
    return None


def _checked_key(provider: str, key: str, source: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"{provider}: {source} must be a str, got {type(key).__name__}")
    if not key.isascii() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        raise ValueError(
            f"{provider}: the API key from {source} contains control or non-ASCII characters"
            " (a pasted newline?); it cannot be sent in an HTTP header"
        )
    if key != key.strip():
        raise ValueError(f"{provider}: the API key from {source} has leading or trailing spaces")
    return key
