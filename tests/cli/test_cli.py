"""The ``condukt`` command line, run as a user runs it: a real process against a local OpenAI-format server."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pexpect
import trio

import condukt
from condukt import events as ev
from condukt import serialization
from condukt.testing.server import ProtocolServer, Status, reply, tool_use

from .helpers import TIMEOUT, condukt_cli, environment, listening, model_args


async def test_run_streams_the_reply_and_tool_calls_and_exits_0(server: ProtocolServer, tmp_path: Path) -> None:
    server.add(
        reply(thinking="let me look", tools=tool_use("bash", {"command": "echo hello from bash"})),
        reply("The answer is 42.", usage=(30, 8)),
    )
    done = await condukt_cli(
        "run", "What is the answer?", *model_args(server), "--cwd", str(tmp_path), "--prices", "3,15",
        env=environment(OPENAI_API_KEY="sk-local"),
    )  # fmt: skip
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "The answer is 42." in out
    assert "let me look" in out  # thinking is shown
    assert "echo hello from bash" in out and "hello from bash" in out.split("echo hello from bash", 1)[1]
    assert "2 turns · 40 input + 13 output tokens · $0.0003" in out
    assert done.stderr == b""
    # It really talked to the server: the model named, the key sent, the tool result returned.
    assert [r.body["model"] for r in server.requests] == ["gpt-4o", "gpt-4o"]
    assert server.requests[0].headers["authorization"] == "Bearer sk-local"
    assert server.requests[1].messages[-1]["role"] == "tool"
    assert "hello from bash" in server.requests[1].messages[-1]["content"]


async def test_run_json_prints_one_parseable_event_per_line(server: ProtocolServer) -> None:
    server.add(reply("Hello there, JSON reader."))
    done = await condukt_cli(
        "run", "hi", *model_args(server), "--tools", "none", "--json", env=environment(OPENAI_API_KEY="k")
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    events = [serialization.loads(line, ev.Event) for line in lines]
    assert [json.loads(line)["type"] for line in lines][0] == "agent_start"
    assert events[-1] == ev.Done("completed")
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Hello there, JSON reader."
    (end,) = [e for e in events if isinstance(e, ev.AgentEnd)]
    assert end.usage.input_tokens == 10
    assert server.requests[0].body.get("tools") in (None, [])


async def test_a_missing_key_is_one_line_on_stderr_and_a_nonzero_exit(server: ProtocolServer) -> None:
    done = await condukt_cli("run", "hi", *model_args(server))
    err = done.stderr.decode()
    assert done.returncode == 1
    assert len(err.strip().splitlines()) == 1, err
    assert "OPENAI_API_KEY" in err and "--api-key" in err and "Traceback" not in err
    assert done.stdout == b""
    assert server.requests == []


async def test_a_failed_run_is_one_line_and_debug_shows_the_traceback(server: ProtocolServer) -> None:
    done = await condukt_cli("run", "hi", "--model", "nowhere:model")
    err = done.stderr.decode()
    assert done.returncode == 1
    assert err.startswith("error: UnknownProvider: no provider registered for 'nowhere'") and err.count("\n") == 1
    debug = await condukt_cli("--debug", "run", "hi", "--model", "nowhere:model")
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr.decode()
    # A provider error during the run: the same one line, after what was shown.
    server.add(Status(401, "bad key", "authentication_error"))
    bad = await condukt_cli("run", "hi", *model_args(server), env=environment(OPENAI_API_KEY="wrong"))
    assert bad.returncode == 1
    assert bad.stderr.decode().count("\n") == 1 and "bad key" in bad.stderr.decode()


async def test_no_model_and_no_key_says_how_to_choose_one() -> None:
    done = await condukt_cli("run", "hi")
    assert done.returncode == 1
    assert done.stderr.decode() == (
        "error: no model: pass --model provider:name or set CONDUKT_MODEL (and the provider's key)\n"
    )


async def test_version() -> None:
    done = await condukt_cli("--version")
    assert done.returncode == 0
    assert done.stdout.decode() == f"condukt {condukt.__version__}\n"


def serving(directory: Path, target: str) -> contextlib.AbstractAsyncContextManager[str]:
    """``condukt serve TARGET --port 0`` in ``directory``: its URL."""
    return listening(["serve", target, "--port", "0"], rb"serving on (http://127\.0\.0\.1:\d+)\n", directory)


async def test_serve_serves_an_asgi_app_until_ctrl_c(tmp_path: Path) -> None:
    (tmp_path / "hello_app.py").write_text(
        "from starlette.applications import Starlette\n"
        "from starlette.responses import PlainTextResponse\n"
        "from starlette.routing import Route\n"
        "async def hello(request):\n"
        "    return PlainTextResponse('hello from ' + request.url.path)\n"
        "app = Starlette(routes=[Route('/there', hello)])\n"
    )
    async with serving(tmp_path, "hello_app:app") as url:
        async with httpx.AsyncClient() as client:
            response = await client.get(url + "/there")
        assert response.status_code == 200
        assert response.text == "hello from /there"


async def test_serve_serves_the_condukt_web_endpoint(tmp_path: Path) -> None:
    (tmp_path / "service.py").write_text(
        "import condukt, condukt.web\n"
        "from condukt.testing import FunctionModel, reply\n"
        "class Echo(condukt.Agent):\n"
        "    model = FunctionModel(lambda request: reply('echo: ' + request.messages[-1].text))\n"
        "app = condukt.web.create_app(agents={'echo': Echo})\n"
    )
    async with serving(tmp_path, "service:app") as url:
        async with httpx.AsyncClient() as client:
            response = await client.post(url + "/agents/echo/runs", json={"prompt": "hello"})
        assert response.status_code == 200, response.text
        assert response.json()["text"] == "echo: hello"


async def test_serve_names_a_missing_app_in_one_line(tmp_path: Path) -> None:
    done = await condukt_cli("serve", "no_such_module:app", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode() == "error: no module named 'no_such_module'\n"


def _drive_chat(url: str, cwd: Path, process_gone: Callable[[int], bool]) -> str:
    """Two turns, a third whose tool Ctrl-C aborts, /history, a fourth, a recalled fifth steered mid-run, /clear, Ctrl-C twice."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "condukt", "chat", "--model", "openai:gpt-4o", "--base-url", f"{url}/v1", "--cwd", str(cwd)],
        env=environment(OPENAI_API_KEY="k", TERM="xterm"),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 120),
    )
    try:
        child.expect("you> ")
        child.sendline("hi")
        child.expect("First answer")
        child.expect("you> ")
        child.sendline("and again")
        child.expect("Second answer")
        child.expect("you> ")
        child.sendline("sleep please")
        # The tool started: its process wrote its pid.
        pid_file = cwd / "sleeper.pid"
        deadline = time.monotonic() + TIMEOUT
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, child.before
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        started = time.monotonic()
        child.sendintr()
        child.expect("aborted")
        child.expect("you> ")
        assert time.monotonic() - started < 10
        assert process_gone(pid), "the tool's process still runs after Ctrl-C"
        child.sendline("/history")
        child.expect("agent: Second answer")
        child.expect("you> ")
        child.sendline("last one")
        child.expect("Fourth answer")
        child.expect("you> ")
        # Up-arrow recalls the last prompt (line editing and input history); this run's tool takes a
        # second, and /steer adds a message to the run in progress.
        child.send("\x1b[A\r")
        child.expect("sleep 1")
        child.sendline("/steer mind the umbrella")
        child.expect("Steered answer")
        child.expect("you> ")
        child.sendline("/clear")
        child.expect("conversation cleared")
        child.expect("you> ")
        child.sendline("/history")
        child.expect(r"\(empty\)")
        child.expect("you> ")
        child.sendintr()
        child.expect("Ctrl-C again")
        child.sendintr()
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
        return str(child.before)
    finally:
        if child.isalive():
            child.terminate(force=True)


