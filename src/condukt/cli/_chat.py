"""``condukt chat``: an interactive session with one agent.

Two fronts read the lines and show the runs. On a terminal (stdin and
stdout, not ``TERM=dumb``) with prompt_toolkit installed (the ``cli``
extra), :class:`_EditorFront`: the input line stays at the bottom and is
never written over; the run in progress (text, spinner, queued prompts)
is drawn above it by prompt_toolkit, which also prints what is finished
above both (``patch_stdout``), so the scrollback holds finished lines
only. prompt_toolkit runs on asyncio: its loop lives in a thread of its
own, the session's trio loop posts nothing to it but a redraw and an exit.
Elsewhere (piped stdin, a dumb terminal, no prompt_toolkit),
:class:`_LineFront`: lines read with ``input()`` (readline editing on a
terminal) and rich's transient live display.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import signal
import sys
import threading
from collections import deque
from typing import Any, Literal

import trio
from rich.console import Console
from rich.text import Text

import condukt
from condukt import messages

from ._agents import AgentChoice
from ._render import Renderer

__all__ = ["chat_session"]

HELP = (
    "/steer TEXT  add TEXT to the run in progress\n"
    "/clear       forget the conversation\n"
    "/history     show the conversation\n"
    "/exit        leave (as does Ctrl-D, or Ctrl-C twice)\n"
    "Ctrl-C aborts the run in progress; other lines typed meanwhile wait their turn."
)

PROMPT = "you> "
_Posted = tuple[str, str]


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


def _header(text: str) -> Text:
    return Text.assemble((PROMPT, "bold green"), text)


class _LineFront:
    """Lines from stdin (readline editing on a terminal), runs shown with rich's live display."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.interactive = sys.stdin.isatty()
        #: The prompt is printed and its line not ended yet.
        self.prompt_open = False
        self.queued: list[str] = []
        self.renderer: Renderer | None = None

    def make_renderer(self, prices: tuple[float, float] | None) -> Renderer:
        return Renderer(self.console, prices=prices)

    def prompt(self) -> None:
        self.console.print(Text(PROMPT, style="bold green"), end="")
        self.console.file.flush()
        self.prompt_open = True

    def echo(self, text: str) -> None:
        """Show what was typed before acting on it: a terminal echoed it already after an open prompt."""
        if self.prompt_open:
            if not self.interactive:
                self.console.print(Text(text), soft_wrap=True)
        else:
            self.console.print(_header(text), soft_wrap=True)
        self.prompt_open = False

    def say(self, text: str, style: str = "dim") -> None:
        if self.prompt_open:
            self.console.print()
            self.prompt_open = False
        self.console.print(Text(text, style=style), soft_wrap=True)

    def changed(self) -> None:
        """The queue or the run's state changed (rich's live display redraws on its own)."""

    async def read(self, send: trio.MemorySendChannel[_Posted]) -> None:
        """Post each line read (``"line"``), then ``"eof"``; reads in a thread, abandoned when cancelled."""
        if self.interactive:
            try:
                import readline  # noqa: F401  # arrow keys and the session's input history for input()
            except ImportError:  # pragma: no cover - platforms without readline
                pass
        async with send:
            while True:
                line = await trio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
                if line is None:
                    await send.send(("eof", ""))
                    return
                await send.send(("line", line))

    def _read_line(self) -> str | None:
        if self.interactive:
            try:
                return input()
            except EOFError:
                return None
        line = sys.stdin.readline()
        return line.rstrip("\n") if line else None

    async def aclose(self) -> None:
        if self.prompt_open:
            self.console.print()


