"""The errors of :mod:`condukt.mcp` (no SDK import: ``import condukt.mcp`` stays cheap)."""

from __future__ import annotations

from ..otp import ConduktError

__all__ = ["ConnectionLost", "McpConnectError", "McpRequestError"]


class McpConnectError(ConduktError):
    """An MCP server could not be started or connected to (raised by the agent's start)."""


class ConnectionLost(ConduktError):
    """The MCP server closed the connection (it exited): the connection process crashes and is restarted."""


class McpRequestError(ConduktError):
    """An MCP server answered a request (``prompts/get``, ``resources/read``...) with an error, or is not running."""
