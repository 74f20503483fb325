"""How the command line ends: one line on stderr per error, and the documented exit status.

0: done; 1: the command failed (a failed run, a port in use, an import
error...); 2: a bad or missing argument; 130: Ctrl-C. ``--debug`` shows
the traceback instead of the one line.
"""

from __future__ import annotations

import errno
import logging
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import typer

from condukt.providers import MissingApiKey

__all__ = [
    "CommandError", "UsageError", "configure_logging", "error_line", "execute", "leaves", "listen_error",
    "start_listening",
]  # fmt: skip


class CommandError(Exception):
    """The command cannot do what was asked: its message alone, one line, exit status 1."""

    status = 1


class UsageError(CommandError):
    """A mistake on the command line: its message alone, one line, exit status 2."""

    status = 2


class _State:
    debug = False


def set_debug(debug: bool) -> None:
    """``--debug``: show tracebacks instead of one-line errors."""
    _State.debug = debug
    configure_logging(debug)


class _OneLine(logging.Handler):
    """condukt's log records on stderr, one line each (a crash report's exception as ``Type: message``).

    Written to ``sys.stderr`` as it is at each record, so ``condukt chat``'s
    input line, which reroutes stderr above itself, is not written over.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
            info = record.exc_info
            if info and info[1] is not None:
                text += f": {type(info[1]).__name__}: {' '.join(str(info[1]).split())}"
            print(f"{record.levelname.lower()} ({record.name}): {text}", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


_HANDLER: logging.Handler | None = None


def configure_logging(debug: bool) -> None:
    """condukt's warnings and errors on stderr: one line each, or with their tracebacks under ``--debug``."""
    global _HANDLER
    logger = logging.getLogger("condukt")
    if _HANDLER is not None:
        logger.removeHandler(_HANDLER)
    if debug:
        _HANDLER = logging.StreamHandler()  # the default format: message, then the traceback
        _HANDLER.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    else:
        _HANDLER = _OneLine()
    _HANDLER.setLevel(logging.WARNING)
    logger.addHandler(_HANDLER)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``'s (nested) exception groups, in order; ``[exc]`` for a plain one."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def error_line(exc: BaseException) -> str:
    """``"error: MissingApiKey: openai: no API key: ..."``: one line, whatever the exception."""
    found = [leaf for leaf in leaves(exc) if not isinstance(leaf, (trio.Cancelled, KeyboardInterrupt))]
    exc = found[0] if found else exc
    message = " ".join(str(exc).split()) or repr(exc)
    if isinstance(exc, CommandError):
        return f"error: {message}"
    if isinstance(exc, MissingApiKey):  # the library's advice, in the command line's words
        message = message.replace("pass api_key=... when starting the agent", "pass --api-key")
    return f"error: {type(exc).__name__}: {message}"


def listen_error(exc: BaseException, host: str, port: int) -> CommandError | None:
    """A :class:`CommandError` saying why listening on ``host:port`` failed, if ``exc`` is that ``OSError``."""
    errors = [leaf for leaf in leaves(exc) if isinstance(leaf, OSError)]
    if not errors:
        return None
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    error = errors[0]
    if error.errno == errno.EADDRINUSE:
        return CommandError(f"cannot listen on {where}: the address is in use (--port 0 picks a free port)")
    if error.errno == errno.EACCES:
        return CommandError(f"cannot listen on {where}: permission denied (ports below 1024 need privileges)")
    if error.errno == errno.EADDRNOTAVAIL:
        return CommandError(f"cannot listen on {where}: no such address on this machine")
    return CommandError(f"cannot listen on {where}: {error.strerror or error}")


async def start_listening(nursery: trio.Nursery, start: Callable[..., Awaitable[Any]], host: str, port: int) -> Any:
    """``await nursery.start(start)`` for a server on ``host:port``; failing to listen raises one :class:`CommandError`.

    Cancellation: as ``nursery.start``.
    """
    try:
        return await nursery.start(start)
    except BaseException as exc:
        error = listen_error(exc, host, port)
        if error is None:
            raise
        raise error from None


def execute(main: Callable[[], Awaitable[int]]) -> None:
    """Run ``main`` under trio and exit with its status.

    An error ends the command with one line on stderr and its status (1,
    2 for a :class:`UsageError`; ``--debug`` shows the traceback instead),
    whatever exception groups the nurseries wrapped it in; Ctrl-C ends it
    with ``interrupted`` and status 130.
    """
    try:
        status = trio.run(main)
    except (typer.Exit, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - every error becomes one line
        found = [leaf for leaf in leaves(exc) if not isinstance(leaf, (trio.Cancelled, KeyboardInterrupt))]
        if not found:
            print("interrupted", file=sys.stderr)
            raise typer.Exit(130) from None
        if _State.debug:
            traceback.print_exception(exc)
        else:
            print(error_line(exc), file=sys.stderr)
        first = found[0]
        raise typer.Exit(first.status if isinstance(first, CommandError) else 1) from None
    raise typer.Exit(status)
