"""``condukt chat``: an interactive session with one agent."""

from __future__ import annotations

import signal
import sys
from collections import deque
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

    Runs go one at a time; while one runs, ``/steer TEXT`` is steered into
    it, Ctrl-C aborts it (its turns that completed stay in the
    conversation), and other lines wait their turn (so piped input runs
    line after line). Returns the exit status (0).
    """
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, **options)
        console.print(Text(f"condukt chat · {options['model']} · /help for commands, Ctrl-D to leave", style="dim"))
        send, receive = trio.open_memory_channel[tuple[str, str]](16)
        running = False  # a run is in progress
        aborting = False
        armed = False  # a Ctrl-C was pressed at the prompt: the next one exits
        ended = False  # stdin ended: leave once what was typed before has run
        waiting: deque[str] = deque()  # lines typed during a run

        def say(text: str, style: str = "dim") -> None:
            console.print(Text(text, style=style))

        def prompt() -> None:
            console.print(Text("you> ", style="bold green"), end="")
            console.file.flush()

        async def one_run(text: str, done: trio.MemorySendChannel[tuple[str, str]]) -> None:
            # ``running`` turns false only when the loop below takes this "done": a line read
            # meanwhile must still wait behind those typed before it (it did not, under load:
            # a piped "/history" ran before the "second" that waited, and printed no answer).
            async with done:
                try:
                    with Renderer(console, prices=prices) as renderer:
                        renderer.waiting("starting")
                        async with agent.stream(text, timeout=None) as events:
                            async for event in events:
                                renderer.handle(event)
                except condukt.ConduktError as exc:
                    say(f"error: {type(exc).__name__}: {exc}", "bold red")
                await done.send(("done", ""))

        async def handle(line: str) -> bool:
            """Act on one line typed at the prompt; False to leave."""
            nonlocal running
            command, _, rest = line.strip().partition(" ")
            if command in ("/exit", "/quit"):
                return False
            if command == "/help":
                say(HELP)
            elif command == "/steer":
                say("/steer TEXT works while a run is in progress", "yellow")
            elif command == "/clear":
                await agent.clear()
                say("conversation cleared")
            elif command == "/history":
                history = await agent.history()
                for message in history:
                    console.print(Text(_describe(message)))
                if not history:
                    say("(empty)")
            elif command.startswith("/"):
                say(f"unknown command {command}; /help lists them", "yellow")
            elif line.strip():
                running = True
                nursery.start_soon(one_run, line.strip(), send.clone())
            return True

        async def idle() -> bool:
            """Run the lines that waited, until one starts a run; prompt when none is left. False to leave."""
            while not running and waiting:
                if not await handle(waiting.popleft()):
                    return False
            if not running:
                if ended:
                    return False
                prompt()
            return True

        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_lines, send.clone())
            nursery.start_soon(_read_signals, send.clone())
            prompt()
            async for kind, line in receive:
                if kind == "done":
                    running = aborting = False
                    if not await idle():
                        break
                elif kind == "eof":
                    ended = True
                    if not running and not waiting:
                        break
                elif kind == "sigint":
                    if running and not aborting:
                        aborting = True
                        waiting.clear()
                        say("\naborting the run (Ctrl-C again exits)", "yellow")
                        nursery.start_soon(agent.abort)
                    elif running or armed:
                        break
                    else:
                        armed = True
                        say("\n(Ctrl-C again or Ctrl-D exits)")
                        prompt()
                elif running:
                    command, _, rest = line.strip().partition(" ")
                    if command == "/steer" and rest.strip():
                        try:
                            await agent.steer(rest.strip())
                        except condukt.NotRunning:
                            waiting.append(rest.strip())  # the run just ended: it becomes the next prompt
                    elif line.strip():
                        waiting.append(line)
                else:
                    armed = False
                    if not await handle(line) or not await idle():
                        break
            nursery.cancel_scope.cancel()
    console.print()
    return 0
