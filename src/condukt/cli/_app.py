"""The ``condukt`` commands, on typer."""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import urllib.parse
from pathlib import Path
from typing import Annotated, Any

import trio
import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

import condukt
from condukt.providers import THINKING_LEVELS

from ._agents import AgentChoice, ToolSet, choose_agent, load_object, route_name
from ._errors import CommandError, UsageError, execute, set_debug, start_listening
from ._render import JsonPrinter, Renderer

__all__ = ["app", "main"]


class _FlagsWithoutValues:
    """Help that shows a flag as ``--json``, not ``--json <bool>``: a flag takes no value."""

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class _Command(_FlagsWithoutValues, TyperCommand):
    pass


class _Group(_FlagsWithoutValues, TyperGroup):
    pass


app = typer.Typer(
    name="condukt",
    cls=_Group,
    help="Reliable LLM agents as supervised processes on trio: run, chat, serve, observe, demo, test-server.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        print(f"condukt {condukt.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Reliable LLM agents as supervised processes on trio.

    Models are "provider:name" strings (anthropic:claude-sonnet-4-5,
    openai:gpt-4o, ...); keys come from the provider's environment variable
    (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...) or --api-key.
    """
    set_debug(debug)


# ----------------------------------------------------------------------------- option checks (status 2)


def _check_base_url(value: str | None) -> str | None:
    if value is not None and urllib.parse.urlsplit(value).scheme not in ("http", "https"):
        raise typer.BadParameter(f"{value!r} is not an http:// or https:// URL (e.g. http://localhost:8000/v1)")
    return value


def parse_prices(text: str | None) -> tuple[float, float] | None:
    """``"3,15"`` -> ``(3.0, 15.0)``; ``ValueError`` for anything else."""
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(text)
    input_price, output_price = float(parts[0]), float(parts[1])
    if not (input_price >= 0 and output_price >= 0):  # NaN fails too
        raise ValueError(text)
    return input_price, output_price


def _check_prices(value: str | None) -> str | None:
    try:
        parse_prices(value)
    except ValueError:
        raise typer.BadParameter(f"takes INPUT,OUTPUT dollars per million tokens (e.g. 3,15), got {value!r}") from None
    return value


def _check_thinking(value: str | None) -> str | None:
    if value is not None and value not in THINKING_LEVELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(THINKING_LEVELS)}")
    return value


# ----------------------------------------------------------------------------- options shared by run, chat, serve

AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        metavar="MODULE:CLASS",
        help="Start this condukt.Agent subclass (its tools, prompt and options) instead of the built-in agent.",
    ),
]
McpOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        metavar="COMMAND",
        help="Add the tools of the MCP server this command starts (stdio; repeatable), e.g. --mcp 'node server.js'.",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        metavar="PROVIDER:NAME",
        envvar="CONDUKT_MODEL",
        help="The model. Default: the --agent's, else anthropic or openai, whichever key is set.",
        show_default=False,
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        callback=_check_base_url,
        help="The provider's base URL (an OpenAI-compatible server: ollama, vllm, condukt test-server...).",
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key", metavar="KEY", envvar="CONDUKT_API_KEY", help="The API key (default: the provider's variable)."
    ),
]
ToolsOption = Annotated[
    ToolSet | None,
    typer.Option(
        "--tools",
        help="Built-in tools for the agent (default: coding; with --agent, the agent's own).",
        show_default=False,
    ),
]
CwdOption = Annotated[
    Path,
    typer.Option(
        "--cwd",
        metavar="DIR",
        help="The agent's working directory.",
        file_okay=False,
        exists=True,
        resolve_path=True,
    ),
]
SystemOption = Annotated[str | None, typer.Option("--system", metavar="TEXT", help="A system prompt.")]
ThinkingOption = Annotated[
    str | None,
    typer.Option(
        "--thinking", metavar="LEVEL", callback=_check_thinking, help=f"Thinking level: {', '.join(THINKING_LEVELS)}."
    ),
]
PricesOption = Annotated[
    str | None,
    typer.Option(
        "--prices",
        metavar="IN,OUT",
        callback=_check_prices,
        help="Dollars per million input,output tokens (e.g. 3,15), to show the cost.",
    ),
]


# ----------------------------------------------------------------------------- run


@app.command(cls=_Command)
def run(
    prompt: Annotated[str, typer.Argument(metavar="PROMPT", help="What to ask; '-' reads it from stdin.")],
    agent: AgentOption = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    tools: ToolsOption = None,
    mcp: McpOption = None,
    cwd: CwdOption = Path("."),
    system: SystemOption = None,
    thinking: ThinkingOption = None,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", metavar="N", help="Stop after this many model requests.")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="Seconds the run may take.")] = 600.0,
    prices: PricesOption = None,
    json_lines: Annotated[bool, typer.Option("--json", help="Print one JSON line per event instead.")] = False,
) -> None:
    """Run one prompt on an agent, streaming its answer, tool calls and usage.

    Exits 0 when the run completed, 1 when it failed (one line on stderr).
    """

    async def main() -> int:
        text = sys.stdin.read() if prompt == "-" else prompt
        choice = choose_agent(
            agent=agent, model=model, base_url=base_url, api_key=api_key, tools=tools, cwd=cwd,
            system=system, thinking=thinking, mcp=mcp or (),
        )  # fmt: skip
        price_pair = parse_prices(prices)
        async with condukt.open_node() as node:
            handle = await node.spawn(choice.agent, **choice.options)
            async with handle.stream(text, timeout=timeout, max_turns=max_turns) as events:
                if json_lines:
                    printer = JsonPrinter(sys.stdout)
                    async for event in events:
                        printer.handle(event)
                else:
                    with Renderer(Console(highlight=False), prices=price_pair, errors=False) as renderer:
                        renderer.waiting("starting")
                        async for event in events:
                            renderer.handle(event)
        if events.error is not None:
            message = " ".join(events.error.message.split())
            print(f"error: {events.error.error_type}: {message}", file=sys.stderr)
            return 1
        return 0 if events.done is not None and events.done.status == "completed" else 1

    execute(main)


# ----------------------------------------------------------------------------- chat


@app.command(cls=_Command)
def chat(
    agent: AgentOption = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    tools: ToolsOption = None,
    mcp: McpOption = None,
    cwd: CwdOption = Path("."),
    system: SystemOption = None,
    thinking: ThinkingOption = None,
    prices: PricesOption = None,
) -> None:
    """An interactive session with one agent; it keeps the conversation.

    Ctrl-C aborts the current run, a second Ctrl-C (or Ctrl-D) exits.
    Commands: /steer TEXT (add to the running turn), /clear (forget the
    conversation), /history (show it), /help, /exit.
    """
    from ._chat import chat_session

    async def main() -> int:
        choice = choose_agent(
            agent=agent, model=model, base_url=base_url, api_key=api_key, tools=tools, cwd=cwd,
            system=system, thinking=thinking, mcp=mcp or (),
        )  # fmt: skip
        return await chat_session(choice, Console(highlight=False), prices=parse_prices(prices))

    execute(main)


# ----------------------------------------------------------------------------- serve


def load_app(target: str) -> Any:
    """The object ``MODULE:ATTR`` names (attributes may be dotted), imported from the current directory too."""
    return load_object(target, "MODULE:APP")


#: Seconds ``condukt serve`` gives runs in flight at shutdown when ``--grace`` is not given.
DEFAULT_GRACE = 10.0


def _agent_app(choice: AgentChoice, token: str | None, grace: float) -> Any:
    try:
        import condukt.web
    except ImportError:
        raise CommandError("condukt serve --agent needs condukt.web: pip install 'condukt[cli,web]'") from None
    spec = condukt.ChildSpec(None, choice.agent, kwargs=choice.options)
    return condukt.web.create_app(agents={route_name(choice.agent): spec}, token=token, shutdown_grace=grace)


async def _drain(application: Any, grace: float | None) -> bool:
    """``condukt.web.drain`` for an app ``create_app`` made (False for any other app: nothing to drain)."""
    try:
        from condukt.web import drain
    except ImportError:
        return False
    try:
        await drain(application, grace=grace)
    except TypeError:
        return False
    return True


async def _serve_app(
    application: Any, host: str, port: int, after: str | None = None, grace: float | None = None
) -> int:
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve as hypercorn_serve
    except ImportError:
        raise CommandError("condukt serve needs hypercorn: pip install 'condukt[cli]'") from None
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    # Set, not left to hypercorn's defaults, because they are what stops slow clients: a connection
    # without a request in progress (headers still arriving, or nothing sent) is closed after the
    # keep-alive timeout, and a request's headers may hold 16 KiB at most (docs/http.md, "Security").
    config.keep_alive_timeout = 5.0
    config.h11_max_incomplete_size = 16 * 1024
    # What hypercorn gives the requests still open once it stops: a condukt.web app's runs have
    # had their grace already (drain, below), and their streams only need to send their last events.
    config.graceful_timeout = DEFAULT_GRACE if grace is None else grace
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

        async def shutdown_trigger() -> None:
            async for _ in signals:
                break
            # A condukt.web app: new runs get 503 while the runs in flight finish (up to the grace),
            # then its sessions stop, and only then does the server stop. A second signal cuts it short.
            async with trio.open_nursery() as nursery:

                async def second_signal() -> None:
                    async for _ in signals:
                        print("stopping now", flush=True)
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(second_signal)
                if await _drain(application, grace):
                    config.graceful_timeout = 5.0
                nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            start = functools.partial(
                hypercorn_serve, application, config, mode="asgi", shutdown_trigger=shutdown_trigger
            )
            binds = await start_listening(nursery, start, host, port)
            print(f"serving on {' '.join(binds)}", flush=True)
            if after:
                print(after.format(url=binds[0]), flush=True)
    print("stopped", flush=True)
    return 0


@app.command(cls=_Command)
def serve(
    ctx: typer.Context,
    target: Annotated[
        str | None,
        typer.Argument(metavar="MODULE:APP", help="The ASGI application, e.g. myservice:app (or --agent)."),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", metavar="MODULE:CLASS", help="Serve this agent class over condukt's HTTP API instead of an app."
        ),
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    mcp: McpOption = None,
    token: Annotated[
        str | None,
        typer.Option("--token", metavar="TOKEN", envvar="CONDUKT_TOKEN", help="With --agent: the bearer token."),
    ] = None,
    host: Annotated[str, typer.Option("--host", metavar="HOST", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="The port (0: any free port).")] = 8000,
    grace: Annotated[
        float | None,
        typer.Option(
            "--grace",
            metavar="SECONDS",
            min=0.0,
            help="At shutdown, the seconds runs in flight get to finish (new runs get 503) before they are "
            f"stopped. Default: a condukt.web app's own shutdown_grace; {DEFAULT_GRACE:g} with --agent.",
        ),
    ] = None,
) -> None:
    """Serve an ASGI application (condukt.web, FastAPI, Starlette...) with hypercorn on trio.

    Prints "serving on http://HOST:PORT" once listening; Ctrl-C (or
    SIGTERM) shuts it down gracefully and exits 0: for a condukt.web app
    (create_app, or --agent), new runs get 503 with Retry-After, runs in
    flight get --grace seconds to finish (their streams end with done),
    then the sessions stop, then the server; for any other app, requests
    in flight get --grace seconds. A second signal stops at once. With
    --agent MODULE:CLASS it serves that agent at /agents/NAME
    (condukt.web.create_app).
    """

    async def main() -> int:
        if (target is None) == (agent is None):
            raise UsageError("give MODULE:APP or --agent MODULE:CLASS (one of them)")
        if target is not None:
            # Given on the command line, not by the environment (CONDUKT_MODEL, CONDUKT_TOKEN... may be set).
            given = [
                f"--{name.replace('_', '-')}"
                for name in ("model", "base_url", "api_key", "mcp", "token")
                if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"
            ]
            if given:
                raise UsageError(f"{', '.join(given)} only with --agent (MODULE:APP is served as it is)")
            return await _serve_app(load_app(target), host, port, grace=grace)
        choice = choose_agent(
            agent=agent, model=model, base_url=base_url, api_key=api_key, tools=None, cwd=None, mcp=mcp or ()
        )
        name = route_name(choice.agent)
        after = f"agent {name}: POST {{url}}/agents/{name}/runs"
        chosen = DEFAULT_GRACE if grace is None else grace
        return await _serve_app(_agent_app(choice, token, chosen), host, port, after, grace=chosen)

    execute(main)


# ----------------------------------------------------------------------------- observe


@app.command(cls=_Command)
def observe(
    url: Annotated[
        str | None,
        typer.Argument(
            metavar="URL", help="A running app's address (its observer at /observer/); none: a live offline demo."
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", metavar="TOKEN", envvar="CONDUKT_TOKEN", help="The app's bearer token."),
    ] = None,
    host: Annotated[str, typer.Option("--host", metavar="HOST", help="Demo: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Demo: the port (0: any free port).")] = 8001,
    open_browser: Annotated[bool, typer.Option("--open/--no-open", help="Open the page in a browser.")] = True,
    no_token: Annotated[
        bool, typer.Option("--no-token", help="Demo: serve without a token (whoever reaches the port sees it all).")
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host", metavar="NAME", help="Demo: another host name browsers use to reach it (repeatable)."
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Demo: log its flaky agent's crash reports on stderr too.")
    ] = False,
) -> None:
    """The live dashboard of a node: its supervision tree, agents' runs and events, an abort button.

    With URL: prints (and opens) the observer page of a condukt.web app
    started with observer=True, the token in the page address's fragment
    (never sent to the server). Without: starts an offline demo node
    (scripted agents under a supervisor, busy with tool calls, one crashing
    now and then, quietly unless --verbose) and serves its observer until
    Ctrl-C, behind a token made for it (in the printed address's fragment)
    unless --token or --no-token.
    """
    import webbrowser

    from ..web import observer as observer_web

    if url is not None:
        page = observer_web.page_url(url, token)
        print(page, flush=True)
        if open_browser:
            webbrowser.open(page)
        raise typer.Exit(0)

    from ._observe import demo_crashes_quiet, demo_workload

    async def main() -> int:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with condukt.open_node() as node, trio.open_nursery() as nursery:
                await nursery.start(demo_workload, node)
                chosen = None if no_token else token if token is not None else observer_web.NEW_TOKEN
                start = functools.partial(
                    observer_web.serve, node, host=host, port=port, token=chosen, allowed_hosts=allow_host or ()
                )
                page = await start_listening(nursery, start, host, port)
                print(f"observing a demo node at {page} (Ctrl-C stops)", flush=True)
                if open_browser:
                    webbrowser.open(page)
                async for _ in signals:
                    break
                nursery.cancel_scope.cancel()
        print("stopped", flush=True)
        return 0

    with contextlib.nullcontext() if verbose else demo_crashes_quiet():
        execute(main)


# ----------------------------------------------------------------------------- demo


@app.command(cls=_Command)
def demo(
    which: Annotated[str, typer.Argument(metavar="[agents|runtime]", help="agents (default) or runtime.")] = "agents",
    live: Annotated[
        bool, typer.Option("--live", help="Use a real provider (ANTHROPIC_API_KEY or OPENAI_API_KEY) instead.")
    ] = False,
) -> None:
    """The demo: offline on scripted models unless --live (same as python -m condukt.demo)."""
    if which == "runtime":
        from ..demo.runtime import run as run_runtime

        run_runtime()
    elif which == "agents":
        from ..demo.agents import run as run_agents

        run_agents(live)
    else:
        print(f"error: no demo named {which!r} (agents, runtime)", file=sys.stderr)
        raise typer.Exit(2)


# ----------------------------------------------------------------------------- test-server


@app.command(
    "test-server",
    cls=_Command,
    add_help_option=False,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def test_server(ctx: typer.Context) -> None:
    """A local server speaking the providers' wire formats, answering a script (--help for its options).

    The same program as python -m condukt.testing.server: prints its base
    URL first, then serves until Ctrl-C.
    """
    from ..testing.server import main as server_main

    raise typer.Exit(server_main(ctx.args, prog="condukt test-server"))


def main() -> None:
    """The ``condukt`` console script: exits with the command's status; usage errors are one line (status 2)."""
    try:
        status = app(standalone_mode=False)
    except typer.TyperException as exc:  # click's exceptions: a usage error, a bad parameter
        context = getattr(exc, "ctx", None)
        where = getattr(context, "command_path", "condukt")
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        if message.strip():  # empty when the help was shown instead (no arguments)
            print(f"error: {' '.join(message.split())} (see: {where} --help)", file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort:
        sys.exit(130)
    sys.exit(status if isinstance(status, int) else 0)
