"""What a hostile page in a browser on the same machine can send, refused by every surface on every route:
a foreign Host (DNS rebinding), a foreign Origin (cross-site requests) and bodies that are not JSON
(cross-site "simple" requests need no preflight), with or without a token, on both servers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from starlette.routing import Mount, Route

import condukt
import condukt.web
import condukt.web.observer as observer
from condukt.testing import FunctionModel, call, reply

from .helpers import Triage
from .servers import both_servers, served

#: Host headers a page of another site can make a browser send (its own name, rebound to this address).
FOREIGN_HOSTS = ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}", "0.0.0.0:{port}",
                 "localhost.evil.example", "[::2]:{port}"]
#: Origins of pages other than the app's own.
FOREIGN_ORIGINS = ["http://evil.example", "https://evil.example:{port}", "null", "http://localhost:1",
                   "http://127.0.0.1:1", "file://"]
#: Bodies a page can send cross-site without a CORS preflight.
SIMPLE_BODIES = ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=x"]


def shell_agent(marker: Path) -> condukt.ChildSpec:
    """An agent whose first turn runs `touch <marker>` with bash: what a successful cross-site run would do."""
    model = FunctionModel(
        lambda request: call("bash", {"command": f"touch {marker}"}) if len(request.messages) == 1 else reply("done")
    )
    return condukt.ChildSpec(None, condukt.Agent, kwargs={"model": model, "tools": [condukt.tools.Bash],
                                                          "cwd": marker.parent})


def endpoints(app: Any) -> list[tuple[str, str]]:
    """Every (method, path) of a Starlette app, mounts included, path parameters filled in."""
    found: list[tuple[str, str]] = []

    def walk(routes: list[Any], prefix: str) -> None:
        for route in routes:
            if isinstance(route, Mount):
                walk(route.routes, prefix + route.path)
            elif isinstance(route, Route):
                path = re.sub(r"{[^}]+}", "1", prefix + route.path)
                found.extend((method, path) for method in sorted(route.methods or ()) if method != "HEAD")

    walk(app.routes, "")
    return found


async def sweep(url: str, routes: list[tuple[str, str]], *, token: str | None = None) -> int:
    """Every trick on every route; each refused with its typed JSON error. Returns how many requests were made."""
    port = httpx.URL(url).port
    auth = {} if token is None else {"Authorization": f"Bearer {token}"}
    made = 0
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        for method, path in routes:
            content = b'{"prompt": "touch it"}'
            as_json = {"Content-Type": "application/json"}
            for host in FOREIGN_HOSTS:
                answer = await client.request(method, path, content=content, headers={
                    **auth, **as_json, "Host": host.format(port=port)})
                assert (answer.status_code, answer.json()["error"]) == (421, "HostNotAllowed"), (method, path, host)
                made += 1
            for origin in FOREIGN_ORIGINS:
                answer = await client.request(method, path, content=content, headers={
                    **auth, **as_json, "Origin": origin.format(port=port)})
                assert (answer.status_code, answer.json()["error"]) == (403, "OriginNotAllowed"), (method, path, origin)
                made += 1
            if method in ("GET", "HEAD"):
                continue
            for kind in SIMPLE_BODIES:
                answer = await client.request(method, path, content=b'{"prompt": "touch it"}',
                                              headers={**auth, "Content-Type": kind})
                assert (answer.status_code, answer.json()["error"]) == (415, "UnsupportedMediaType"), (method, path)
                made += 1
            # A cross-site POST without a body needs no preflight either: its Origin gives it away.
            answer = await client.request(method, path, headers={**auth, "Origin": "http://evil.example"})
            assert answer.status_code == 403, (method, path)
            # The app's own pages, and clients that are no browser, are let through (whatever the route answers).
            own = await client.request(method, path, content=content, headers={
                **auth, **as_json, "Origin": f"http://127.0.0.1:{port}"})
            assert own.status_code not in (421, 403, 415), (method, path, own.text)
            made += 3
    return made


def endpoint_app(marker: Path, token: str | None, apps: list[Any]) -> Callable[[Any], Any]:
    def make_app(node: Any) -> Any:
        app = condukt.web.create_app(node, agents={"shell": shell_agent(marker)}, operations=[Triage.classify],
                                     token=token, observer=True)
        apps.append(app)
        return app

    return make_app


@both_servers
@pytest.mark.parametrize("token", [None, "s3cret"])
async def test_every_route_of_the_endpoint_refuses_what_a_hostile_page_sends(
    server: str, token: str | None, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    apps: list[Any] = []
    async with served(server, endpoint_app(marker, token, apps)) as url:
        routes = endpoints(apps[0])
        assert ("POST", "/agents/1/runs") in routes and ("POST", "/observer/api/processes/1/abort") in routes
        assert await sweep(url, routes, token=token) > 200
        # The attack of the report: a cross-site text/plain POST that starts a run which runs bash.
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            attack = await client.post("/agents/shell/runs", content=json.dumps({"prompt": "go"}),
                                       headers={"Content-Type": "text/plain", "Origin": "http://evil.example"})
            assert attack.status_code in (403, 415)
            assert (await client.get("/healthz")).json()["sessions"] == 0
            assert not marker.exists()
            if token is None:  # the same request from a client that is no browser runs (and so runs bash)
                done = await client.post("/agents/shell/runs", json={"prompt": "go"})
                assert done.status_code == 200 and marker.exists()


@both_servers
async def test_every_route_of_the_observer_on_its_own_refuses_what_a_hostile_page_sends(server: str) -> None:
    apps: list[Any] = []

    def make_app(node: Any) -> Any:
        apps.append(observer.create_app(node))
        return apps[-1]

    async with served(server, make_app) as url:
        assert await sweep(url, endpoints(apps[0])) > 50


async def test_observer_serve_refuses_them_too_and_takes_more_hosts_when_told() -> None:
    async with condukt.open_node() as node, trio.open_nursery() as nursery:
        page = await nursery.start(lambda task_status: observer.serve(node, port=0, task_status=task_status))
        url, _, token = page.partition("#token=")
        assert await sweep(url, endpoints(observer.create_app(node)), token=token) > 50
        named = await nursery.start(lambda task_status: observer.serve(
            node, port=0, token=None, allowed_hosts=["observer.internal"], task_status=task_status))
        async with httpx.AsyncClient(base_url=named) as client:
            port = httpx.URL(named).port
            assert (await client.get("/api/snapshot", headers={"Host": f"observer.internal:{port}"})).status_code == 200
            assert (await client.get("/api/snapshot", headers={"Host": "other.internal"})).status_code == 421
        nursery.cancel_scope.cancel()


async def test_condukt_mcp_server_refuses_them_through_the_sdk() -> None:
    import condukt.mcp

    @condukt.tool
    async def ping() -> str:
        """Answers pong."""
        return "pong"

    async with trio.open_nursery() as nursery:
        url = await nursery.start(lambda task_status: condukt.mcp.serve(
            [ping], "http", port=0, task_status=task_status))
        async with httpx.AsyncClient(timeout=10) as client:
            hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            port = httpx.URL(url).port
            for host in FOREIGN_HOSTS:
                answer = await client.post(url, json=hello, headers={**headers, "Host": host.format(port=port)})
                assert answer.status_code == 421, host
            for origin in FOREIGN_ORIGINS[:3]:
                answer = await client.post(url, json=hello, headers={**headers, "Origin": origin.format(port=port)})
                assert answer.status_code == 403, origin
            plain = await client.post(url, content=json.dumps(hello), headers={**headers, "Content-Type": "text/plain"})
            assert plain.status_code in (400, 415)
        nursery.cancel_scope.cancel()


@both_servers
async def test_allowed_hosts_and_origins_let_a_proxy_and_a_front_end_in(server: str) -> None:
    def make_app(node: Any) -> Any:
        return condukt.web.create_app(node, allowed_hosts=["api.example.com", "*.corp.example"],
                                      allowed_origins=["https://app.example.com"])

    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        for host in ["api.example.com", "API.example.com.", "api.example.com:443", "a.b.corp.example", "corp.example"]:
            assert (await client.get("/healthz", headers={"Host": host})).status_code == 200, host
        assert (await client.get("/healthz", headers={"Host": "example.com"})).status_code == 421
        assert (await client.get("/healthz", headers={"Host": "xcorp.example"})).status_code == 421
        front = await client.get("/healthz", headers={"Origin": "https://app.example.com"})
        assert front.status_code == 200
        same_site_other_port = await client.get("/healthz", headers={"Origin": "https://app.example.com:8443"})
        assert same_site_other_port.status_code == 403


def test_guard_options_are_checked_at_once() -> None:
    for bad in ["example.com:8000", "a/b", "*example.com", ""]:
        with pytest.raises(ValueError, match="allowed_hosts"):
            condukt.web.create_app(allowed_hosts=[bad])
    with pytest.raises(TypeError, match="not a str"):
        condukt.web.create_app(allowed_hosts="example.com")  # type: ignore[arg-type]
    for bad in ["example.com", "https://example.com/path", "ftp://example.com"]:
        with pytest.raises(ValueError, match="allowed_origins"):
            observer.create_app(allowed_origins=[bad])
    guard = condukt.web.BrowserGuard(None, allowed_hosts=["::1", "[fe80::1]"], allowed_origins=["*"])
    assert guard.allowed_hosts == {"::1", "fe80::1"}
