"""Shared pieces of the provider tests: agents pointed at the local server, a tool."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable
from typing import Any, ClassVar

import attrs
import trio
import trustme

import condukt
from condukt.events import Event
from condukt.testing.server import ProtocolServer

PROTOCOLS = ("anthropic", "openai")
#: With Gemini, for the tests that hold for every protocol alike.
ALL_PROTOCOLS = (*PROTOCOLS, "gemini", "openai-responses")
API_KEY = "test-key-0123456789"


def tokens(usage: condukt.messages.Usage) -> condukt.messages.Usage:
    """``usage`` without its cost: the token counts a test checks (the cost comes from the price table)."""
    return attrs.evolve(usage, cost=None)


def base_url(server: ProtocolServer, protocol: str) -> str:
    """Anthropic's and Gemini's base URL is the host; OpenAI-compatible ones include ``/v1``."""
    return server.url + "/v1" if protocol.startswith("openai") else server.url


async def spawn(
    node: condukt.Node,
    server: ProtocolServer,
    protocol: str,
    *,
    stream: bool = True,
    tools: Any = (),
    model_options: dict[str, Any] | None = None,
    **options: Any,
) -> condukt.AgentHandle:
    """A plain :class:`condukt.Agent` talking ``protocol`` to the local server."""
    agent: condukt.AgentHandle = await node.spawn(
        condukt.Agent,
        model=f"{protocol}:test-model",
        api_key=API_KEY,
        base_url=base_url(server, protocol),
        tools=list(tools),
        model_options={"stream": stream, **(model_options or {})},
        **options,
    )
    return agent


async def collect(agent: condukt.AgentHandle, prompt: str, **options: Any) -> tuple[list[Event], condukt.EventStream]:
    """Every event of a streamed run, and the stream (for ``result`` / ``error``)."""
    events: list[Event] = []
    async with agent.stream(prompt, **options) as stream:
        async for event in stream:
            events.append(event)
    return events, stream


class Weather(condukt.Tool):
    """Answers with a fixed temperature."""

    name = "get_weather"
    description = "Gets the current weather for a location"
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    }

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        return f"Temperature: 70F in {args['location']}"


async def read_head(stream: trio.abc.ReceiveStream) -> bytes:
    """Read one request head (through its blank line) off ``stream``; ``b""`` at EOF."""
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return b""
        buffer += data
    return bytes(buffer)


async def serve_tcp(nursery: trio.Nursery, handler: Callable[[trio.SocketStream], object]) -> str:
    """Serve ``handler`` on an ephemeral port of 127.0.0.1 in ``nursery``; the server's base URL."""
    [listener] = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    return f"http://127.0.0.1:{listener.socket.getsockname()[1]}"


def tls_contexts(hostname: str = "127.0.0.1") -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context): a certificate for ``hostname`` from a fresh test CA the client trusts."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(hostname).configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    return server_context, client_context
