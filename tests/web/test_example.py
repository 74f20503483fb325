"""examples/fastapi_app.py runs as written: started as a program, it serves on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
from waiting import TIMEOUT

from .helpers import free_port, parse_sse

ROOT = Path(__file__).resolve().parents[2]


def test_the_fastapi_example_serves_agents_operations_and_its_own_handler() -> None:
    port = free_port()
    env = {**os.environ, "PORT": str(port), "PYTHONPATH": str(ROOT / "src")}
    env.pop("CONDUKT_MODEL", None)
    env.pop("API_TOKEN", None)
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "fastapi_app.py")],
        env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )
    assert server.stderr is not None
    logged: list[str] = []
    listening = threading.Event()

    def read_log() -> None:  # uvicorn logs to stderr; read all of it, so the pipe never fills
        for line in server.stderr:  # type: ignore[union-attr]
            logged.append(line)
            if "Uvicorn running on" in line:
                listening.set()
        listening.set()  # the example exited

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert listening.wait(TIMEOUT) and server.poll() is None, "".join(logged)
            assert client.get("/v1/healthz").status_code == 200
            auth = {"Authorization": "Bearer dev-token"}
            first = client.post("/v1/agents/assistant/runs", json={"prompt": "hello"}, headers=auth).json()
            assert first["text"] == "You said: hello"
            streamed = client.post(
                "/v1/agents/assistant/runs",
                json={"prompt": "again", "session": first["session"]},
                headers={**auth, "Accept": "text/event-stream"},
            )
            assert parse_sse(streamed.text)[-1] == ("done", {"type": "done", "status": "completed"})
            assert client.post("/v1/operations/classify", json={"text": "it crashes"}, headers=auth).json() == "bug"
            assert client.post("/v1/operations/classify", json={}, headers=auth).status_code == 422
            assert client.post("/v1/agents/assistant/runs", json={"prompt": "hi"}).status_code == 401
            assert client.post("/shout", json={"text": "hello"}).json() == {
                "text": "You said: Repeat in capitals: hello"}
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(15) == 0
        reader.join(15)
