"""Limits enforced by the endpoint itself, driven through ASGI directly."""

from __future__ import annotations

from typing import Any

import condukt
import condukt.web

from .helpers import TOKEN, Echo


async def test_the_body_limit_applies_while_reading_not_after() -> None:
    """A chunked body (no Content-Length) is refused once the limit is passed; the rest is never read."""
    async with condukt.open_node() as node:
        app = condukt.web.create_app(node, agents={"echo": Echo}, token=TOKEN, max_body_size=1000)
        pulled = 0
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            nonlocal pulled
            pulled += 1
            return {"type": "http.request", "body": b"x" * 400, "more_body": pulled < 1000}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/agents/echo/runs", "raw_path": b"/agents/echo/runs", "query_string": b"", "root_path": "",
            "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"transfer-encoding", b"chunked")],
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        }  # fmt: skip
        await app(scope, receive, send)
        assert sent[0]["status"] == 413
        assert pulled == 3  # 1,200 bytes: just past the limit, not the 400 kB the client meant to send
