"""The hook API: attach/detach, attached, enabled, emit, and handlers that raise."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from condukt import telemetry
from condukt.telemetry import TelemetryEvent

START = ("condukt", "run", "start")


def test_attach_receives_events_until_detached() -> None:
    seen: list[TelemetryEvent] = []
    detach = telemetry.attach(seen.append)
    try:
        telemetry.emit(START, {}, {"run_id": "r1"})
        telemetry.emit(("condukt", "run", "stop"), {"duration": 0.5}, {"run_id": "r1"})
    finally:
        detach()
    telemetry.emit(START, {}, {"run_id": "r2"})

    assert [e.name for e in seen] == [START, ("condukt", "run", "stop")]
    assert seen[1].measurements == {"duration": 0.5}
    assert seen[1].metadata == {"run_id": "r1"}


def test_detach_is_idempotent_and_removes_only_its_attachment() -> None:
    seen: list[str] = []

    def handler(event: TelemetryEvent) -> None:
        seen.append(event.metadata["n"])

    first = telemetry.attach(handler)
    second = telemetry.attach(handler)
    telemetry.emit(START, {}, {"n": "both"})
    first()
    first()
    telemetry.emit(START, {}, {"n": "one"})
    second()
    telemetry.emit(START, {}, {"n": "none"})

    assert seen == ["both", "both", "one"]


def test_attached_detaches_on_exit_even_after_an_error() -> None:
    seen: list[TelemetryEvent] = []
    with pytest.raises(RuntimeError), telemetry.attached(seen.append) as handler:
        assert handler == seen.append
        assert telemetry.enabled()
        telemetry.emit(START, {}, {})
        raise RuntimeError("body failed")
    telemetry.emit(START, {}, {})
    assert len(seen) == 1


def test_enabled_tracks_attachments() -> None:
    assert not telemetry.enabled()
    with telemetry.attached(lambda event: None):
        assert telemetry.enabled()
    assert not telemetry.enabled()


def test_attach_rejects_a_non_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        telemetry.attach("not a handler")  # type: ignore[arg-type]


class Untouchable(Mapping[str, Any]):
    """A mapping that fails the test if anybody reads it."""

    def __getitem__(self, key: str) -> Any:
        raise AssertionError("read")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("read")

    def __len__(self) -> int:
        raise AssertionError("read")


def test_emit_without_handlers_reads_nothing() -> None:
    assert not telemetry.enabled()
    telemetry.emit(START, Untouchable(), Untouchable())


def test_handlers_get_a_read_only_snapshot() -> None:
    seen: list[TelemetryEvent] = []
    metadata = {"run_id": "r1"}
    with telemetry.attached(seen.append):
        telemetry.emit(START, {}, metadata)
    metadata["run_id"] = "changed"

    assert seen[0].metadata == {"run_id": "r1"}
    with pytest.raises(TypeError):
        seen[0].metadata["run_id"] = "x"  # type: ignore[index]


def test_a_raising_handler_is_logged_and_detached(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[TelemetryEvent] = []
    good: list[TelemetryEvent] = []

    def broken(event: TelemetryEvent) -> None:
        calls.append(event)
        raise ValueError("handler bug")

    with telemetry.attached(broken), telemetry.attached(good.append):
        with caplog.at_level(logging.ERROR, logger="condukt.telemetry"):
            telemetry.emit(START, {}, {"run_id": "r1"})  # does not raise
        telemetry.emit(START, {}, {"run_id": "r2"})

    assert len(calls) == 1, "the broken handler is detached after its first failure"
    assert [e.metadata["run_id"] for e in good] == ["r1", "r2"], "other handlers are unaffected"
    [record] = [r for r in caplog.records if r.name == "condukt.telemetry"]
    assert record.levelno == logging.ERROR
    assert "condukt.run.start" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], ValueError)


def test_base_exceptions_from_a_handler_propagate() -> None:
    def interrupt(event: TelemetryEvent) -> None:
        raise KeyboardInterrupt

    with telemetry.attached(interrupt), pytest.raises(KeyboardInterrupt):
        telemetry.emit(START, {}, {})


def test_attach_and_detach_from_many_threads() -> None:
    received = 0
    lock = threading.Lock()

    def count(event: TelemetryEvent) -> None:
        nonlocal received
        with lock:
            received += 1

    def churn() -> None:
        for _ in range(200):
            detach = telemetry.attach(count)
            telemetry.emit(START, {}, {})
            detach()

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not telemetry.enabled()
    # Each emit reaches at least the attachment its own thread holds.
    assert received >= 8 * 200
