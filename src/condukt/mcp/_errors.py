"""The errors of :mod:`condukt.mcp` (no SDK import: ``import condukt.mcp`` stays cheap)."""

from __future__ import annotations

from ..otp import ConduktError

__all__ = ["ConnectionLost", "McpConnectError"]


class McpConnectError(ConduktError):
    """An MCP server could not be started or connected to (raised by the agent's start)."""


class ConnectionLost(ConduktError):
    """The MCP server closed the connection (it exited): the connection process crashes and is restarted."""
