"""The protocol server's HTTP/1.1 (condukt.testing.server, on httptools): what a client of it relies on.

Requests are read whole whatever their framing (``Content-Length`` or
chunked, split anywhere, several in one write), connections are kept alive
unless the client asks to close, streamed answers are chunked, and the
server's ``latency`` delays every answer, also when requests overlap.
"""

from __future__ import annotations

import json

import trio

from condukt.testing.server import ProtocolServer, Reply, Status

_BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'


def _request(body: bytes = _BODY, *, headers: bytes = b"", chunked: bool = False) -> bytes:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + headers
    if chunked:
        half = len(body) // 2
        return head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (
            half,
            body[:half],
            len(body) - half,
            body[half:],
        )
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


async def _read_response(stream: trio.SocketStream, buffer: bytearray) -> tuple[bytes, bytes]:
    """One response off ``stream``: its head and its body (de-chunked)."""
    while b"\r\n\r\n" not in buffer:
        buffer += await stream.receive_some(65536)
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    del buffer[:end]
    body = b""
    if b"transfer-encoding: chunked" in head.lower():
        while True:
            while b"\r\n" not in buffer:
                buffer += await stream.receive_some(65536)
            line = buffer.index(b"\r\n")
            size = int(buffer[:line], 16)
            while len(buffer) < line + 2 + size + 2:
                buffer += await stream.receive_some(65536)
            body += bytes(buffer[line + 2 : line + 2 + size])
            del buffer[: line + 2 + size + 2]
            if size == 0:
                return head, body
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(buffer) < length:
        buffer += await stream.receive_some(65536)
    body = bytes(buffer[:length])
    del buffer[:length]
    return head, body


async def test_requests_split_anywhere_pipelined_or_chunked_are_each_answered_on_one_connection(
    server: ProtocolServer,
) -> None:
    server.add(Reply("one"), Reply("two"), Reply("three"), Status(429, "slow down"))
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    data = _request() + _request(chunked=True)
    for i in range(0, len(data), 7):  # in pieces that cut the head, the body and the chunk sizes
        await stream.send_all(data[i : i + 7])
    await stream.send_all(_request() + _request())  # two in one write
    buffer = bytearray()
    answers = []
    for _ in range(4):
        head, body = await _read_response(stream, buffer)
        answers.append((head.split(b"\r\n")[0], json.loads(body)))
    assert [line for line, _ in answers] == [b"HTTP/1.1 200 OK"] * 3 + [b"HTTP/1.1 429 Too Many Requests"]
    assert [body["choices"][0]["message"]["content"] for _, body in answers[:3]] == ["one", "two", "three"]
    assert answers[3][1]["error"]["message"] == "slow down"
    assert server.connections == 1
    assert [request.body for request in server.requests] == [json.loads(_BODY)] * 4
    await stream.aclose()


async def test_connection_close_is_honoured_and_streams_are_chunked(server: ProtocolServer) -> None:
    server.add(Reply("streamed text", chunk=4))
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    body = _BODY[:-1] + b',"stream":true}'
    await stream.send_all(_request(body, headers=b"Connection: close\r\n"))
    head, sse = await _read_response(stream, bytearray())
    assert b"transfer-encoding: chunked" in head.lower() and b"connection: close" in head.lower()
    assert b"text/event-stream" in head
    deltas = [json.loads(line[6:])["choices"] for line in sse.split(b"\n\n") if line.startswith(b"data: {")]
    text = "".join(c[0]["delta"].get("content") or "" for c in deltas if c)
    assert text == "streamed text"
    assert sse.endswith(b"data: [DONE]\n\n")
    assert await stream.receive_some(10) == b""  # the server closed its side
    await stream.aclose()


async def test_latency_delays_every_answer_also_when_requests_overlap(autojump_clock: trio.abc.Clock) -> None:
    server = ProtocolServer(latency=0.5)
    times: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)

        async def ask(delay: float) -> None:
            await trio.sleep(delay)
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            start = trio.current_time()
            await stream.send_all(_request())
            await _read_response(stream, bytearray())
            times.append(round(trio.current_time() - start, 3))
            await stream.aclose()

        async with trio.open_nursery() as clients:
            for delay in (0.0, 0.1, 0.1, 0.3):
                clients.start_soon(ask, delay)
        # A shorter latency set later does not wait for the longer sleeps before it.
        server.latency = 1.0
        async with trio.open_nursery() as clients:
            clients.start_soon(ask, 0.0)
            await trio.sleep(0.1)
            server.latency = 0.2
            clients.start_soon(ask, 0.0)
        nursery.cancel_scope.cancel()
    assert times == [0.5, 0.5, 0.5, 0.5, 0.2, 1.0]
