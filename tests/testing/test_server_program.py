"""The protocol server as a program (``python -m condukt.testing.server``, ``condukt test-server``) and its scripts.

The program runs as a user runs it, in its own process; condukt's agents
talk to it over HTTP as they talk to a provider.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import trio

import condukt
from condukt.testing.server import (
    Disconnect,
    Malformed,
    ProtocolServer,
    Reply,
    ScriptError,
    Slow,
    Status,
    load_script,
    parse_script,
    tool_then_answer,
)

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30


def _environment() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("OPENAI_", "CONDUKT_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


# ----------------------------------------------------------------------------- scripts


def test_a_script_line_is_one_response_of_each_kind() -> None:
    steps = parse_script(
        """
        # comments and blank lines are skipped

        {"reply": "Hello.", "thinking": "hm", "usage": [30, 4], "chunk": 2, "interval": 0.01}
        {"call": "read", "arguments": {"path": "a.txt"}, "id": "c1"}
        {"calls": [{"call": "read", "arguments": {"path": "a"}}, {"call": "grep", "arguments": {"q": "x"}}]}
        {"reply": "Let me look.", "call": "read", "arguments": {"path": "b"}}
        {"error": 429, "message": "slow down", "retry_after": 2}
        {"error": 500, "type": "api_error"}
        {"reply": "late", "delay": 0.5}
        {"disconnect": true}
        {"malformed": true}
        """
    )
    assert len(steps) == 9
    hello = steps[0]
    assert isinstance(hello, Reply)
    assert (hello.text, hello.thinking, hello.usage, hello.chunk, hello.interval) == ("Hello.", "hm", (30, 4), 2, 0.01)
    one, parallel, mixed = steps[1], steps[2], steps[3]
    assert isinstance(one, Reply) and [(c.id, c.name, c.arguments) for c in one.tool_calls] == [
        ("c1", "read", {"path": "a.txt"})
    ]
    assert isinstance(parallel, Reply) and [c.name for c in parallel.tool_calls] == ["read", "grep"]
    assert isinstance(mixed, Reply) and mixed.text == "Let me look." and mixed.tool_calls[0].arguments == {"path": "b"}
    assert steps[4] == Status(429, "slow down", None, (("retry-after", "2"),))
    assert steps[5] == Status(500, "scripted error", "api_error")
    late = steps[6]
    assert isinstance(late, Slow) and late.delay == 0.5 and isinstance(late.step, Reply) and late.step.text == "late"
    assert isinstance(steps[7], Disconnect) and isinstance(steps[8], Malformed)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "Expecting value"),
        ("[1, 2]", "expected a JSON object"),
        ('{"reply": "a", "error": 500}', "one response a line"),
        ("{}", "nothing to answer"),
        ('{"reply": 3}', '"reply" must be a string'),
        ('{"call": ""}', '"call" must be a tool name'),
        ('{"call": "x", "arguments": [1]}', '"arguments" must be a JSON object'),
        ('{"arguments": {}}', '"arguments" goes with "call"'),
        ('{"calls": []}', '"calls" must be a non-empty list'),
        ('{"error": 200}', "an HTTP error status"),
        ('{"error": 429, "reply": "x"}', "one response a line"),
        ('{"reply": "x", "delay": -1}', '"delay" must be a number of seconds >= 0'),
        ('{"reply": "x", "usage": [1]}', '"usage" must be [input_tokens, output_tokens]'),
        ('{"reply": "x", "colour": "red"}', "unknown key(s) colour"),
        ('{"disconnect": "yes"}', '"disconnect" takes true'),
    ],
)
def test_a_bad_script_line_is_named_with_its_number_and_why(line: str, says: str) -> None:
    with pytest.raises(ScriptError) as info:
        parse_script(f'{{"reply": "fine"}}\n\n{line}\n', source="answers.jsonl")
    assert str(info.value).startswith("answers.jsonl, line 3: ")
    assert says in str(info.value)


def test_load_script_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text('{"reply": "one"}\n{"reply": "two"}\n')
    assert [step.text for step in load_script(path) if isinstance(step, Reply)] == ["one", "two"]


# ----------------------------------------------------------------------------- the default responder


class Noop(condukt.Tool):
    """The tool the benchmarks' clients declare."""

    name = "noop"
    description = "Does nothing"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        return "ok"


