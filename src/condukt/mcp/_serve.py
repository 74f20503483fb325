"""condukt as an MCP server: tools, operations and agents exposed with the SDK's low-level ``Server``."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import trio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from ..agent import Agent, AgentHandle, BoundOperation
from ..agent import run as run_once
from ..messages import DocumentBlock, ImageBlock, TextBlock
from ..otp import Node
from ..schema import Schema
from ..serialization import unstructure
from ..tools import Tool, ToolContext, ToolError, render_result, resolve_tools

__all__ = ["asgi_app", "serve", "server_for"]

_PROMPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "What to ask the agent."}},
    "required": ["prompt"],
}
_NO_INPUT: dict[str, Any] = {"type": "object", "properties": {}}


@attrs.frozen
class _Exposed:
    """One MCP tool: its listing and what a call runs (returning content blocks, structured data or None)."""

    tool: types.Tool
    run: Callable[[dict[str, Any]], Awaitable[tuple[tuple[TextBlock | ImageBlock | DocumentBlock, ...], Any]]]
    validate: Callable[[dict[str, Any]], str | None]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _for_tool(tool: Tool) -> _Exposed:
    definition = tool.definition()

    async def run(args: dict[str, Any]) -> tuple[tuple[TextBlock | ImageBlock | DocumentBlock, ...], Any]:
        context = ToolContext(None, Path.cwd(), tool.opts)
        return render_result(await tool.call(args, context)), None

    schema = dict(definition.parameters)
    listing = types.Tool(name=definition.name, description=definition.description, input_schema=schema)
    return _Exposed(listing, run, tool.validate)


def _object_schema(spec: Any) -> tuple[dict[str, Any], bool]:
    """The JSON schema of ``spec`` as an object schema, and whether the value had to be wrapped as ``result``."""
    schema = dict(Schema.of(spec).json)
    if schema.get("type") == "object":
        return schema, False
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}, True


def _for_operation(bound: BoundOperation, node: Node | None, options: Mapping[str, Any]) -> _Exposed:
    operation = bound.operation
    input_schema = Schema.of(operation.input) if operation.input is not None else None
    output_json, wrapped = _object_schema(operation.output)
    output_schema = Schema.of(operation.output)

    async def run(args: dict[str, Any]) -> tuple[tuple[TextBlock | ImageBlock | DocumentBlock, ...], Any]:
        value = input_schema.convert(args) if input_schema is not None else None
        result = await bound(value, node=node, **options)
        data = output_schema.dump(result)
        structured = {"result": data} if wrapped else data
        return (TextBlock(json.dumps(data, ensure_ascii=False)),), structured

    listing = types.Tool(
        name=operation.name,
        description=operation.instructions,
        input_schema=dict(input_schema.json) if input_schema is not None else _NO_INPUT,
        output_schema=output_json,
    )

    def validate(args: dict[str, Any]) -> str | None:
        if input_schema is None or input_schema.is_valid(args):
            return None
        errors = input_schema.errors(args, limit=1)
        return errors[0] if errors else "the arguments do not match the schema"

    return _Exposed(listing, run, validate)


def _for_agent(agent: type[Agent] | AgentHandle, node: Node | None, options: Mapping[str, Any]) -> _Exposed:
    if isinstance(agent, AgentHandle):
        handle = agent
        name = _snake(handle.server_class.__name__)

        async def run(args: dict[str, Any]) -> tuple[tuple[TextBlock | ImageBlock | DocumentBlock, ...], Any]:
            return render_result(await handle.run(args["prompt"])), None

        description = (handle.server_class.__doc__ or f"Ask the {name} agent.").strip().splitlines()[0]
    else:
        cls = agent
        name = _snake(cls.__name__)

        async def run(args: dict[str, Any]) -> tuple[tuple[TextBlock | ImageBlock | DocumentBlock, ...], Any]:
            return render_result(await run_once(cls, args["prompt"], node=node, **options)), None

        description = (cls.__doc__ or f"Ask the {name} agent.").strip().splitlines()[0]
    prompt = Schema.of(_PROMPT_SCHEMA)

    def validate(args: dict[str, Any]) -> str | None:
        return None if prompt.is_valid(args) else 'expected {"prompt": "..."}'

    listing = types.Tool(name=name, description=description, input_schema=_PROMPT_SCHEMA)
    return _Exposed(listing, run, validate)


def _exposed(items: Any, node: Node | None, options: Mapping[str, Any]) -> dict[str, _Exposed]:
    entries = [items] if not isinstance(items, (list, tuple)) else list(items)
    if not entries:
        raise ValueError("serve needs at least one tool, operation or agent")
    exposed: dict[str, _Exposed] = {}
    for entry in entries:
        if isinstance(entry, BoundOperation):
            one = _for_operation(entry, node, options)
        elif isinstance(entry, AgentHandle) or (isinstance(entry, type) and issubclass(entry, Agent)):
            one = _for_agent(entry, node, options)
        else:
            (tool,) = resolve_tools([entry])  # TypeError for what is not a tool
            one = _for_tool(tool)
        if one.tool.name in exposed:
            raise ValueError(f"two entries are named {one.tool.name!r}")
        exposed[one.tool.name] = one
    return exposed


def _content(blocks: Iterable[TextBlock | ImageBlock | DocumentBlock]) -> list[types.ContentBlock]:
    content: list[types.ContentBlock] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            content.append(types.TextContent(type="text", text=_well_formed(block.text)))
        elif isinstance(block, DocumentBlock):
            # MCP has no document content: an embedded resource carries it, named by its title;
            # a text document as a text resource, which clients read (a blob of text they only list).
            uri = "file:///" + urllib.parse.quote(block.title or "document")
            text = _text_of(block)
            resource: types.TextResourceContents | types.BlobResourceContents
            if text is not None:
                resource = types.TextResourceContents(uri=uri, mime_type=block.media_type, text=_well_formed(text))
            else:
                resource = types.BlobResourceContents(uri=uri, mime_type=block.media_type, blob=block.data)
            content.append(types.EmbeddedResource(type="resource", resource=resource))
        else:
            content.append(types.ImageContent(type="image", data=block.data, mime_type=block.media_type))
    return content


def _text_of(block: DocumentBlock) -> str | None:
    """The text of a UTF-8 ``text/*`` document; ``None`` for another one."""
    if not block.is_text:
        return None
    try:
        return block.to_text()
    except ValueError:  # not UTF-8 (or not base64): sent as the blob it is
        return None


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_well_formed(f"Error: {message}"))], is_error=True
    )


def _well_formed(value: Any) -> Any:
    """``value`` with lone surrogates (no UTF-8 form) as U+FFFD, in strings, lists and dicts.

    The SDK's JSON encoder (pydantic's) fails on them, which lost the whole
    result; it cannot write them as JSON escapes either, so they are replaced.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {_well_formed(key): _well_formed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_well_formed(item) for item in value]
    return value


def server_for(
    items: Any,
    *,
    name: str = "condukt",
    node: Node | None = None,
    options: Mapping[str, Any] | None = None,
) -> Server[Any]:
    """The SDK's low-level MCP ``Server`` exposing ``items``.

    ``items`` is one entry or a list of them: a condukt tool (class,
    instance or ``@condukt.tool`` function; called with a context whose
    ``agent`` is None and ``cwd`` the process's), an operation
    (``ReviewAgent.review_pr``: its input schema is the MCP tool's input,
    its output schema the tool's ``outputSchema``, the result comes back as
    ``structuredContent`` and JSON text), an :class:`~condukt.Agent`
    subclass (one tool named after the class in snake_case, taking
    ``{"prompt": ...}``, each call a one-shot run) or an
    :class:`~condukt.AgentHandle` (the same, on that running agent).
    ``options`` are start options for operations and agent classes (e.g.
    ``model=``); ``node`` the node they start on (else a temporary one per
    call). A failing call is an ``isError`` result.

    Raises ``TypeError`` for an entry that is none of these and
    ``ValueError`` for two entries with one name.
    """
    exposed = _exposed(items, node, dict(options or {}))
    listing = types.ListToolsResult(tools=[one.tool for one in exposed.values()])

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        one = exposed.get(params.name)
        if one is None:
            return _error(f"unknown tool {params.name!r}; available: {', '.join(exposed)}")
        args = dict(params.arguments or {})
        problem = one.validate(args)
        if problem is not None:
            return _error(f"invalid arguments for {params.name}: {problem}")
        try:
            blocks, structured = await one.run(args)
        except ToolError as exc:
            return _error(str(exc))
        except Exception as exc:
            return _error(f"{type(exc).__name__}: {exc}")
        if structured is not None and attrs.has(type(structured)):
            structured = unstructure(structured)
        structured = _well_formed(structured)
        return types.CallToolResult(content=_content(blocks), structured_content=structured)

    return Server(name, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def asgi_app(
    items: Any,
    *,
    path: str = "/mcp",
    name: str = "condukt",
    node: Node | None = None,
    options: Mapping[str, Any] | None = None,
    host: str = "127.0.0.1",
) -> Any:
    """A Starlette app serving ``items`` (see :func:`server_for`) over streamable HTTP at ``path``.

    Mount it in another ASGI app; its lifespan runs the SDK's session
    manager, so the app that mounts it must enter it (Starlette does not run
    a mounted app's lifespan): ``lifespan=lambda _: mcp_app.router.lifespan_context(mcp_app)``.
    ``host`` is the host the server answers as (DNS-rebinding protection
    allows only local Host headers for a local host).
    """
    server = server_for(items, name=name, node=node, options=options)
    return server.streamable_http_app(streamable_http_path=path, host=host)


async def serve(
    items: Any,
    transport: str = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    name: str = "condukt",
    node: Node | None = None,
    options: Mapping[str, Any] | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``items`` (see :func:`server_for`) as an MCP server until cancelled.

    ``transport="stdio"`` speaks MCP on this process's stdin and stdout (how
    an editor or desktop client starts a local server) and returns when
    stdin closes. ``transport="http"`` serves streamable HTTP at
    ``http://host:port/path`` with hypercorn on trio (port 0 picks a free
    one); with ``await nursery.start(serve, ...)`` the endpoint's URL is
    returned once it accepts connections. Cancellation stops the server.
    """
    server = server_for(items, name=name, node=node, options=options)
    if transport == "stdio":
        async with stdio_server() as (read, write):
            task_status.started("stdio")
            await server.run(read, write, server.create_initialization_options())
        return
    if transport != "http":
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve as hypercorn_serve
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("serving MCP over HTTP needs hypercorn: `pip install 'condukt[mcp]'`") from exc

    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = None

    async def run(*, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        await hypercorn_serve(app, config, task_status=task_status)  # type: ignore[arg-type]  # Starlette is an ASGI app

    async with trio.open_nursery() as nursery:
        binds = await nursery.start(run)
        task_status.started(f"{binds[0]}{path}")