async def test_chat_keeps_the_conversation_ctrl_c_aborts_a_running_tool_and_steer_clear_history_work(
    server: ProtocolServer, tmp_path: Path, process_gone: Callable[[int], bool]
) -> None:
    server.add(
        reply("First answer."),
        reply("Second answer."),
        reply(tools=tool_use("bash", {"command": "sh -c 'echo $$ > sleeper.pid; exec sleep 60'"})),
        reply("Fourth answer."),
        reply(tools=tool_use("bash", {"command": "sleep 1"})),
        reply("Steered answer."),
    )
    await trio.to_thread.run_sync(_drive_chat, server.url, tmp_path, process_gone)
    assert len(server.requests) == 6
    # Each turn carried the conversation so far: the second saw the first exchange.
    second = server.requests[1].messages
    assert [m["role"] for m in second if m["role"] != "system"] == ["user", "assistant", "user"]
    assert second[-1]["content"] in ("and again", [{"type": "text", "text": "and again"}])
    # The aborted run completed no turn, so it left nothing in the conversation.
    fourth = [m for m in server.requests[3].messages if m["role"] != "system"]
    assert [m["role"] for m in fourth] == ["user", "assistant", "user", "assistant", "user"]
    # The recalled prompt was sent again, and the steer reached the model after the tool result.
    fifth = [m for m in server.requests[4].messages if m["role"] != "system"]
    assert fifth[-1]["content"] in ("last one", [{"type": "text", "text": "last one"}])
    sixth = [m for m in server.requests[5].messages if m["role"] != "system"]
    assert [m["role"] for m in sixth[-3:]] == ["assistant", "tool", "user"]
    assert "mind the umbrella" in json.dumps(sixth[-1]["content"])


