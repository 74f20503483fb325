"""``--agent MODULE:CLASS`` and ``--mcp COMMAND`` on ``run``, ``chat`` and ``serve``, as a user types them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from condukt.testing.server import ProtocolServer, reply, tool_use

from .helpers import ROOT, TIMEOUT, condukt_cli, environment, listening

pytest.importorskip("mcp", reason="--mcp needs the [mcp] extra (pip install '.[test]' brings it)")

#: A Python MCP server on the official SDK: a tool that says where it runs.
PY_SERVER = """
import os
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("place")


@mcp.tool()
def where(city: str) -> str:
    \"\"\"Where a city is.\"\"\"
    return city + " is in " + {"Lisbon": "Portugal", "Oslo": "Norway"}.get(city, "no country I know")


mcp.run()
"""

#: An agent module as a user writes one: a class with its own prompt, options and tool.
AGENT_MODULE = '''
import condukt


@condukt.tool
async def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


class Geographer(condukt.Agent):
    """Knows where cities are."""

    model = "openai:geo-model"
    system_prompt = "You are a terse geographer."

    def tools(self):
        return [shout]
'''


def _declared(request: object) -> list[str]:
    return list(request.tool_names)  # type: ignore[attr-defined]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory with ``geo.py`` (the agent module) and ``place_server.py`` (a Python MCP server)."""
    (tmp_path / "geo.py").write_text(AGENT_MODULE)
    (tmp_path / "place_server.py").write_text(PY_SERVER)
    return tmp_path


async def test_run_starts_the_agent_class_with_its_prompt_tools_and_model_and_adds_mcp_tools(
    server: ProtocolServer, project: Path
) -> None:
    server.add(
        reply(tools=[tool_use("where", {"city": "Lisbon"}), tool_use("shout", {"text": "done"})]),
        reply("Lisbon is in Portugal. DONE"),
    )
    done = await condukt_cli(
        "run", "Where is Lisbon?", "--agent", "geo:Geographer", "--mcp", f"{sys.executable} place_server.py",
        "--base-url", f"{server.url}/v1", env=environment(OPENAI_API_KEY="k"), cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert "Lisbon is in Portugal. DONE" in out
    assert "where done" in out and "shout done" in out and "failed" not in out
    first, second = server.requests
    assert first.body["model"] == "geo-model"  # the class's model, --base-url from the command line
    assert first.messages[0] == {"role": "system", "content": "You are a terse geographer."}
    assert sorted(_declared(first)) == ["shout", "where"]  # its own tool and the MCP server's
    results = {m["tool_call_id"]: m["content"] for m in second.messages if m["role"] == "tool"}
    assert sorted(results.values()) == ["DONE", "Lisbon is in Portugal"]


async def test_tools_replaces_the_agent_classes_own_tools_and_model_overrides_its_model(
    server: ProtocolServer, project: Path
) -> None:
    server.add(reply("ok"))
    done = await condukt_cli(
        "run", "hi", "--agent", "geo:Geographer", "--tools", "none", "--model", "openai:other",
        "--base-url", f"{server.url}/v1", env=environment(OPENAI_API_KEY="k"), cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    (request,) = server.requests
    assert request.body["model"] == "other" and _declared(request) == []
    assert request.messages[0]["content"] == "You are a terse geographer."


async def test_chat_talks_to_the_agent_class_with_mcp_tools(server: ProtocolServer, project: Path) -> None:
    server.add(reply(tools=tool_use("where", {"city": "Oslo"})), reply("Norway."), reply("Bye."))
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [sys.executable, "-m", "condukt", "chat", "--agent", "geo:Geographer", "--mcp",
             f"{sys.executable} place_server.py", "--base-url", f"{server.url}/v1"],
            env=environment(OPENAI_API_KEY="k"), cwd=project, stdin=b"Where is Oslo?\nthanks\n",
            capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "condukt chat · openai:geo-model" in out
    assert "you> Where is Oslo?" in out and "you> thanks" in out  # each prompt heads its answer
    assert out.index("you> Where is Oslo?") < out.index("Norway.") < out.index("you> thanks") < out.index("Bye.")
    assert "Oslo is in Norway" in out
    assert sorted(_declared(server.requests[0])) == ["shout", "where"]


async def test_serve_serves_the_agent_class_with_mcp_tools(server: ProtocolServer, project: Path) -> None:
    server.add(reply(tools=tool_use("where", {"city": "Lisbon"})), reply("Portugal."))
    args = ["serve", "--agent", "geo:Geographer", "--mcp", f"{sys.executable} place_server.py",
            "--base-url", f"{server.url}/v1", "--port", "0", "--token", "t0k"]  # fmt: skip
    env = environment(OPENAI_API_KEY="k")
    async with listening(args, rb"serving on (http://127\.0\.0\.1:\d+)\n", project, env) as url:
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            unauthorized = await client.post(f"{url}/agents/geographer/runs", json={"prompt": "Lisbon?"})
            response = await client.post(
                f"{url}/agents/geographer/runs", json={"prompt": "Lisbon?"}, headers={"Authorization": "Bearer t0k"}
            )
    assert unauthorized.status_code == 401
    assert response.status_code == 200, response.text
    assert response.json()["text"] == "Portugal."
    assert "Lisbon is in Portugal" in json.dumps(server.requests[1].messages)


# ----------------------------------------------------------------------------- the acceptance: examples/, node


#: The npm packages of examples/mcp/package.json, installed once per machine in a cache directory.
def _node_modules() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("the example MCP server needs Node.js and npm (Debian: apt-get install nodejs npm)")
    manifest = (ROOT / "examples" / "mcp" / "package.json").read_text()
    key = hashlib.sha256(manifest.encode()).hexdigest()[:16]
    root = Path(os.environ.get("CONDUKT_TEST_CACHE", Path.home() / ".cache" / "condukt-tests")) / f"npm-{key}"
    if (root / "installed").exists():
        return root / "node_modules"
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text(manifest)
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=root, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip("npm could not install examples/mcp's packages within 600 s")
    if done.returncode != 0:
        pytest.skip(f"npm could not install examples/mcp's packages: {done.stderr.strip()[-500:]}")
    (root / "installed").write_text("ok")
    return root / "node_modules"


async def test_the_example_agent_runs_with_the_example_node_mcp_server_against_a_scripted_test_server(
    tmp_path: Path,
) -> None:
    """The README's line: condukt run --agent examples.triage_agent:Triage --mcp "node examples/mcp/server.js"."""
    modules = await trio.to_thread.run_sync(_node_modules)
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
    (examples / "mcp" / "node_modules").symlink_to(modules)
    args = ["test-server", "-q", "--script", "examples/triage_agent.jsonl"]
    async with listening(args, rb"(http://127\.0\.0\.1:\d+)\n", tmp_path) as url:
        done = await condukt_cli(
            "run", "--agent", "examples.triage_agent:Triage", "--mcp", "node examples/mcp/server.js",
            "--model", "openai:scripted", "--base-url", f"{url}/v1", "--api-key", "none", "Triage issue 12",
            cwd=tmp_path,
        )  # fmt: skip
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    # The tracker's tool ran in the node server; the agent's own tool ran in the agent.
    assert "get_issue done" in out and "#12 Crash when the config file is empty (open)" in out
    assert "label done" in out and "#12 labelled bug" in out
    assert "failed" not in out
    assert "Issue #12 is a crash on an empty config file: labelled bug." in out
    assert "3 turns" in out
