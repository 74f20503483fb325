"""The command line's errors: one line each on stderr, and the exit statuses docs/cli.md documents."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from rich.console import Console

import condukt
from condukt import events as ev
from condukt.cli import Renderer

from .helpers import condukt_cli, environment


@pytest.fixture
async def busy_port() -> AsyncIterator[int]:
    """A port of 127.0.0.1 something already listens on."""
    with trio.socket.socket() as taken:
        await taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


async def test_serve_on_a_busy_port_is_one_line_and_status_1(busy_port: int, tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text("from starlette.applications import Starlette\napp = Starlette()\n")
    done = await condukt_cli("serve", "tiny:app", "--port", str(busy_port), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.decode() == (
        f"error: cannot listen on 127.0.0.1:{busy_port}: the address is in use (--port 0 picks a free port)\n"
    )
    assert done.stdout == b""


async def test_observe_on_a_busy_port_is_one_line_and_status_1(busy_port: int) -> None:
    done = await condukt_cli("observe", "--no-open", "--port", str(busy_port))
    assert done.returncode == 1
    assert done.stderr.decode() == (
        f"error: cannot listen on 127.0.0.1:{busy_port}: the address is in use (--port 0 picks a free port)\n"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--prices", "cheap"], "Invalid value for '--prices': takes INPUT,OUTPUT dollars per million tokens"),
        (["--prices", "3,15,1"], "Invalid value for '--prices'"),
        (["--thinking", "maximal"], "Invalid value for '--thinking': 'maximal' is not one of off, minimal, low"),
        (["--base-url", "localhost:8000/v1"], "Invalid value for '--base-url': 'localhost:8000/v1' is not an http"),
        (["--tools", "everything"], "'everything' is not one of 'coding', 'read-only', 'none'"),
        (["--max-turns", "many"], "Invalid value for '--max-turns'"),
    ],
)
async def test_a_bad_option_value_is_one_line_and_status_2(args: list[str], says: str) -> None:
    for command in (["run", "hi"], ["chat"]):
        if command == ["chat"] and args[0] == "--max-turns":
            continue
        done = await condukt_cli(*command, "--model", "openai:m", *args, env=environment(OPENAI_API_KEY="k"))
        err = done.stderr.decode()
        assert done.returncode == 2, (command, args, err)
        assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err
        assert done.stdout == b""


async def test_help_shows_flags_without_a_value() -> None:
    for command in (["--help"], ["run", "--help"], ["chat", "--help"], ["serve", "--help"], ["observe", "--help"]):
        done = await condukt_cli(*command, env=environment(COLUMNS="160"))
        out = done.stdout.decode()
        assert done.returncode == 0
        assert "<bool>" not in out, out  # a flag takes no value
    run_help = (await condukt_cli("run", "--help", env=environment(COLUMNS="160"))).stdout.decode()
    assert "--json" in run_help and "--agent" in run_help and "MODULE:CLASS" in run_help
    assert "--mcp" in run_help and "COMMAND" in run_help and "PROVIDER:NAME" in run_help


async def test_serve_wants_an_app_or_an_agent_not_both(tmp_path: Path) -> None:
    neither = await condukt_cli("serve")
    assert neither.returncode == 2
    assert neither.stderr.decode() == "error: give MODULE:APP or --agent MODULE:CLASS (one of them)\n"
    both = await condukt_cli("serve", "a:app", "--agent", "b:Agent")
    assert both.returncode == 2 and both.stderr.decode().count("\n") == 1
    agent_options = await condukt_cli("serve", "a:app", "--model", "openai:m", "--token", "t")
    assert agent_options.returncode == 2
    assert agent_options.stderr.decode() == (
        "error: --model, --token only with --agent (MODULE:APP is served as it is)\n"
    )
    # The same options from the environment (CONDUKT_MODEL, CONDUKT_TOKEN) are no mistake.
    from_env = await condukt_cli(
        "serve", "nowhere:app", env=environment(CONDUKT_MODEL="openai:m", CONDUKT_TOKEN="t"), cwd=tmp_path
    )
    assert (from_env.returncode, from_env.stderr.decode()) == (1, "error: no module named 'nowhere'\n")


async def test_an_agent_that_is_not_an_agent_class_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "things.py").write_text("class NotAnAgent:\n    pass\n")
    for args in (["run", "hi", "--agent", "things:NotAnAgent"], ["chat", "--agent", "things:NotAnAgent"]):
        done = await condukt_cli(*args, cwd=tmp_path)
        assert done.returncode == 1
        assert done.stderr.decode() == (
            "error: things:NotAnAgent is not a condukt.Agent subclass (it is <class 'things.NotAnAgent'>)\n"
        )
    missing = await condukt_cli("run", "hi", "--agent", "nowhere:Agent", cwd=tmp_path)
    assert (missing.returncode, missing.stderr.decode()) == (1, "error: no module named 'nowhere'\n")
    malformed = await condukt_cli("run", "hi", "--agent", "things", cwd=tmp_path)
    assert (malformed.returncode, malformed.stderr.decode()) == (2, "error: expected MODULE:CLASS, got 'things'\n")


async def test_an_empty_mcp_command_is_a_usage_error() -> None:
    done = await condukt_cli("run", "hi", "--model", "openai:m", "--mcp", "  ", env=environment(OPENAI_API_KEY="k"))
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "error: --mcp takes a command that starts an MCP server, e.g. --mcp 'node server.js'\n"
    )


def _rendered(events: list[ev.Event], *, errors: bool = True) -> str:
    out = io.StringIO()
    with Renderer(Console(file=out, width=100), errors=errors) as renderer:
        for event in events:
            renderer.handle(event)
    return out.getvalue()


def test_an_aborted_run_is_reported_once() -> None:
    aborted = _rendered([ev.TextDelta("Half an ans"), ev.Error("Aborted", "run aborted"), ev.Done("aborted")])
    assert aborted.splitlines() == ["Half an ans", "run aborted"]
    timed_out = _rendered([ev.Error("RunTimeout", "run did not finish within 5s"), ev.Done("timeout")])
    assert timed_out.splitlines() == ["run timed out: run did not finish within 5s"]
    failed = _rendered([ev.Error("ModelError", "bad key"), ev.Done("failed")])
    assert failed.splitlines() == ["error: ModelError: bad key"]
    # condukt run reports the end itself, on stderr.
    assert _rendered([ev.Error("Aborted", "run aborted"), ev.Done("aborted")], errors=False) == ""


def test_text_held_back_prints_after_the_text_in_progress() -> None:
    out = io.StringIO()
    with Renderer(Console(file=out, width=100), live=False) as renderer:
        renderer.handle(ev.TextDelta("The answer is"))
        renderer.after_text("you> /steer be brief")
        assert out.getvalue() == ""  # not inside the line being written
        assert renderer.live_view() is not None
        renderer.handle(ev.TextDelta(" 42."))
        renderer.handle(ev.TurnEnd(0, None))  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == ["The answer is 42.", "you> /steer be brief"]


async def test_the_observe_demo_keeps_its_deliberate_crashes_quiet(
    autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    from condukt.cli._observe import DemoCrash, demo_crashes_quiet, demo_workload

    async def crashes(quiet: bool) -> list[logging.LogRecord]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="condukt"):
            async with condukt.open_node() as node, trio.open_nursery() as nursery:
                with demo_crashes_quiet() if quiet else contextlib.nullcontext():
                    await nursery.start(lambda task_status: demo_workload(node, crash_every=3.0, task_status=task_status))
                    for _ in range(3):  # three crashes, each followed by a restart
                        flaky = node.whereis("flaky")
                        assert flaky is not None
                        async with node.monitor(flaky) as monitor:
                            down = await monitor.wait()
                        assert isinstance(down.reason, DemoCrash)
                        while node.whereis("flaky") in (None, flaky):
                            await trio.sleep(0.1)  # virtual time: the supervisor restarts it
                    nursery.cancel_scope.cancel()
        return [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], DemoCrash)]

    assert await crashes(quiet=True) == []
    assert len(await crashes(quiet=False)) == 3  # --verbose: each crash report logged


async def test_what_condukt_logs_is_one_line_each_and_debug_shows_the_tracebacks() -> None:
    # An MCP server that cannot start: its connection crashes and is restarted, then given up on.
    args = ["run", "hi", "--model", "openai:m", "--mcp", "/nonexistent/mcp-server"]
    done = await condukt_cli(*args, env=environment(OPENAI_API_KEY="k"))
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1
    assert "Traceback (most recent call last):" not in lines
    crashes = [line for line in lines if line.startswith("error (condukt.otp): ") and " crashed: " in line]
    assert crashes, lines  # each crash report, in one line
    assert lines[-1].startswith("error: McpConnectError: ") and "mcp-server" in lines[-1]
    debug = await condukt_cli("--debug", *args, env=environment(OPENAI_API_KEY="k"))
    assert debug.returncode == 1
    assert "Traceback (most recent call last):" in debug.stderr.decode()


def test_partial_output_is_drawn_live_and_summaries_are_noted() -> None:
    out = io.StringIO()
    with Renderer(Console(file=out, width=100), live=False) as renderer:
        renderer.handle(ev.PartialOutput({"title": "Half"}))
        live = io.StringIO()
        Console(file=live, width=100).print(renderer.live_view())
        assert '"title": "Half"' in live.getvalue() and "writing the result" in live.getvalue()
        renderer.handle(ev.PartialOutput({"title": "Half written"}))
        renderer.handle(ev.TurnEnd(1, None))  # type: ignore[arg-type]
        assert renderer.live_view() is None  # the final result replaces it
        renderer.handle(ev.Summarized(40, 4, 2800, 300))
        renderer.handle(ev.CompactionFallback("ToolResultPrune", "the summariser did not answer within 60s", False, 2800, 900))
    assert out.getvalue().splitlines() == [
        "summary: 40 earlier messages summarised, about 2800 → 300 tokens",
        "summariser failed (the summariser did not answer within 60s); compacted with ToolResultPrune",
    ]
