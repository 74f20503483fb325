"""``condukt chat``: an interactive session with one agent."""

from __future__ import annotations

import signal
import sys
from typing import Any

import trio
from rich.console import Console
from rich.text import Text

import condukt
from condukt import messages

from ._render import Renderer

__all__ = ["chat_session"]

HELP = (
    "/steer TEXT  add TEXT to the run in progress\n"
    "/clear       forget the conversation\n"
    "/history     show the conversation\n"
    "/exit        leave (as does Ctrl-D, or Ctrl-C twice)\n"
    "Ctrl-C aborts the run in progress."
)


def _describe(message: Any) -> str:
    """One line for a history message."""
    if isinstance(message, messages.UserMessage):
        return f"you: {message.text}"
    if isinstance(message, messages.AssistantMessage):
        calls = ", ".join(call.name for call in message.tool_calls)
        text = message.text.strip()
        return f"agent: {text}" + (f" [tools: {calls}]" if calls else "")
    if isinstance(message, messages.ToolResultMessage):
        first = message.text.strip().splitlines()[0] if message.text.strip() else ""
        return f"tool {message.name}: {first[:100]}"
    return repr(message)


def _read_line() -> str | None:
    """One line from stdin (``None`` at its end); on a terminal with line editing and history (readline)."""
    if sys.stdin.isatty():
        try:
            return input()
        except EOFError:
            return None
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


async def _read_lines(send: trio.MemorySendChannel[tuple[str, str]]) -> None:
    """Lines typed on stdin, read in a thread (a blocking read is not cancellable: the thread is abandoned)."""
    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401  # arrow keys and the session's input history for input()
        except ImportError:  # pragma: no cover - platforms without readline
            pass
    async with send:
        while True:
            line = await trio.to_thread.run_sync(_read_line, abandon_on_cancel=True)
            if line is None:
                await send.send(("eof", ""))
                return
            await send.send(("line", line))


async def _read_signals(send: trio.MemorySendChannel[tuple[str, str]]) -> None:
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            await send.send(("sigint", ""))


async def chat_session(options: dict[str, Any], console: Console, *, prices: tuple[float, float] | None) -> int:
    """Talk to one agent started with ``options`` until Ctrl-D, ``/exit`` or a second Ctrl-C.

    Runs go one at a time; while one runs, lines starting with ``/steer``
    are steered into it and Ctrl-C aborts it (its turns that completed stay
    in the conversation). Returns the exit status (0).
    """
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, **options)
        console.print(Text(f"condukt chat · {options['model']} · /help for commands, Ctrl-D to leave", style="dim"))
        send, receive = trio.open_memory_channel[tuple[str, str]](16)
        running: trio.CancelScope | None = None
        aborting = False
        armed = False  # a Ctrl-C was pressed at the prompt: the next one exits

        def prompt() -> None:
            console.print(Text("you> ", style="bold green"), end="")
            console.file.flush()

        async def one_run(text: str, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            nonlocal running, aborting
            with trio.CancelScope() as scope:
                running = scope
                task_status.started()
                try:
                    with Renderer(console, prices=prices) as renderer:
                        renderer.waiting("starting")
                        async with agent.stream(text, timeout=None) as events:
                            async for event in events:
                                renderer.handle(event)
                except condukt.ConduktError as exc:
                    console.print(Text(f"error: {type(exc).__name__}: {exc}", style="bold red"))
            running = None
            aborting = False
            prompt()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_lines, send.clone())
            nursery.start_soon(_read_signals, send)
            prompt()
            async for kind, line in receive:
                if kind == "eof":
                    break
                if kind == "sigint":
                    if running is not None and not aborting:
                        aborting = True
                        console.print(Text("\naborting the run (Ctrl-C again exits)", style="yellow"))
                        nursery.start_soon(agent.abort)
                        continue
                    if running is not None or armed:
                        break
                    armed = True
                    console.print(Text("\n(Ctrl-C again or Ctrl-D exits)", style="dim"))
                    prompt()
                    continue
                armed = False
                command, _, rest = line.strip().partition(" ")
                if command == "/steer":
                    if running is None or not rest.strip():
                        console.print(Text("/steer TEXT works while a run is in progress", style="yellow"))
                    else:
                        try:
                            await agent.steer(rest.strip())
                        except condukt.NotRunning:
                            console.print(Text("the run already finished", style="yellow"))
                    continue
                if running is not None:
                    if line.strip():
                        console.print(Text("a run is in progress: /steer TEXT, or Ctrl-C to abort", style="yellow"))
                    continue
                if command in ("/exit", "/quit"):
                    break
                if command == "/help":
                    console.print(Text(HELP, style="dim"))
                elif command == "/clear":
                    await agent.clear()
                    console.print(Text("conversation cleared", style="dim"))
                elif command == "/history":
                    history = await agent.history()
                    for message in history:
                        console.print(Text(_describe(message)))
                    if not history:
                        console.print(Text("(empty)", style="dim"))
                elif command.startswith("/"):
                    console.print(Text(f"unknown command {command}; /help lists them", style="yellow"))
                elif line.strip():
                    await nursery.start(one_run, line.strip())
                    continue
                prompt()
            nursery.cancel_scope.cancel()
    console.print()
    return 0
