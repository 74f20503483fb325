"""condukt.mcp.serve: the SDK's own ClientSession lists and calls a condukt tool, an operation and an agent."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import condukt
import condukt.mcp
from condukt.messages import DocumentBlock, ToolResultMessage

# The exposed program: a function tool, an operation (its model computes the
# review from the request, so every call is answered) and an agent class.
APP = '''
import json, sys
import attrs, trio
import condukt, condukt.mcp
from condukt.testing import FunctionModel, call, reply


@condukt.tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@attrs.frozen
class PullRequest:
    repo: str
    number: int


@attrs.frozen
class Review:
    verdict: str
    summary: str


def reviewer(request):
    if request.tools and any(t.name == "submit_result" for t in request.tools):
        prompt = request.messages[0].text
        number = json.loads(prompt.split("```json")[1].split("```")[0])["number"]
        return call("submit_result", {"verdict": "approve", "summary": f"PR {number} looks good"})
    return reply("I am the reviewer; you said: " + request.messages[-1].text)


class ReviewAgent(condukt.Agent):
    """Reviews pull requests."""

    model = FunctionModel(reviewer)
    review_pr = condukt.operation(input=PullRequest, output=Review, instructions="Review the PR.")


ITEMS = [multiply, ReviewAgent.review_pr, ReviewAgent]
'''


def _load(tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "app.py"
    path.write_text(APP)
    namespace: dict[str, object] = {"__name__": "app"}
    exec(compile(APP, str(path), "exec"), namespace)
    return namespace


async def _exercise(session: ClientSession) -> None:
    await session.initialize()
    listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(listed) == {"multiply", "review_pr", "review_agent"}
    assert listed["multiply"].input_schema["properties"]["a"]["type"] == "integer"
    assert listed["review_pr"].input_schema["required"] == ["repo", "number"]
    assert listed["review_pr"].output_schema is not None
    assert set(listed["review_pr"].output_schema["properties"]) == {"verdict", "summary"}

    product = await session.call_tool("multiply", {"a": 6, "b": 7})
    assert not product.is_error
    assert [c.text for c in product.content if isinstance(c, types.TextContent)] == ["42"]

    review = await session.call_tool("review_pr", {"repo": "tuist/condukt", "number": 7})
    assert not review.is_error, review
    assert review.structured_content == {"verdict": "approve", "summary": "PR 7 looks good"}
    assert json.loads(review.content[0].text) == review.structured_content  # type: ignore[union-attr]

    answer = await session.call_tool("review_agent", {"prompt": "hello"})
    assert answer.content[0].text == "I am the reviewer; you said: hello"  # type: ignore[union-attr]

    bad = await session.call_tool("multiply", {"a": "six"})
    assert bad.is_error
    assert "invalid arguments" in bad.content[0].text  # type: ignore[union-attr]


@asynccontextmanager
async def served_over_http(items: Any) -> AsyncIterator[str]:
    """``condukt.mcp.serve(items)`` over streamable HTTP on 127.0.0.1 for the block; yields its URL."""
    async with trio.open_nursery() as nursery:
        url: str = await nursery.start(
            lambda task_status: condukt.mcp.serve(items, transport="http", port=0, task_status=task_status)
        )
        yield url
        nursery.cancel_scope.cancel()


async def test_serve_over_stdio_answers_the_sdk_client(tmp_path: Path) -> None:
    _load(tmp_path)  # the program is valid here too
    main = tmp_path / "serve.py"
    main.write_text(
        f"import sys, trio\nsys.path.insert(0, {str(tmp_path)!r})\nimport condukt.mcp\nfrom app import ITEMS\n"
        "trio.run(lambda: condukt.mcp.serve(ITEMS, transport='stdio'))\n"
    )
    parameters = StdioServerParameters(command=sys.executable, args=[str(main)], env={"PYTHONPATH": ":".join(sys.path)})
    with trio.fail_after(30):
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            await _exercise(session)


async def test_serve_over_http_answers_the_sdk_client(tmp_path: Path) -> None:
    items = _load(tmp_path)["ITEMS"]
    async with served_over_http(items) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        with trio.fail_after(30):
            async with httpx2.AsyncClient() as client:
                async with streamable_http_client(url, http_client=client) as (read, write):
                    async with ClientSession(read, write) as session:
                        await _exercise(session)


async def test_the_client_reaches_a_served_condukt_over_http(tmp_path: Path) -> None:
    """Both halves together: an agent's tools come from condukt.mcp.serve over streamable HTTP, with a secret header."""
    from condukt.testing import ScriptedModel, call, reply

    items = _load(tmp_path)["ITEMS"]
    model = ScriptedModel([call("multiply", {"a": 3, "b": 5}), reply("fifteen")])
    async with served_over_http(items) as url:
        async with condukt.open_node() as node:
            server = condukt.mcp.http(url, headers={"X-Token": condukt.secrets.static("t0ps3cret")})
            agent = await node.spawn(condukt.Agent, model=model, tools=[server])
            assert await agent.run("3*5?") == "fifteen"
    assert model.requests[-1].messages[-1].text == "15"


