"""Bad server definitions fail where they are written, with a typed error; equal definitions are equal."""

from __future__ import annotations

import pytest
import trio

import condukt
import condukt.mcp


def test_bad_definitions_raise_typed_errors() -> None:
    with pytest.raises(TypeError, match="command"):
        condukt.mcp.stdio("")
    with pytest.raises(TypeError, match="arguments must be strings"):
        condukt.mcp.stdio("python", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="env"):
        condukt.mcp.stdio("python", env={"A": 1})
    with pytest.raises(ValueError, match="http:// or https://"):
        condukt.mcp.http("ftp://host/mcp")
    with pytest.raises(TypeError, match="unknown option"):
        condukt.mcp.sse("http://host/sse", retries=3)
    with pytest.raises(TypeError, match="prefix"):
        condukt.mcp.http("http://host/mcp", prefix="")


def test_equal_definitions_are_equal_and_repr_shows_no_secret_values() -> None:
    token = condukt.secrets.static("hunter2-token")
    a = condukt.mcp.http("https://host/mcp", headers={"Authorization": token}, prefix="gh")
    b = condukt.mcp.http("https://host/mcp", headers={"Authorization": token}, prefix="gh")
    assert a == b and hash(a) == hash(b)
    assert a.key() == condukt.mcp.http("https://host/mcp", headers={"Authorization": token}).key()
    assert "hunter2" not in repr(a) and "Authorization" in repr(a)
    literal = condukt.mcp.stdio("python", "s.py", env={"TOKEN": "plain-secret-value"})
    assert "plain-secret-value" not in repr(literal)


def test_a_listing_s_odd_tools_are_left_out_and_names_are_made_safe() -> None:
    import mcp_types as types

    from condukt.mcp._connection import Channel

    channel = Channel.__new__(Channel)
    channel.definition = condukt.mcp.stdio("python", "s.py")
    channel.listing = (
        types.Tool(name="files.read", description="Read a file.", input_schema={"type": "object"}),
        types.Tool(name="files_read", description="A clash once made safe.", input_schema={"type": "object"}),
        types.Tool(name="broken", description="Not an object schema.", input_schema={"type": "string"}),
    )
    from condukt.mcp._definition import _usable

    (tool,) = _usable(channel, "fs")
    assert tool.name == "fs_files_read" and tool.remote_name == "files.read"  # type: ignore[attr-defined]


async def test_the_sdk_runs_on_anyio_s_trio_backend() -> None:
    """What the SDK treats as cancellation is trio's: a tool timeout or an abort cancels its requests."""
    import anyio

    assert anyio.get_cancelled_exc_class() is trio.Cancelled
    with trio.move_on_after(0.01):
        await anyio.sleep(10)  # an anyio wait, cancelled by a trio scope


def test_results_map_to_condukt_content() -> None:
    import base64

    import mcp_types as types

    from condukt.messages import DocumentBlock, ImageBlock, TextBlock

    png = base64.b64encode(b"\x89PNG....").decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="token=abcd-secret"),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
            types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri="file:///a.txt", text="hello")
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///b.pdf", blob="AAAA", mime_type="application/pdf"),
            ),
        ]
    )
    blocks = condukt.mcp.render(result, lambda text: text.replace("abcd-secret", "[REDACTED:T]"))
    assert blocks == (
        TextBlock("token=[REDACTED:T]"),
        ImageBlock("image/png", png),
        TextBlock("[resource file:///a.txt]\nhello"),
        DocumentBlock("application/pdf", "AAAA", "b.pdf"),  # a PDF reaches the model as a document
    )
    structured = types.CallToolResult(content=[], structured_content={"result": 5})
    assert condukt.mcp.render(structured) == (TextBlock('{"result": 5}'),)