class _EditorFront:
    """A prompt_toolkit input line at the bottom; the run in progress drawn above it, finished lines above both."""

    def __init__(self, console: Console) -> None:
        from prompt_toolkit import PromptSession

        self.console = console
        self.session: Any = PromptSession(erase_when_done=True, reserve_space_for_menu=0)
        self.queued: list[str] = []
        self.renderer: Renderer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._stopped = trio.Event()

    @staticmethod
    def usable() -> bool:
        """Whether this front fits: a terminal in and out that is not dumb, and prompt_toolkit installed."""
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            return False
        if os.environ.get("TERM", "") in ("dumb", "unknown", ""):
            return False
        try:
            import prompt_toolkit  # noqa: F401
        except ImportError:
            return False
        return True

    def make_renderer(self, prices: tuple[float, float] | None) -> Renderer:
        return Renderer(self.console, prices=prices, live=False)

    def prompt(self) -> None:
        """The input line is always there."""

    def echo(self, text: str) -> None:
        """The accepted line was erased from the input line: print it as the header of what follows."""
        self.console.print(_header(text), soft_wrap=True)

    def say(self, text: str, style: str = "dim") -> None:
        self.console.print(Text(text, style=style), soft_wrap=True)

    def changed(self) -> None:
        """Redraw the input line's area now (not only at the next refresh)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._invalidate)

    def _invalidate(self) -> None:
        app = self.session.app
        if app.is_running:
            app.invalidate()

    # ------------------------------------------------------------------ drawn by prompt_toolkit, in its thread

    def _message(self) -> Any:
        from prompt_toolkit.formatted_text import ANSI

        columns, rows = shutil.get_terminal_size()
        system = self.console.color_system
        colors: Literal["standard", "256", "truecolor"] = (
            "truecolor" if system == "truecolor" else "256" if system == "256" else "standard"
        )
        above = Console(
            file=io.StringIO(),
            force_terminal=True,
            color_system=colors,
            width=max(columns, 20),
            highlight=False,
            legacy_windows=False,
        )
        renderer = self.renderer
        view = renderer.live_view() if renderer is not None else None
        if view is not None:
            above.print(view)
        for line in list(self.queued):
            above.print(Text(f"queued: {line}", style="dim"), overflow="ellipsis", no_wrap=True)
        drawn = above.file.getvalue()  # type: ignore[attr-defined]
        lines = drawn.splitlines()
        room = max(rows - 3, 1)  # the live part never pushes the input line off the screen
        if len(lines) > room:
            drawn = "\n".join(lines[-room:]) + "\n"
        return ANSI(drawn + f"\x1b[1;32m{PROMPT}\x1b[0m")

    def _pre_run(self) -> None:
        if self._closing:
            self._exit_app()

    def _exit_app(self) -> None:
        app = self.session.app
        future = app.future
        if future is not None and not future.done():
            app.exit(result=None)

    # ------------------------------------------------------------------ reading

    async def read(self, send: trio.MemorySendChannel[_Posted]) -> None:
        """Post each line accepted (``"line"``), Ctrl-C (``"sigint"``), Ctrl-D (``"eof"``) until :meth:`aclose`.

        prompt_toolkit runs in a thread with an asyncio loop of its own;
        cancelling this stops waiting for it (:meth:`aclose` ends it).
        """
        token = trio.lowlevel.current_trio_token()

        def post(kind: str, text: str = "") -> None:
            if not self._closing:
                try:
                    trio.from_thread.run(send.send, (kind, text), trio_token=token)
                except (trio.RunFinishedError, trio.ClosedResourceError, trio.BrokenResourceError):
                    pass

        async def prompts() -> None:
            from prompt_toolkit.patch_stdout import patch_stdout

            self._loop = asyncio.get_running_loop()
            with patch_stdout(raw=True):
                while not self._closing:
                    try:
                        text = await self.session.prompt_async(
                            self._message,
                            refresh_interval=0.1,
                            pre_run=self._pre_run,
                            handle_sigint=False,
                            set_exception_handler=False,
                        )
                    except KeyboardInterrupt:
                        post("sigint")
                    except EOFError:
                        post("eof")
                    else:
                        if text is not None:
                            post("line", text)

        def thread() -> None:
            try:
                asyncio.run(prompts())
            except Exception as exc:  # noqa: BLE001 - the session must hear of it, or it waits for input forever
                print(f"error: the input line failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                post("eof")
            finally:
                self._loop = None
                try:
                    trio.from_thread.run_sync(self._stopped.set, trio_token=token)
                except trio.RunFinishedError:
                    pass

        async with send:
            threading.Thread(target=thread, name="condukt-chat-input", daemon=True).start()
            await self._stopped.wait()

    async def aclose(self) -> None:
        """End the input line (the terminal is restored); waits for its thread, 5 s at most."""
        self._closing = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._exit_app)
        with trio.move_on_after(5):
            await self._stopped.wait()


async def _read_signals(send: trio.MemorySendChannel[_Posted]) -> None:
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            await send.send(("sigint", ""))


async def chat_session(choice: AgentChoice, console: Console, *, prices: tuple[float, float] | None) -> int:
    """Talk to one agent started from ``choice`` until Ctrl-D, ``/exit`` or a second Ctrl-C.

    Runs go one at a time; while one runs, ``/steer TEXT`` is steered into
    it, Ctrl-C aborts it (its turns that completed stay in the
    conversation), and other lines wait their turn (so piped input runs
    line after line), each printed as ``you> TEXT`` when its run starts.
    Returns the exit status (0).
    """
    front: _EditorFront | _LineFront = _EditorFront(console) if _EditorFront.usable() else _LineFront(console)
    async with condukt.open_node() as node:
        agent = await node.spawn(choice.agent, **choice.options)
        console.print(Text(f"condukt chat · {choice.model_name} · /help for commands, Ctrl-D to leave", style="dim"))
        send, receive = trio.open_memory_channel[_Posted](16)
        running = False  # a run is in progress
        aborting = False
        armed = False  # a Ctrl-C was pressed at the prompt: the next one exits
        ended = False  # stdin ended: leave once what was typed before has run
        waiting: deque[str] = deque()  # lines typed during a run

        def queue_changed() -> None:
            front.queued = list(waiting)
            front.changed()

        async def one_run(text: str, done: trio.MemorySendChannel[_Posted]) -> None:
            nonlocal running, aborting
            async with done:
                try:
                    with front.make_renderer(prices) as renderer:
                        front.renderer = renderer
                        renderer.waiting("starting")
                        async with agent.stream(text, timeout=None) as events:
                            async for event in events:
                                renderer.handle(event)
                except condukt.ConduktError as exc:
                    front.say(f"error: {type(exc).__name__}: {exc}", "bold red")
                finally:
                    front.renderer = None
                running = False
                aborting = False
                await done.send(("done", ""))

        async def handle(line: str) -> bool:
            """Act on one line typed at the prompt; False to leave."""
            nonlocal running
            command, _, rest = line.strip().partition(" ")
            if not line.strip():
                return True
            front.echo(line.strip())
            if command in ("/exit", "/quit"):
                return False
            if command == "/help":
                front.say(HELP)
            elif command == "/steer":
                front.say("/steer TEXT works while a run is in progress", "yellow")
            elif command == "/clear":
                await agent.clear()
                front.say("conversation cleared")
            elif command == "/history":
                history = await agent.history()
                for message in history:
                    console.print(Text(_describe(message)), soft_wrap=True)
                if not history:
                    front.say("(empty)")
            elif command.startswith("/"):
                front.say(f"unknown command {command}; /help lists them", "yellow")
            else:
                running = True
                nursery.start_soon(one_run, line.strip(), send.clone())
            return True

        async def idle() -> bool:
            """Run the lines that waited, until one starts a run; prompt when none is left. False to leave."""
            while not running and waiting:
                line = waiting.popleft()
                queue_changed()
                if not await handle(line):
                    return False
            if not running:
                if ended:
                    return False
                front.prompt()
            return True

        async with trio.open_nursery() as nursery:
            nursery.start_soon(front.read, send.clone())
            nursery.start_soon(_read_signals, send.clone())
            front.prompt()
            async for kind, line in receive:
                if kind == "done":
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
                        queue_changed()
                        renderer = front.renderer
                        if renderer is not None:
                            renderer.waiting("aborting (Ctrl-C again exits)")
                        nursery.start_soon(agent.abort)
                    elif running or armed:
                        break
                    else:
                        armed = True
                        front.say("(Ctrl-C again or Ctrl-D exits)")
                        front.prompt()
                elif running:
                    command, _, rest = line.strip().partition(" ")
                    if command == "/steer" and rest.strip():
                        try:
                            await agent.steer(rest.strip())
                        except condukt.NotRunning:
                            waiting.append(rest.strip())  # the run just ended: it becomes the next prompt
                            queue_changed()
                        else:
                            renderer = front.renderer
                            steered = _header(f"/steer {rest.strip()}")
                            if renderer is not None:
                                renderer.after_text(steered)  # after the text in progress, not inside it
                            else:
                                console.print(steered, soft_wrap=True)
                    elif line.strip():
                        waiting.append(line.strip())
                        queue_changed()
                else:
                    armed = False
                    if not await handle(line) or not await idle():
                        break
            await front.aclose()
            nursery.cancel_scope.cancel()
    return 0