async def test_the_client_speaks_sse_to_an_sdk_server() -> None:
    """condukt.mcp.sse against the SDK's own MCPServer (HTTP+SSE transport), served in-process on trio."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve
    from mcp.server.mcpserver import MCPServer

    from condukt.testing import ScriptedModel, call, reply

    sdk = MCPServer("sse-demo")

    @sdk.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    model = ScriptedModel([call("sse_add", {"a": 2, "b": 3}), reply("five")])
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: hypercorn_serve(sdk.sse_app(), config, task_status=task_status))
        async with condukt.open_node() as node:
            agent = await node.spawn(
                condukt.Agent, model=model, tools=[condukt.mcp.sse(f"{binds[0]}/sse", prefix="sse")]
            )
            with trio.fail_after(20):
                assert await agent.run("2+3") == "five"
        nursery.cancel_scope.cancel()
    assert model.requests[-1].messages[-1].text == "5"


async def test_asgi_app_mounts_in_another_starlette_app(tmp_path: Path) -> None:
    """The docs' recipe: mount asgi_app under a prefix and enter its lifespan from the outer app."""
    from functools import partial

    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve
    from starlette.applications import Starlette
    from starlette.routing import Mount

    items = _load(tmp_path)["ITEMS"]
    mcp_app = condukt.mcp.asgi_app(items)
    app = Starlette(routes=[Mount("/tools", mcp_app)], lifespan=lambda _: mcp_app.router.lifespan_context(mcp_app))
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(hypercorn_serve, app, config))
        with trio.fail_after(30):
            async with httpx2.AsyncClient() as client:
                async with streamable_http_client(f"{binds[0]}/tools/mcp", http_client=client) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        product = await session.call_tool("multiply", {"a": 2, "b": 21})
                        assert product.content[0].text == "42"  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()


async def test_a_pdf_a_served_tool_returns_reaches_the_client_agent_as_a_document() -> None:
    """serve() carries a DocumentBlock as an embedded resource; the client turns it back into one."""
    from condukt.testing import ScriptedModel, call, reply

    pdf = DocumentBlock.from_bytes(b"%PDF-1.4 quarterly", "application/pdf", "q3 report.pdf")

    @condukt.tool
    async def fetch_report() -> DocumentBlock:
        """Fetches the quarterly report."""
        return pdf

    model = ScriptedModel([call("fetch_report", {}), reply("read it")])
    async with served_over_http([fetch_report]) as url:
        async with condukt.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model, tools=[condukt.mcp.http(url)])
            with trio.fail_after(30):
                assert await agent.run("Q3?") == "read it"
    result = model.requests[-1].messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert result.content == (pdf,)  # media type, bytes and title (the name in the resource's URI) survive


async def test_a_text_document_a_served_tool_returns_reaches_the_client_as_its_text() -> None:
    """A text document goes as an embedded text resource: its text, not a line saying a blob was there."""
    from condukt.testing import ScriptedModel, call, reply

    @condukt.tool
    async def fetch_notes() -> DocumentBlock:
        """Fetches the meeting notes."""
        return DocumentBlock.from_text("Ship on Friday.", "text/markdown", "notes.md")

    model = ScriptedModel([call("fetch_notes", {}), reply("Friday")])
    async with served_over_http([fetch_notes]) as url:
        async with condukt.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model, tools=[condukt.mcp.http(url)])
            with trio.fail_after(30):
                assert await agent.run("When?") == "Friday"
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("fetch_notes", {})
    [content] = result.content
    assert content.type == "resource"
    resource = content.resource
    assert resource.text == "Ship on Friday." and resource.mime_type == "text/markdown"  # type: ignore[union-attr]
    assert str(resource.uri) == "file:///notes.md"
    sent = model.requests[-1].messages[-1]
    assert isinstance(sent, ToolResultMessage) and "Ship on Friday." in sent.text
