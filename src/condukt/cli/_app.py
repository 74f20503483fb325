"""The ``condukt`` commands, on typer."""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import trio
import typer
from rich.console import Console

import condukt
from condukt.providers import MissingApiKey

from ._render import JsonPrinter, Renderer

__all__ = ["app", "main"]

app = typer.Typer(
    name="condukt",
    help="Reliable LLM agents as supervised processes on trio: run, chat, serve, observe, demo.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

#: The models picked when no --model / CONDUKT_MODEL is given, by the key that is set.
DEFAULT_MODELS = (("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"), ("OPENAI_API_KEY", "openai:gpt-4o-mini"))


class ToolSet(str, Enum):
    """The tools ``run`` and ``chat`` give the agent."""

    coding = "coding"
    read_only = "read-only"
    none = "none"


class UsageError(Exception):
    """A mistake on the command line: shown as its message alone."""


class _State:
    debug = False


def _error_line(exc: BaseException) -> str:
    """``"error: MissingApiKey: openai: no API key: ..."``: one line, whatever the exception."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    message = " ".join(str(exc).split()) or repr(exc)
    if isinstance(exc, UsageError):
        return f"error: {message}"
    if isinstance(exc, MissingApiKey):  # the library's advice, in the command line's words
        message = message.replace("pass api_key=... when starting the agent", "pass --api-key")
    return f"error: {type(exc).__name__}: {message}"


def _execute(main: Callable[[], Awaitable[int]]) -> None:
    """Run ``main`` under trio and exit with its status.

    Errors end the command with one line on stderr and status 1 (``--debug``
    shows the traceback instead); Ctrl-C ends it with status 130.
    """
    try:
        status = trio.run(main)
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        if isinstance(exc, BaseExceptionGroup) and exc.split(KeyboardInterrupt)[1] is not None:
            raise  # not only Ctrl-C
        Console(stderr=True).print("interrupted", style="yellow")
        raise typer.Exit(130) from None
    except Exception as exc:
        if _State.debug:
            traceback.print_exception(exc)
        else:
            print(_error_line(exc), file=sys.stderr)
        raise typer.Exit(1) from None
    raise typer.Exit(status)


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
    _State.debug = debug


# ----------------------------------------------------------------------------- options shared by run and chat

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        envvar="CONDUKT_MODEL",
        help="provider:name. Default: anthropic or openai, whichever key is set.",
        show_default=False,
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option("--base-url", help="The provider's base URL (an OpenAI-compatible server: ollama, vllm...)."),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option("--api-key", envvar="CONDUKT_API_KEY", help="The API key (default: the provider's variable)."),
]
ToolsOption = Annotated[ToolSet, typer.Option("--tools", help="The tools the agent may use.")]
CwdOption = Annotated[
    Path, typer.Option("--cwd", help="The agent's working directory.", file_okay=False, exists=True, resolve_path=True)
]
SystemOption = Annotated[str | None, typer.Option("--system", help="A system prompt.")]
ThinkingOption = Annotated[
    str | None, typer.Option("--thinking", help="Thinking level: off, minimal, low, medium, high.")
]
PricesOption = Annotated[
    str | None,
    typer.Option("--prices", help="Dollars per million input,output tokens (e.g. 3,15), to show the cost."),
]


def agent_options(
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    tools: ToolSet,
    cwd: Path,
    system: str | None,
    thinking: str | None,
) -> dict[str, Any]:
    """The agent's start options from the command line and the environment."""
    if model is None:
        model = next((name for env, name in DEFAULT_MODELS if os.environ.get(env)), None)
        if model is None:
            raise UsageError("no model: pass --model provider:name or set CONDUKT_MODEL (and the provider's key)")
    chosen = {
        ToolSet.coding: condukt.tools.coding_tools(),
        ToolSet.read_only: condukt.tools.read_only_tools(),
        ToolSet.none: [],
    }[tools]
    options: dict[str, Any] = {"model": model, "tools": chosen, "cwd": str(cwd)}
    if base_url is not None:
        options["base_url"] = base_url
    if api_key is not None:
        options["api_key"] = api_key
    if system is not None:
        options["system_prompt"] = system
    if thinking is not None:
        options["thinking_level"] = thinking
    return options


def parse_prices(text: str | None) -> tuple[float, float] | None:
    """``"3,15"`` -> ``(3.0, 15.0)``."""
    if text is None:
        return None
    try:
        input_price, output_price = (float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"--prices takes INPUT,OUTPUT dollars per million tokens, got {text!r}") from None
    return input_price, output_price


# ----------------------------------------------------------------------------- run


@app.command()
def run(
    prompt: Annotated[str, typer.Argument(help="What to ask; '-' reads it from stdin.")],
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    tools: ToolsOption = ToolSet.coding,
    cwd: CwdOption = Path("."),
    system: SystemOption = None,
    thinking: ThinkingOption = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="Stop after this many model requests.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds the run may take.")] = 600.0,
    prices: PricesOption = None,
    json_lines: Annotated[bool, typer.Option("--json", help="Print one JSON line per event instead.")] = False,
) -> None:
    """Run one prompt on an agent, streaming its answer, tool calls and usage.

    Exits 0 when the run completed, 1 when it failed (one line on stderr).
    """

    async def main() -> int:
        text = sys.stdin.read() if prompt == "-" else prompt
        options = agent_options(model, base_url, api_key, tools, cwd, system, thinking)
        price_pair = parse_prices(prices)
        async with condukt.open_node() as node:
            agent = await node.spawn(condukt.Agent, **options)
            async with agent.stream(text, timeout=timeout, max_turns=max_turns) as events:
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

    _execute(main)