async def test_the_default_answer_calls_noop_only_for_a_client_that_has_it(nursery: trio.Nursery) -> None:
    server = ProtocolServer(responder=tool_then_answer)
    await nursery.start(server.run)
    options = {"model": "openai:m", "api_key": "k", "base_url": f"{server.url}/v1"}
    async with condukt.open_node() as node:
        with_noop = await node.spawn(condukt.Agent, tools=[Noop], **options)
        async with with_noop.stream("go") as events:
            ends = [e for e in [event async for event in events] if isinstance(e, condukt.events.ToolCallEnd)]
        assert [(end.name, end.is_error, end.result) for end in ends] == [("noop", False, "ok")]
        without = await node.spawn(condukt.Agent, tools=condukt.tools.read_only_tools(), **options)
        async with without.stream("go") as events:
            seen = [event async for event in events]
        assert not [e for e in seen if isinstance(e, condukt.events.ToolCallStart)]  # no call of a tool it lacks
        assert events.done == condukt.events.Done("completed")
    assert [request.tool_names for request in server.requests[:1]] == [["noop"]]
    assert "noop" not in server.requests[-1].tool_names and "read" in server.requests[-1].tool_names


# ----------------------------------------------------------------------------- the program


@contextlib.asynccontextmanager
async def program(*args: str, prog: tuple[str, ...] = ("-m", "condukt.testing.server")) -> AsyncIterator[str]:
    """The program serving in its own process (stdin a pipe we hold): its first line, the base URL."""
    process = await trio.lowlevel.open_process(
        [sys.executable, *prog, *args], env=_environment(), stdin=-1, stdout=-1, stderr=-1
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        received = b""
        with trio.fail_after(TIMEOUT):
            while b"\n" not in received:
                chunk = await process.stdout.receive_some()
                assert chunk, "the test server exited before listening"
                received += chunk
        yield received.split(b"\n", 1)[0].decode()
        await process.stdin.aclose()  # the parent closing the pipe stops it
        with trio.fail_after(TIMEOUT):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_the_program_prints_its_base_url_first_and_answers_its_script_in_order(tmp_path: Path) -> None:
    script = tmp_path / "answers.jsonl"
    script.write_text(
        '{"call": "shout", "arguments": {"text": "hi"}}\n'
        '{"error": 429, "retry_after": 0}\n'
        '{"reply": "Shouted: HI.", "interval": 0.001, "chunk": 3}\n'
    )

    @condukt.tool
    async def shout(text: str) -> str:
        """Upper-cases text."""
        return text.upper()

    async with program("--port", "0", "--script", str(script)) as url:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        async with condukt.open_node() as node:
            agent = await node.spawn(condukt.Agent, model="openai:m", api_key="k", base_url=f"{url}/v1", tools=[shout])
            async with agent.stream("shout hi") as events:
                seen = [event async for event in events]
            retries = [e for e in seen if isinstance(e, condukt.events.Retry)]
            (end,) = [e for e in seen if isinstance(e, condukt.events.ToolCallEnd)]
            assert (end.name, end.result, end.is_error) == ("shout", "HI", False)
            assert len(retries) == 1  # the scripted 429, retried
            assert events.result == "Shouted: HI."
            # The script is used up: a clear error, not a made-up answer.
            with pytest.raises(condukt.ConduktError, match="script .*answers.jsonl ended: its 3 response"):
                await agent.run("again")


async def test_the_program_loops_its_script_and_serves_only_the_protocols_asked(tmp_path: Path) -> None:
    script = tmp_path / "answers.jsonl"
    script.write_text('{"reply": "one"}\n{"reply": "two"}\n')
    async with program("--script", str(script), "--loop", "--protocol", "anthropic", "-q") as url:
        async with condukt.open_node() as node:
            texts = [await condukt.run("hi", model="anthropic:m", api_key="k", base_url=url, node=node) for _ in "abc"]
            assert texts == ["one", "two", "one"]
        async with httpx.AsyncClient() as client:
            other = await client.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": []})
        assert other.status_code == 404
        assert "this server speaks anthropic" in other.json()["error"]["message"]


async def test_the_program_says_which_base_url_each_protocol_takes() -> None:
    process = await trio.run_process(
        [sys.executable, "-m", "condukt.testing.server", "--protocol", "openai", "--protocol", "gemini"],
        env=_environment(),
        stdin=b"",  # a closed pipe: it stops at once after listening
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert process.returncode == 0, process.stderr
    url = process.stdout.decode().strip()
    hint = process.stderr.decode()
    assert f"openai            --model openai:MODEL --base-url {url}/v1" in hint
    assert f"gemini            --model gemini:MODEL --base-url {url}\n" in hint
    assert "anthropic" not in hint


async def test_help_names_the_program_as_it_was_started() -> None:
    for argv, prog in ((["-m", "condukt.testing.server"], "python -m condukt.testing.server"),
                       (["-m", "condukt", "test-server"], "condukt test-server")):  # fmt: skip
        done = await trio.run_process(
            [sys.executable, *argv, "--help"], env=_environment(), capture_stdout=True, check=False
        )
        out = done.stdout.decode()
        assert done.returncode == 0
        assert out.startswith(f"usage: {prog} [-h] [--host HOST] [--port PORT]"), out
        assert "--script FILE" in out and "--protocol NAME" in out


async def test_bad_arguments_a_bad_script_and_a_busy_port_are_one_line(tmp_path: Path) -> None:
    async def run(*args: str) -> trio.CompletedProcess[bytes]:
        with trio.fail_after(TIMEOUT):
            return await trio.run_process(
                [sys.executable, "-m", "condukt", "test-server", *args],
                env=_environment(), stdin=b"", capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip

    script = tmp_path / "bad.jsonl"
    script.write_text('{"reply": "ok"}\n{"error": 99}\n')
    cases = [
        (("--protocol", "smtp"), 2, "error: argument --protocol: invalid choice: 'smtp'"),
        (("--script", str(script)), 2, f"error: {script}, line 2: \"error\" must be an HTTP error status"),
        (("--script", str(tmp_path / "none.jsonl")), 2, "error: cannot read the script"),
    ]
    for args, status, start in cases:
        done = await run(*args)
        assert done.returncode == status, (args, done.stderr)
        err = done.stderr.decode()
        assert err.startswith(start) and err.count("\n") == 1, err
    with trio.socket.socket() as taken:
        await taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = await run("--port", str(port))
    assert busy.returncode == 1
    assert busy.stderr.decode() == (
        f"error: cannot listen on 127.0.0.1:{port}: the address is in use (--port 0 picks a free port)\n"
    )
    assert busy.stdout == b""


async def test_ctrl_c_stops_the_program_with_status_0() -> None:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "condukt.testing.server", "-q"],
        env=_environment(), stdin=subprocess.DEVNULL, stdout=-1, stderr=-1,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        with trio.fail_after(TIMEOUT):
            first = await process.stdout.receive_some()
        assert first.startswith(b"http://127.0.0.1:")
        process.send_signal(signal.SIGINT)  # stdin is not a pipe: it serves until told to stop
        with trio.fail_after(TIMEOUT):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_script_lines_render_in_every_protocol() -> None:
    # One parallel-calls line, read by the Anthropic and OpenAI renderers alike.
    (step,) = parse_script('{"calls": [{"call": "a", "arguments": {}}, {"call": "b", "arguments": {"x": 1}}]}')
    from condukt.testing.server import anthropic_body, openai_body

    assert isinstance(step, Reply)
    assert [block["name"] for block in anthropic_body(step, "m")["content"]] == ["a", "b"]
    calls = openai_body(step, "m")["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [("a", {}), ("b", {"x": 1})]
