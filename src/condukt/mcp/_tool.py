"""An MCP server's tool as a condukt :class:`~condukt.tools.Tool`, and its results as content."""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from ..events import ToolProgress
from ..messages import DocumentBlock, ImageBlock, TextBlock
from ..schema import Schema
from ..tools import Tool, ToolContext, ToolError

if TYPE_CHECKING:
    from ._connection import Channel

__all__ = ["McpTool", "render"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(prefix: str | None, name: str) -> str:
    """The name the model sees: ``<prefix>_<name>``, other characters than ``[A-Za-z0-9_-]`` as ``_``, 64 at most."""
    full = f"{prefix}_{name}" if prefix else name
    return _UNSAFE.sub("_", full)[:64] or "_"


class McpTool(Tool):
    """One tool of an MCP server, called through its connection.

    Its input schema is the server's, as an untrusted
    :class:`~condukt.schema.Schema`: a reference outside it (a URL, a file)
    is refused when the tool is listed (the tool is left out, logged), and
    its regexes run on RE2, never in a backtracking engine on the node's
    thread.

    ``call`` sends ``tools/call`` on the connection's session (waiting for a
    connection being restarted); the agent's tool timeout and abort cancel
    it, and the SDK then sends ``notifications/cancelled`` to the server. A
    result with ``isError`` and a protocol error are raised as
    :class:`~condukt.tools.ToolError` (an error result for the model). The
    server's progress notifications are :class:`~condukt.events.ToolProgress`
    events of the calling run.
    """

    def __init__(self, channel: Channel, remote: types.Tool, prefix: str | None) -> None:
        super().__init__()
        self.channel = channel
        self.remote_name = remote.name
        self.name = tool_name(prefix, remote.name)
        self.description = remote.description or remote.title or remote.name
        schema = dict(remote.input_schema)
        schema.setdefault("type", "object")
        # The server's schema: nothing it refers to is fetched, its regexes run on RE2 (ValueError otherwise).
        self.parameters = Schema.of(schema, untrusted=True)

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Call the tool on the server. Cancelling it cancels the request (the server is told).

        The server's progress notifications for the call are
        :class:`~condukt.events.ToolProgress` events of the calling run.
        """
        channel = self.channel
        session = await channel.session()
        emit = context.emit
        on_progress: ProgressFnT | None = None
        if emit is not None:
            call_id = context.tool_call_id

            async def report(progress: float, total: float | None, message: str | None) -> None:
                await emit(ToolProgress(call_id, channel.redact(message or ""), progress, total))

            on_progress = report
        try:
            result = await session.call_tool(self.remote_name, args, progress_callback=on_progress)
        except MCPError as exc:
            raise ToolError(channel.redact(f"MCP server error {exc.error.code}: {exc.error.message}")) from None
        content = render(result, channel.redact)
        if result.is_error:
            text = "".join(b.text for b in content if isinstance(b, TextBlock)) or "the MCP tool reported an error"
            raise ToolError(text)
        return list(content) if content else ""


def render(result: types.CallToolResult, redact: Any = None) -> tuple[TextBlock | ImageBlock | DocumentBlock, ...]:
    """``result`` as content blocks: text, images, embedded resources; structured content as JSON.

    ``structuredContent`` is used when the result has no other content
    (servers are asked to mirror it as text, and most do). An embedded PDF
    becomes a :class:`~condukt.messages.DocumentBlock` (titled by the last
    segment of its URI). Audio and
    resource links become a line of text saying what they are. ``redact``
    (a ``str -> str`` function) is applied to every text.
    """
    blocks: list[TextBlock | ImageBlock | DocumentBlock] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            blocks.append(TextBlock(item.text))
        elif isinstance(item, types.ImageContent):
            blocks.append(ImageBlock(item.mime_type, item.data))
        elif isinstance(item, types.EmbeddedResource):
            resource = item.resource
            if isinstance(resource, types.TextResourceContents):
                blocks.append(TextBlock(f"[resource {resource.uri}]\n{resource.text}"))
            elif (resource.mime_type or "").startswith("image/"):
                blocks.append(ImageBlock(resource.mime_type or "", resource.blob))
            elif resource.mime_type == "application/pdf":
                name = urllib.parse.unquote(str(resource.uri).rstrip("/").rpartition("/")[2]) or None
                blocks.append(DocumentBlock(resource.mime_type, resource.blob, name))
            else:
                size = len(resource.blob) * 3 // 4
                blocks.append(TextBlock(f"[resource {resource.uri}: {resource.mime_type or 'binary'}, {size} bytes]"))
        elif isinstance(item, types.ResourceLink):
            blocks.append(TextBlock(f"[resource link {item.uri}: {item.name}]"))
        elif isinstance(item, types.AudioContent):
            blocks.append(TextBlock(f"[audio {item.mime_type}, {len(item.data) * 3 // 4} bytes]"))
    if not blocks and result.structured_content is not None:
        blocks.append(TextBlock(json.dumps(result.structured_content, ensure_ascii=False)))
    if redact is not None:
        blocks = [TextBlock(redact(b.text)) if isinstance(b, TextBlock) else b for b in blocks]
    return tuple(blocks)
