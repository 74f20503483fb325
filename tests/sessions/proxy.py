"""A TCP proxy to PostgreSQL in a process of its own, which the test cuts (a network partition) and heals.

``python proxy.py TARGET_PORT``: prints the port it listens on, then reads
``cut`` (close every connection, refuse new ones) and ``heal`` lines from
stdin, answering each with ``ok``. In a process of its own because libpq's
blocking connect (psycopg's binary ``PGconn.connect``) holds the GIL: a
proxy in the test's process could not answer the connection it waits for.
"""

from __future__ import annotations

import sys

import trio


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.open = True
        self.streams: list[trio.SocketStream] = []

    async def handle(self, client: trio.SocketStream) -> None:
        if not self.open:
            await client.aclose()
            return
        try:
            server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        except OSError:
            await client.aclose()
            return
        self.streams += [client, server]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.pipe, client, server)
            nursery.start_soon(self.pipe, server, client)

    async def pipe(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        try:
            while data := await source.receive_some(65536):
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await source.aclose()
            await sink.aclose()

    async def commands(self) -> None:
        stdin = trio.wrap_file(sys.stdin)
        async for line in stdin:
            command = line.strip()
            if command == "cut":
                self.open = False
                streams, self.streams = self.streams, []
                for stream in streams:
                    await stream.aclose()
            elif command == "heal":
                self.open = True
            print("ok", flush=True)


async def main(target_port: str) -> None:
    proxy = Proxy(int(target_port))
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, proxy.handle, listeners)
        await proxy.commands()
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
