"""The endpoint served natively on trio by hypercorn (127.0.0.1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

import condukt
import condukt.web

from . import checks
from .helpers import TOKEN, Triage, agents, hypercorn_trio

LIMIT = 64 * 1024


async def test_the_endpoint_on_hypercorn_trio(tmp_path: Path, process_gone: Callable[[int], bool]) -> None:
    async with condukt.open_node() as node:
        app = condukt.web.create_app(
            node, agents=agents(tmp_path), operations=[Triage.classify], token=TOKEN, max_body_size=LIMIT
        )
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            await checks.everything(client, LIMIT, tmp_path / "pid", process_gone)
