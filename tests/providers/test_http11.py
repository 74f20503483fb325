"""The HTTP/1.1 codec of the trio transport."""

from __future__ import annotations

import pytest

from condukt.providers._http.http11 import ProtocolError, ResponseReader, encode_request


def read_all(reader: ResponseReader, data: bytes, step: int) -> tuple[int, bytes]:
    head = None
    body = b""
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
        if head is None:
            head = reader.head()
            if head is None:
                continue
        body += reader.body()
    assert head is not None and reader.done
    return head.status_code, body


CHUNKED = (
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: text/event-stream\r\n\r\n"
    b"5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\n"
)


@pytest.mark.parametrize("step", [1, 2, 5, 1000])
def test_chunked_bodies_at_any_split(step: int) -> None:
    reader = ResponseReader()
    assert read_all(reader, CHUNKED, step) == (200, b"hello 0123456789")
    assert reader.next_response()


@pytest.mark.parametrize("step", [1, 3, 1000])
def test_content_length_bodies(step: int) -> None:
    data = b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nbody"
    reader = ResponseReader()
    assert read_all(reader, data, step) == (201, b"body")
    assert reader.keep_alive


def test_interim_responses_are_skipped_and_headers_kept() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many\r\nRetry-After: 1\r\ncontent-length: 0\r\n\r\n")
    head = reader.head()
    assert head is not None and head.status_code == 429 and head.reason == b"Too Many"
    assert head.headers == [(b"Retry-After", b"1"), (b"content-length", b"0")]
    assert reader.done


def test_close_delimited_bodies_end_at_eof() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.0 200 OK\r\n\r\nsome")
    assert reader.head() is not None
    assert reader.body() == b"some"
    reader.eof()
    assert reader.done and not reader.next_response()


def test_connection_close_is_not_reused() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert reader.head() is not None and reader.done
    assert not reader.next_response()


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded: header\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
    ],
)
def test_malformed_heads_are_protocol_errors(data: bytes) -> None:
    reader = ResponseReader()
    reader.feed(data)
    with pytest.raises(ProtocolError):
        reader.head()
        reader.body()


@pytest.mark.parametrize("chunk", [b"zz\r\n", b"1_0\r\n", b"5\r\nhelloXX"])
def test_bad_chunks_are_protocol_errors(chunk: bytes) -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk)
    assert reader.head() is not None
    with pytest.raises(ProtocolError):
        # The body bytes before the fault come first, then the error.
        reader.body()
        reader.body()


def test_eof_mid_body_or_before_a_response() -> None:
    reader = ResponseReader()
    with pytest.raises(ProtocolError, match="without sending a response"):
        reader.eof()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    assert reader.head() is not None and reader.body() == b"abc"
    with pytest.raises(ProtocolError, match="before the response was complete"):
        reader.eof()


def test_oversized_heads_are_refused() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\n" + b"x-big: " + b"a" * 70000)
    with pytest.raises(ProtocolError, match="too large"):
        reader.head()


def test_requests_refuse_header_injection() -> None:
    assert encode_request(b"POST", b"/v1/messages", [(b"x-api-key", b"k")], b"{}") == (
        b"POST /v1/messages HTTP/1.1\r\nx-api-key: k\r\n\r\n{}"
    )
    with pytest.raises(ProtocolError):
        encode_request(b"POST", b"/", [(b"x-api-key", b"k\r\nevil: 1")], b"")
    with pytest.raises(ProtocolError):
        encode_request(b"POST", b"/", [(b"bad name", b"v")], b"")


@pytest.mark.parametrize("step", [1, 7, 1000])
def test_obs_fold_is_unfolded_and_any_http_1x_is_read(step: int) -> None:
    data = b"HTTP/1.2 200 OK\r\nX-Folded: a\r\n  b\r\nContent-Length: 2\r\n\r\nok"
    reader = ResponseReader()
    body = b""
    head = None
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
        head = head or reader.head()
        if head is not None:
            body += reader.body()
    assert head is not None and head.headers[0] == (b"X-Folded", b"a b") and body == b"ok"


@pytest.mark.parametrize(
    "partial",
    [b"HTTP/1.1 200 OK\nContent-Length: 2\n", b"HTTP/1.1 200 OK\rX: 1", b"<html>"],
)
def test_a_head_that_cannot_end_fails_before_it_is_complete(partial: bytes) -> None:
    reader = ResponseReader()
    reader.feed(partial)
    with pytest.raises(ProtocolError):
        reader.head()


def test_transfer_codings_other_than_chunked_are_refused() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
    with pytest.raises(ProtocolError, match="only chunked"):
        reader.head()


def test_trailers_are_bounded_across_reads() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Huge: ")
    assert reader.head() is not None and reader.body() == b"ok"
    with pytest.raises(ProtocolError, match="trailers too large"):
        for _ in range(100):
            reader.feed(b"a" * 4096)
            assert reader.body() == b""


def test_a_head_response_leaves_the_connection_reusable() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    head = reader.head(head_request=True)
    assert head is not None and reader.done and reader.body() == b""
    assert reader.next_response()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert reader.head() is not None and reader.body() == b"ok" and reader.done


def test_bytes_after_a_response_make_the_connection_unusable() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n")
    assert reader.head() is not None and reader.body() == b"ok" and reader.done
    assert not reader.next_response()
