"""Odd requests get typed JSON errors, never a 500 or a text/plain page, on both servers: bodies nested too
deeply on every route that reads JSON, numbers the observer cannot read, routes and methods that do not
exist; and tokens no client could send are refused when the app is made."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import condukt
import condukt.web
import condukt.web.observer as observer

from .helpers import AUTH, TOKEN, Echo, Triage
from .servers import both_servers, served

NESTED = b"[" * 200_000


def make_app(node: Any) -> Any:
    return condukt.web.create_app(node, agents={"echo": Echo}, operations=[Triage.classify], token=TOKEN,
                                  observer=True)


@both_servers
async def test_json_nested_too_deeply_is_400_invalid_json_on_every_route_that_reads_json(server: str) -> None:
    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        session = (await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH)).json()["session"]
        routes = ["/agents/echo/runs", f"/sessions/{session}/steer", f"/sessions/{session}/approvals/x",
                  "/operations/classify"]
        for path in routes:
            for body in (NESTED, b'{"prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}"):
                answer = await client.post(path, content=body, headers={**AUTH, "Content-Type": "application/json"})
                assert answer.status_code in (400, 422), (path, answer.status_code, answer.text[:200])
                assert answer.json()["error"] in ("InvalidJSON", "InvalidRequest", "InvalidInput"), path
        deep = await client.post("/agents/echo/runs", content=NESTED, headers={**AUTH, "Content-Type": "application/json"})
        assert deep.json() == {"error": "InvalidJSON", "message": "the body is JSON nested too deeply"}


@both_servers
async def test_observer_numbers_it_cannot_read_are_422(server: str) -> None:
    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        odd = ["²", "١٢", "-1", "1e3", "9" * 5000, "1" * 19, " 1", "0x1"]
        for value in odd:
            events = await client.get("/observer/api/agents/x/events", params={"after": value}, headers=AUTH)
            assert events.status_code == 422 and events.json()["error"] == "InvalidRequest", value
            abort = await client.post(f"/observer/api/processes/{value}/abort", headers=AUTH)
            assert abort.status_code in (404, 422) and abort.json()["error"] in ("InvalidRequest", "NotFound"), value
        assert (await client.get("/observer/api/agents/x/events", params={"after": "1" * 18},
                                 headers=AUTH)).status_code == 200
        missing = await client.post(f"/observer/api/processes/{'9' * 18}/abort", headers=AUTH)
        assert missing.status_code == 404 and missing.json()["error"] == "AgentNotFound"


@both_servers
async def test_starlettes_own_answers_are_json_errors_too(server: str) -> None:
    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        for method, path, status, error in [
            ("GET", "/nope", 404, "NotFound"),
            ("GET", "/agents/x/runs", 405, "MethodNotAllowed"),
            ("DELETE", "/healthz", 405, "MethodNotAllowed"),
            ("GET", "/observer/api/nope", 404, "NotFound"),
            ("PUT", "/observer/api/snapshot", 405, "MethodNotAllowed"),
        ]:
            answer = await client.request(method, path, headers=AUTH)
            assert answer.status_code == status, (method, path)
            assert answer.headers["content-type"] == "application/json", (method, path)
            assert answer.json()["error"] == error and answer.json()["message"], (method, path)
        assert "POST" in (await client.get("/agents/x/runs", headers=AUTH)).headers["allow"]


@both_servers
async def test_the_observer_alone_answers_json_errors(server: str) -> None:
    async with served(server, lambda node: observer.create_app(node)) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.get("/nope")
        assert (answer.status_code, answer.json()["error"]) == (404, "NotFound")


def test_tokens_no_client_can_send_are_refused_when_the_app_is_made() -> None:
    for bad in ["tökén", "two words", "tab\there", "new\nline", "\u00a0nbsp", ""]:
        with pytest.raises(ValueError, match="token"):
            condukt.web.create_app(token=bad)
        with pytest.raises(ValueError, match="token"):
            observer.create_app(token=bad)
    condukt.web.create_app(token="A-z0-9._~+/=!#$%&'*^`|")  # every printable ASCII character is fine


@both_servers
async def test_a_token_is_compared_as_the_bytes_that_came(server: str) -> None:
    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        utf8 = {"Authorization": b"Bearer " + f"{TOKEN}é".encode()}
        latin1 = {"Authorization": b"Bearer " + f"{TOKEN}é".encode("latin-1")}
        for headers in (utf8, latin1, {"Authorization": f"Bearer {TOKEN} x"}):
            assert (await client.get("/openapi.json", headers=headers)).status_code == 401
        assert (await client.get("/openapi.json", headers={"Authorization": f"bEaReR  {TOKEN}"})).status_code == 200