async def test_demo_stays_offline_with_a_key_in_the_environment(server: ProtocolServer) -> None:
    # A key and a base URL in the environment: the demo must not use them without --live.
    env = environment(OPENAI_API_KEY="sk-would-cost-money", OPENAI_BASE_URL=f"{server.url}/v1")
    done = await condukt_cli("demo", env=env)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "model: scripted (offline" in out
    assert out.rstrip().endswith("done.")
    assert server.requests == []
    runtime = await condukt_cli("demo", "runtime")
    assert runtime.returncode == 0
    assert "every terminate ran" in runtime.stdout.decode()


async def test_demo_live_uses_the_provider(server: ProtocolServer) -> None:
    env = environment(OPENAI_API_KEY="sk-local", OPENAI_BASE_URL=f"{server.url}/v1")
    done = await condukt_cli("demo", "--live", env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert "model: openai:gpt-4o-mini" in done.stdout.decode()
    assert server.requests and {r.body["model"] for r in server.requests} == {"gpt-4o-mini"}


async def test_chat_with_piped_input_runs_each_line_in_turn(server: ProtocolServer) -> None:
    server.add(reply("One.", chunk=100), reply("Two.", chunk=100))
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [sys.executable, "-m", "condukt", "chat", *model_args(server), "--tools", "none"],
            env=environment(OPENAI_API_KEY="k"),
            stdin=b"first\nsecond\n/history\n",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "One." in out and "agent: Two." in out, (out, done.stderr.decode())
    assert out.index("One.") < out.index("Two.") < out.index("agent: Two.")
    assert [line for line in out.splitlines() if line.startswith(("you: ", "agent: "))][-4:] == [
        "you: first", "agent: One.", "you: second", "agent: Two.",
    ]  # fmt: skip
    assert len(server.requests) == 2


async def test_usage_errors_are_one_line_with_status_2() -> None:
    missing = await condukt_cli("run")
    assert missing.returncode == 2
    assert missing.stderr.decode() == "error: Missing argument 'PROMPT'. (see: python -m condukt run --help)\n"
    bad = await condukt_cli("run", "hi", "--tools", "everything")
    assert bad.returncode == 2
    assert bad.stderr.decode().count("\n") == 1 and "'everything' is not one of 'coding', 'read-only', 'none'" in bad.stderr.decode()
    help_text = await condukt_cli("run", "--help")
    assert help_text.returncode == 0
    assert "--base-url" in help_text.stdout.decode() and "--json" in help_text.stdout.decode()


async def test_run_reads_the_prompt_from_stdin_with_a_dash(server: ProtocolServer) -> None:
    server.add(reply("Read it."))
    done = await condukt_cli(
        "run", "-", *model_args(server), "--tools", "none", env=environment(OPENAI_API_KEY="k"), stdin=b"a prompt\non two lines\n"
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "Read it." in done.stdout.decode()
    assert "a prompt\non two lines" in json.dumps(server.requests[0].messages[-1]["content"]).replace("\\n", "\n")


async def test_observe_prints_the_page_of_a_running_app() -> None:
    done = await condukt_cli("observe", "http://127.0.0.1:8000", "--token", "s3cret", "--no-open")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "http://127.0.0.1:8000/observer/#token=s3cret\n"


async def test_observe_without_an_app_serves_a_live_demo_node_until_ctrl_c() -> None:
    args = ["observe", "--no-open", "--port", "0", "--token", "t0k"]
    async with listening(args, rb"observing a demo node at (http://127\.0\.0\.1:\d+/)#token=t0k ") as url:
        async with httpx.AsyncClient() as client:
            assert (await client.get(url + "api/snapshot")).status_code == 401
            with trio.fail_after(TIMEOUT):
                while True:  # the reviewers get busy: a tool call in flight shows on the page's data
                    snapshot = (await client.get(url + "api/snapshot", headers={"Authorization": "Bearer t0k"})).json()
                    agents = {p["name"]: p["agent"] for p in snapshot["processes"] if p["kind"] == "agent"}
                    run = (agents.get("reviewer-1") or {}).get("run")
                    if run and run.get("tool_calls"):
                        break
                    await trio.sleep(0.1)
        assert {"reviewer-1", "reviewer-2", "reviewer-3", "flaky"} <= set(agents)


def test_the_waiting_spinner_moves_between_redraws() -> None:
    import io

    from rich.console import Console

    from condukt.cli import Renderer

    now = [0.0]
    renderer = Renderer(Console(file=io.StringIO(), force_terminal=True, width=40, get_time=lambda: now[0]))
    renderer.waiting("waiting for the model")
    frames = set()
    for _ in range(4):
        out = io.StringIO()
        Console(file=out, force_terminal=True, width=40, get_time=lambda: now[0]).print(renderer._renderable())
        frames.add(out.getvalue().split()[0])
        now[0] += 0.1  # rich's "dots" spinner shows a new frame every 80 ms
    assert len(frames) == 4
