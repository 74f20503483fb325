"""Limits enforced by the endpoint itself, driven through ASGI directly."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest

import condukt
import condukt.web

from .helpers import TOKEN, Echo, Triage


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
            "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"transfer-encoding", b"chunked"),
                        (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        }  # fmt: skip
        await app(scope, receive, send)
        assert sent[0]["status"] == 413
        assert pulled == 3  # 1,200 bytes: just past the limit, not the 400 kB the client meant to send


def test_importing_without_starlette_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)
    for name in [m for m in sys.modules if m == "condukt.web" or m.startswith("condukt.web.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=r"pip install 'condukt\[web\]'"):
        importlib.import_module("condukt.web")


def test_bad_arguments_fail_at_once() -> None:
    with pytest.raises(TypeError, match="Agent subclass"):
        condukt.web.create_app(agents={"x": object})
    with pytest.raises(TypeError, match="bound operations"):
        condukt.web.create_app(operations=[Triage.classify.operation])
    with pytest.raises(ValueError, match="max_body_size"):
        condukt.web.create_app(max_body_size=0)
    with pytest.raises(ValueError, match="max_restarts"):
        condukt.web.create_app(max_restarts=-1)
    with pytest.raises(ValueError, match="token"):
        condukt.web.create_app(token="")
    with pytest.raises(TypeError, match="node must be"):
        condukt.web.create_app(node="localhost")  # type: ignore[arg-type]
