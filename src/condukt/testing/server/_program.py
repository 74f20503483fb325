"""The protocol server as a program: ``python -m condukt.testing.server`` and ``condukt test-server``.

    python -m condukt.testing.server --port 8900 --script answers.jsonl

Its first line on stdout is the base URL (``http://127.0.0.1:PORT``);
unless ``--quiet``, lines on stderr say which protocols it speaks and the
``--model`` and ``--base-url`` that reach each. It serves until Ctrl-C or ``SIGTERM``,
and, when its standard input is a pipe, until that pipe closes (a parent
process that started it with ``stdin=PIPE`` stops it by closing it).
Without ``--script`` it answers every request ``"done"``, calling the
client's ``noop`` tool first when the client declares one (the
benchmarks' workload). See ``docs/testing.md``.
"""

from __future__ import annotations

import argparse
import errno
import itertools
import os
import signal
import stat
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

import trio

from ._protocol import PROTOCOLS, RecordedRequest
from ._script import ScriptError, load_script
from ._server import ProtocolServer, tool_then_answer
from ._steps import Status, Step

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, as the ``condukt`` commands say it, and status 2."""
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        description="A local HTTP server speaking the model providers' wire formats (condukt.testing.server). "
        "Prints its base URL first, then serves until Ctrl-C.",
        epilog='Script lines: {"reply": "text"}, {"call": "tool", "arguments": {...}}, '
        '{"calls": [{"call": ..., "arguments": ...}, ...]}, {"error": 429, "retry_after": 1}, '
        '{"disconnect": true}, {"malformed": true}; "thinking", "usage": [in, out], "chunk", '
        '"interval" (seconds between streamed deltas) and "delay" (seconds before the answer) go with them. '
        "See docs/testing.md.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="the port (default: 0, any free port)")
    parser.add_argument(
        "--protocol",
        action="append",
        choices=list(PROTOCOLS),
        metavar="NAME",
        help=f"answer only this protocol, 404 for the others (repeatable; default: all of {', '.join(PROTOCOLS)})",
    )
    parser.add_argument(
        "--script", metavar="FILE", help="JSON lines, one response each, answered in order (default: 'done')"
    )
    parser.add_argument("--loop", action="store_true", help="start the script over when it ends")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added before every answer (default: 0)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print the base URL only (no protocol list)")
    return parser


def _responder(steps: list[Step], loop: bool, source: str) -> Callable[[RecordedRequest], Step]:
    if loop:
        cycle = itertools.cycle(steps)
        return lambda request: next(cycle)
    ended = Status(
        400,
        f"the test server's script {source} ended: its {len(steps)} response(s) were used (--loop repeats it)",
        "invalid_request_error",
    )
    return lambda request: ended


def _hint(server: ProtocolServer) -> str:
    names = sorted(server.protocols) if server.protocols is not None else list(PROTOCOLS)
    lines = [f"condukt test server at {server.url} (Ctrl-C stops); its protocols, as condukt's providers reach them:"]
    for name in names:
        wire = PROTOCOLS[name]
        lines.append(f"  {name:<17} --model {wire.provider}:MODEL --base-url {server.url}{wire.base_path}")
    return "\n".join(lines)


def _stdin_is_a_pipe() -> bool:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _unwrapped(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _read_to_the_end() -> None:
    while os.read(sys.stdin.fileno(), 65536):
        pass


async def _serve(server: ProtocolServer, quiet: bool) -> str | None:
    """Serve until stopped: ``None``; or why it could not listen."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(server.run)
            except (OSError, BaseExceptionGroup) as exc:
                error = _unwrapped(exc)
                if not isinstance(error, OSError):
                    raise
                where = f"{server.host}:{server.port}"
                if error.errno == errno.EADDRINUSE:
                    return f"cannot listen on {where}: the address is in use (--port 0 picks a free port)"
                return f"cannot listen on {where}: {error.strerror or error}"
            print(server.url, flush=True)
            if not quiet:
                print(_hint(server), file=sys.stderr, flush=True)
            if _stdin_is_a_pipe():
                # A parent that started us with stdin=PIPE stops us by closing it (or by dying).
                async def until_stdin_closes() -> None:
                    await trio.to_thread.run_sync(_read_to_the_end, abandon_on_cancel=True)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(until_stdin_closes)
            async for _ in signals:
                break
            nursery.cancel_scope.cancel()
    return None


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m condukt.testing.server") -> int:
    """The program: serve as ``argv`` says (default: ``sys.argv[1:]``) until stopped; returns the exit status.

    0 once stopped by Ctrl-C, ``SIGTERM`` or the end of a piped stdin; 2
    for a bad argument or script (one line on stderr); 1 when it cannot
    listen (the port is taken). ``prog`` is the name its help and errors
    give it. Synchronous: it runs its own trio loop, so call it outside
    one; ``--help`` raises ``SystemExit(0)`` after printing.
    """
    args = _parser(prog).parse_args(argv)
    try:
        server = ProtocolServer(
            latency=args.latency, responder=tool_then_answer, host=args.host, port=args.port, protocols=args.protocol
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.script is not None:
        try:
            steps = load_script(args.script)
        except ScriptError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"error: cannot read the script {args.script}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        if not steps:
            print(f"error: the script {args.script} has no response", file=sys.stderr)
            return 2
        server.responder = _responder(steps, args.loop, args.script)
        if not args.loop:
            server.add(*steps)
    server.record = False
    error = trio.run(_serve, server, args.quiet)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
