"""MCP: tools from any MCP server, and condukt as an MCP server (extra ``[mcp]``).

Built on the official ``mcp`` SDK, which runs on anyio: under trio (condukt's
runtime) anyio uses its trio backend, so the SDK's sessions and transports
are ordinary trio tasks and cancel scopes here.

Client — put a server in an agent's tools list::

    def tools(self):
        return [condukt.mcp.stdio("python", "server.py", env={"TOKEN": condukt.secrets.env("TOKEN")}),
                condukt.mcp.http("https://host/mcp", headers={...}, prefix="gh", resources=True)]

A server's prompts and resources: ``await server.get_prompt(name, args)``
(an :class:`McpPrompt`: ``agent.run(prompt.text)``), ``list_prompts``,
``list_resources``, ``read_resource``; ``resources=True`` also offers the
model tools to list and read them.

Server — expose condukt tools, operations or an agent to MCP clients::

    await condukt.mcp.serve([MyTool, ReviewAgent.review_pr], transport="stdio")
    app = condukt.mcp.asgi_app([MyTool])          # streamable HTTP, mountable

See ``docs/mcp.md``.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if importlib.util.find_spec("mcp") is None:  # pragma: no cover - depends on the environment
    raise ImportError("condukt.mcp needs the official MCP SDK: install the extra with `pip install 'condukt[mcp]'`")

from ._definition import McpPrompt, McpServer, http, sse, stdio
from ._errors import ConnectionLost, McpConnectError, McpRequestError

if TYPE_CHECKING:
    from ._serve import asgi_app, serve, server_for
    from ._tool import McpTool, render

# The SDK is imported when a server connects or one of these is first used, not by
# `import condukt.mcp` (most of its cost: benchmarks/mcp_servers.py measures it).
_LAZY = {"asgi_app": "_serve", "serve": "_serve", "server_for": "_serve", "McpTool": "_tool", "render": "_tool"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ConnectionLost",
    "McpConnectError",
    "McpPrompt",
    "McpRequestError",
    "McpServer",
    "McpTool",
    "asgi_app",
    "http",
    "render",
    "serve",
    "server_for",
    "sse",
    "stdio",
]
