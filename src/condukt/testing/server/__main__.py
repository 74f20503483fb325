"""``python -m condukt.testing.server --latency 0.05``: serve until stdin closes; prints the port first."""

from __future__ import annotations

import argparse
import sys

import trio

from ._server import ProtocolServer, tool_then_answer

__all__ = ["main"]


async def _serve_forever(latency: float) -> None:
    server = ProtocolServer(latency=latency, responder=tool_then_answer)
    server.record = False
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        print(server.port, flush=True)
        # Exit when the parent closes our stdin (or dies).
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()


def main() -> None:
    """Serve until stdin closes; prints the port first."""
    parser = argparse.ArgumentParser(description="A local server speaking the providers' wire formats.")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    args = parser.parse_args()
    trio.run(_serve_forever, args.latency)


if __name__ == "__main__":
    main()