# ----------------------------------------------------------------------------- chat


@app.command()
def chat(
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    api_key: ApiKeyOption = None,
    tools: ToolsOption = ToolSet.coding,
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
        options = agent_options(model, base_url, api_key, tools, cwd, system, thinking)
        return await chat_session(options, Console(highlight=False), prices=parse_prices(prices))

    _execute(main)


# ----------------------------------------------------------------------------- serve


def load_app(target: str) -> Any:
    """The object ``MODULE:ATTR`` names (attributes may be dotted), imported from the current directory too."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"expected MODULE:APP, got {target!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise UsageError(f"no module named {module_name!r}") from None
        raise
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise UsageError(f"module {module_name!r} has no attribute {attribute!r}") from None
    return value


@app.command()
def serve(
    target: Annotated[str, typer.Argument(metavar="MODULE:APP", help="The ASGI application, e.g. myservice:app.")],
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port (0: any free port).")] = 8000,
) -> None:
    """Serve an ASGI application (condukt.web, FastAPI, Starlette...) with hypercorn on trio.

    Prints "serving on http://HOST:PORT" once listening; Ctrl-C (or
    SIGTERM) shuts it down gracefully (requests in flight finish, the app's
    lifespan shutdown runs) and exits 0.
    """

    async def main() -> int:
        try:
            from hypercorn.config import Config
            from hypercorn.trio import serve as hypercorn_serve
        except ImportError:
            raise UsageError("condukt serve needs hypercorn: pip install 'condukt[cli]'") from None
        application = load_app(target)
        config = Config()
        config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
        config.accesslog = None
        # Set, not left to hypercorn's defaults, because they are what stops slow clients: a connection
        # without a request in progress (headers still arriving, or nothing sent) is closed after the
        # keep-alive timeout, and a request's headers may hold 16 KiB at most (docs/http.md, "Security").
        config.keep_alive_timeout = 5.0
        config.h11_max_incomplete_size = 16 * 1024
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

            async def shutdown_trigger() -> None:
                async for _ in signals:
                    return

            async with trio.open_nursery() as nursery:
                start = functools.partial(
                    hypercorn_serve, application, config, mode="asgi", shutdown_trigger=shutdown_trigger
                )
                binds = await nursery.start(start)
                print(f"serving on {' '.join(binds)}", flush=True)
        print("stopped", flush=True)
        return 0

    _execute(main)


# ----------------------------------------------------------------------------- observe


@app.command()
def observe(
    url: Annotated[
        str | None,
        typer.Argument(help="A running app's address (its observer at /observer/); none: a live offline demo."),
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", envvar="CONDUKT_TOKEN", help="The app's bearer token.")
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Demo: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Demo: the port (0: any free port).")] = 8001,
    open_browser: Annotated[bool, typer.Option("--open/--no-open", help="Open the page in a browser.")] = True,
    no_token: Annotated[
        bool, typer.Option("--no-token", help="Demo: serve without a token (whoever reaches the port sees it all).")
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="Demo: another host name browsers use to reach it (repeatable)."),
    ] = None,
) -> None:
    """The live dashboard of a node: its supervision tree, agents' runs and events, an abort button.

    With URL: prints (and opens) the observer page of a condukt.web app
    started with observer=True, the token in the page address's fragment
    (never sent to the server). Without: starts an offline demo node
    (scripted agents under a supervisor, busy with tool calls, one crashing
    now and then) and serves its observer until Ctrl-C, behind a token made
    for it (in the printed address's fragment) unless --token or --no-token.
    """
    import webbrowser

    from ..web import observer as observer_web

    if url is not None:
        page = observer_web.page_url(url, token)
        print(page, flush=True)
        if open_browser:
            webbrowser.open(page)
        raise typer.Exit(0)

    from ._observe import demo_workload

    async def main() -> int:
        async with condukt.open_node() as node, trio.open_nursery() as nursery:
            await nursery.start(demo_workload, node)
            chosen = None if no_token else token if token is not None else observer_web.NEW_TOKEN
            page = await nursery.start(
                functools.partial(
                    observer_web.serve, node, host=host, port=port, token=chosen, allowed_hosts=allow_host or ()
                )
            )
            print(f"observing a demo node at {page} (Ctrl-C stops)", flush=True)
            if open_browser:
                webbrowser.open(page)
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    break
            nursery.cancel_scope.cancel()
        print("stopped", flush=True)
        return 0

    _execute(main)


# ----------------------------------------------------------------------------- demo


@app.command()
def demo(
    which: Annotated[str, typer.Argument(help="agents (default) or runtime.")] = "agents",
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
