"""Rendering a run's events in the terminal with rich, or as JSON lines."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.panel import Panel
from rich.spinner import Spinner
from rich.text import Text

from .. import events as ev
from ..agent import UsageLimits

__all__ = ["JsonPrinter", "Renderer"]

#: Lines of a tool result shown in its panel; the rest is summarised.
RESULT_LINES = 8
#: Characters of a tool call's arguments shown in its panel.
ARGUMENT_CHARS = 200


def _arguments(arguments: Any) -> str:
    """A tool call's arguments in one short line: the value alone when there is one."""
    if isinstance(arguments, dict) and len(arguments) == 1:
        (value,) = arguments.values()
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    else:
        text = json.dumps(arguments, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= ARGUMENT_CHARS else text[: ARGUMENT_CHARS - 1] + "…"


def _result(result: str) -> str:
    lines = result.rstrip().splitlines() or ["(no output)"]
    if len(lines) > RESULT_LINES:
        lines = [*lines[:RESULT_LINES], f"… {len(lines) - RESULT_LINES} more lines"]
    return "\n".join(lines)


class Renderer:
    """Shows the events of runs on a rich console, as they come.

    The text of the turn in progress (as markdown on a terminal, as plain
    text elsewhere, so piped output stays verbatim), its thinking dimmed,
    and a spinner while the model or a tool is working are shown live;
    completed pieces are printed for good. Tool calls and their results are
    compact panels; the end of a run prints its token usage, and its cost
    at ``prices`` (dollars per million input and output tokens) when given,
    else the cost the provider's price table put in the usage, when known.
    Run errors are shown unless ``errors=False``; an aborted or timed-out
    run is reported once, by one line.
    Use it as a context manager around one or more runs; feed it with
    :meth:`handle`.

    ``live=False`` leaves the live part (text in progress, spinner) to
    the caller, who draws :meth:`live_view` where it fits (``condukt chat``
    draws it above its input line); only finished pieces are printed then.
    """

    def __init__(
        self,
        console: Console,
        *,
        prices: tuple[float, float] | None = None,
        errors: bool = True,
        live: bool = True,
    ) -> None:
        self.console = console
        self.prices = prices
        #: Whether :class:`~condukt.events.Error` events are shown (``condukt run`` puts them on stderr).
        self.errors = errors
        self._text = ""
        self._thinking = ""
        self._status: str | None = None
        #: A structured result as far as the model has written it (PartialOutput), shown live.
        self._partial: Any = None
        self._error: ev.Error | None = None
        self._later: list[RenderableType] = []
        self._spinner = Spinner("dots")
        self._live = (
            Live(console=console, transient=True, refresh_per_second=12, get_renderable=self._renderable)
            if live
            else None
        )

    def __enter__(self) -> Renderer:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.flush()
        self._status = None
        if self._live is not None:
            self._live.stop()

    def live_view(self) -> RenderableType | None:
        """What is in progress (thinking, text, the spinner and its status), or ``None`` when nothing is."""
        if not (self._thinking or self._text or self._status is not None or self._partial is not None):
            return None
        return self._renderable()

    def _markup(self, text: str) -> RenderableType:
        return Markdown(text) if self.console.is_terminal else Text(text)

    def _renderable(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self._thinking:
            parts.append(Text(self._thinking, style="dim italic"))
        if self._text:
            parts.append(self._markup(self._text))
        if self._partial is not None:
            parts.append(Text(json.dumps(self._partial, ensure_ascii=False, indent=2), style="cyan"))
        if self._status is not None:
            # One spinner for the renderer's life: it animates from when it was
            # made, so a new one per redraw would stay on its first frame.
            self._spinner.update(text=Text(self._status, style="dim"))
            parts.append(self._spinner)
        return Group(*parts)

    def waiting(self, status: str | None) -> None:
        """Show ``status`` with a spinner (``None`` hides it)."""
        self._status = status

    def flush(self) -> None:
        """Print the thinking and text received so far for good, then what :meth:`after_text` held back."""
        if self._thinking:
            self.console.print(Text(self._thinking.strip(), style="dim italic"))
            self._thinking = ""
        if self._text:
            self.console.print(self._markup(self._text.strip()))
            self._text = ""
        later, self._later = self._later, []
        for renderable in later:
            self.console.print(renderable, soft_wrap=True)

    def after_text(self, renderable: RenderableType) -> None:
        """Print ``renderable`` now if no text is in progress, else once that text is printed (no line cut in two)."""
        self._later.append(renderable)
        if not (self._thinking or self._text):
            self.flush()

    def note(self, text: str, style: str = "dim") -> None:
        """Print a line outside the stream (a command's answer, a hint)."""
        self.flush()
        self.console.print(Text(text, style=style), soft_wrap=True)

    def handle(self, event: ev.Event) -> None:
        """Render one event."""
        kind = type(event)
        if kind is ev.TextDelta:
            assert isinstance(event, ev.TextDelta)
            if self._thinking:
                self.console.print(Text(self._thinking.strip(), style="dim italic"))
                self._thinking = ""
            self._text += event.text
            self._status = None
        elif kind is ev.ThinkingDelta:
            assert isinstance(event, ev.ThinkingDelta)
            self._thinking += event.text
            self._status = "thinking"
        elif kind is ev.PartialOutput:
            assert isinstance(event, ev.PartialOutput)
            self._partial = event.value  # redrawn live; the final result replaces it
            self._status = "writing the result"
        elif kind is ev.Summarized:
            assert isinstance(event, ev.Summarized)
            how = "summary prepared ahead" if event.ahead else "summary"
            self.note(
                f"{how}: {event.covered} earlier messages summarised, about "
                f"{event.tokens_before} → {event.tokens_after} tokens"
            )
        elif kind is ev.CompactionFallback:
            assert isinstance(event, ev.CompactionFallback)
            dropped = ", older messages left out" if event.dropped else ""
            self.note(f"summariser failed ({event.reason}); compacted with {event.compactor}{dropped}", "yellow")
        elif kind is ev.TurnStart:
            self._status = "waiting for the model"
        elif kind is ev.ToolCallStart:
            assert isinstance(event, ev.ToolCallStart)
            self.flush()
            self.console.print(
                Panel(
                    Text(_arguments(event.arguments)),
                    title=f"[bold cyan]{event.name}[/]",
                    title_align="left",
                    border_style="cyan",
                    expand=False,
                )
            )
            self._status = f"running {event.name}"
        elif kind is ev.ToolCallEnd:
            assert isinstance(event, ev.ToolCallEnd)
            style = "red" if event.is_error else "green"
            label = "failed" if event.is_error else "done"
            self._status = "waiting for the model"
            self.console.print(
                Panel(
                    Text(_result(event.result), style="dim"),
                    title=f"[{style}]{event.name} {label}[/] [dim]{event.duration:.2f}s[/]",
                    title_align="left",
                    border_style=style,
                    expand=False,
                )
            )
        elif kind is ev.TurnEnd:
            self._status = None
            self._partial = None
            self.flush()
        elif kind is ev.Retry:
            assert isinstance(event, ev.Retry)
            self.note(f"{event.provider}: {event.reason}; retry {event.attempt} in {event.delay:.1f}s", "yellow")
        elif kind is ev.MaxTurnsReached:
            assert isinstance(event, ev.MaxTurnsReached)
            self.note(f"stopped after max_turns={event.max_turns} model requests", "yellow")
        elif kind is ev.AgentEnd:
            assert isinstance(event, ev.AgentEnd)
            self.flush()
            self._status = None
            self.console.print(Text(self.usage_line(event), style="dim"))
        elif kind is ev.Error:
            assert isinstance(event, ev.Error)
            self.flush()
            self._status = None
            self._error = event  # shown with the Done that follows, which says whether it was an abort
        elif kind is ev.Done:
            assert isinstance(event, ev.Done)
            self.flush()
            self._status = None
            error, self._error = self._error, None
            if not self.errors:
                pass  # the caller reports how the run ended (condukt run: one line on stderr)
            elif event.status == "aborted":
                self.console.print(Text("run aborted", style="yellow"))
            elif event.status == "timeout":
                detail = f": {error.message}" if error is not None and error.message else ""
                self.console.print(Text(f"run timed out{detail}", style="yellow"), soft_wrap=True)
            elif error is not None:
                line = Text(f"error: {error.error_type}: {error.message}", style="bold red")
                self.console.print(line, soft_wrap=True)
        elif kind is ev.SubagentEvent:
            assert isinstance(event, ev.SubagentEvent)
            self._subagent(event)

    def _subagent(self, event: ev.SubagentEvent) -> None:
        inner = event.event
        prefix = f"[{event.role}] "
        if isinstance(inner, ev.ToolCallStart):
            self.note(f"{prefix}{inner.name}: {_arguments(inner.arguments)}")
        elif isinstance(inner, ev.AgentEnd):
            first = inner.text.strip().splitlines()[0] if inner.text.strip() else ""
            self.note(f"{prefix}done: {first}")
        elif isinstance(inner, ev.Error):
            self.note(f"{prefix}error: {inner.error_type}: {inner.message}", "red")
        elif isinstance(inner, ev.SubagentEvent):
            self._subagent(ev.SubagentEvent(f"{event.role}/{inner.role}", inner.agent_id, inner.event))

    def usage_line(self, end: ev.AgentEnd) -> str:
        """``"2 turns · 30 input + 8 output tokens · $0.0001"`` (the cost only when known)."""
        usage = end.usage
        turns = f"{end.turns} turn{'s' if end.turns != 1 else ''}"
        line = f"{turns} · {usage.input_tokens} input + {usage.output_tokens} output tokens"
        if usage.cache_read_tokens:
            line += f" ({usage.cache_read_tokens} cached)"
        if self.prices is not None:
            line += f" · ${UsageLimits(prices=self.prices).cost(usage):.4f}"
        elif usage.cost is not None:
            line += f" · ${usage.cost:.4f}"
        return line


class JsonPrinter:
    """Writes each event as one line of compact JSON (:func:`condukt.events.to_json`), flushed at once."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def handle(self, event: ev.Event) -> None:
        """Write one event."""
        self.out.write(json.dumps(ev.to_json(event), ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()
