"""Structured runs over HTTP: ``output`` in the run request, ``partial_output`` events in the SSE stream."""

from __future__ import annotations

import json
from typing import Any

import httpx

import condukt
import condukt.web
from condukt.testing import ScriptedModel, call

from .helpers import AUTH, TOKEN, hypercorn_trio, parse_sse

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "array", "items": {"type": "integer"}}},
    "required": ["city", "days"],
}
RESULT = {"city": "Lisbon in the spring", "days": [1, 2, 3]}


class Planner(condukt.Agent):
    """Submits a structured plan."""

    model = ScriptedModel([call("submit_result", RESULT)] * 2)


async def test_a_structured_run_streams_partial_output_over_sse_and_answers_json() -> None:
    async with condukt.open_node() as node:
        app = condukt.web.create_app(node, agents={"planner": Planner}, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            streamed = await client.post(
                "/agents/planner/runs",
                json={"prompt": "Plan a trip", "output": SCHEMA},
                headers={**AUTH, "Accept": "text/event-stream"},
            )
            events = parse_sse(streamed.text)
            partial = [data["value"] for name, data in events if name == "partial_output"]
            assert partial[-1] == RESULT and len(partial) >= 3
            assert any(v.get("city") not in (None, RESULT["city"]) for v in partial)  # a half-written city
            assert json.loads(next(d for n, d in events if n == "agent_end")["text"]) == RESULT

            answered = await client.post("/agents/planner/runs", json={"prompt": "Again", "output": SCHEMA}, headers=AUTH)
            assert answered.status_code == 200 and json.loads(answered.json()["text"]) == RESULT

            bad: Any = await client.post(
                "/agents/planner/runs", json={"prompt": "x", "output": {"type": "nope"}}, headers=AUTH
            )
            assert bad.status_code == 422 and bad.json()["error"] == "InvalidRequest"
            assert "output" in bad.json()["message"]
