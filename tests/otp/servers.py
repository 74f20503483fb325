"""Servers and helpers shared by the runtime tests.

``Worker`` records its life (``init``, ``terminate``) in a list passed as its
first argument, so a test can assert which processes started and stopped, in
which order and with which reason. Requests are small tuples, matched below.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

import condukt

Log = list[tuple[Any, ...]]


class Boom(Exception):
    """The exception tests make servers raise."""


async def settle() -> None:
    """Let every runnable task run until all are blocked (restarts done, messages handled)."""
    await trio.testing.wait_all_tasks_blocked()


class Worker(condukt.Server):
    """A server that logs ``("init", tag)`` and ``("terminate", tag, reason)``.

    Calls and casts (both accept the same requests):

    * ``"ping"`` -> ``("pong", tag)``
    * ``("crash", exc)`` raises ``exc`` in the callback
    * ``("stop", reason)`` -> ``self.stop(reason)`` from inside
    * ``("sleep", seconds)`` sleeps in the callback, then returns ``"slept"``
    * ``("wait", event)`` blocks the mailbox until ``event`` is set
    * ``("record", value)`` appends ``("got", tag, value)`` to the log
    """

    async def init(
        self,
        log: Log | None = None,
        tag: Any = "w",
        *,
        fail: BaseException | None = None,
        hang_terminate: bool = False,
    ) -> None:
        self.log: Log = [] if log is None else log
        self.tag = tag
        self.hang_terminate = hang_terminate
        if fail is not None:
            self.log.append(("init-failed", tag))
            raise fail
        self.log.append(("init", tag))

    async def _do(self, request: Any) -> Any:
        match request:
            case "ping":
                return ("pong", self.tag)
            case ("crash", exc):
                raise exc
            case ("stop", reason):
                self.stop(reason)
                return "stopping"
            case ("sleep", seconds):
                await trio.sleep(seconds)
                return "slept"
            case ("wait", event):
                await event.wait()
                return "waited"
            case ("record", value):
                self.log.append(("got", self.tag, value))
                return value
        raise AssertionError(f"unexpected request {request!r}")

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return await self._do(request)

    async def handle_cast(self, message: Any) -> None:
        await self._do(message)

    async def handle_info(self, message: Any) -> None:
        self.log.append(("info", self.tag, message))

    async def terminate(self, reason: condukt.ExitReason) -> None:
        self.log.append(("terminate", self.tag, reason))
        if self.hang_terminate:
            await trio.sleep_forever()


def events(log: Log, kind: str) -> list[tuple[Any, ...]]:
    """The entries of ``log`` of one kind, without the kind."""
    return [entry[1:] for entry in log if entry[0] == kind]


def spec(
    child_id: Any,
    log: Log,
    *,
    tag: Any = None,
    name: Any = None,
    restart: condukt.otp.RestartType = "permanent",
    shutdown: Any = None,
    **kwargs: Any,
) -> condukt.ChildSpec:
    """A ``Worker`` child spec; ``tag`` and ``name`` default to the id (``None``: unnamed).

    Extra keyword arguments go to ``Worker.init`` (``fail=``, ``hang_terminate=``).
    """
    tag = child_id if tag is None else tag
    name = child_id if name is None else name
    return condukt.ChildSpec(
        child_id, Worker, (log, tag), kwargs, restart=restart, shutdown=shutdown, name=name
    )


class Gate:
    """What :class:`Flaky`'s next ``init`` does; tests change it between starts.

    ``mode`` is ``"run"``, ``"fail"`` (raise :class:`Boom`) or ``"ignore"``
    (return ``condukt.otp.IGNORE``), each after ``delay`` seconds; the next
    ``fail_next`` inits fail whatever the mode. ``inits`` lists the handle of
    every incarnation whose ``init`` ran, ``failures`` counts the failed ones.
    """

    def __init__(self) -> None:
        self.mode = "run"
        self.delay = 0.0
        self.fail_next = 0
        self.inits: list[condukt.Handle] = []
        self.failures = 0


class Flaky(condukt.Server):
    """A server whose ``init`` does what its :class:`Gate` says; answers ``"ping"``."""

    async def init(self, gate: Gate) -> Any:
        gate.inits.append(self.handle)
        mode = gate.mode
        if gate.fail_next:
            gate.fail_next -= 1
            mode = "fail"
        if gate.delay:
            await trio.sleep(gate.delay)
        if mode == "fail":
            gate.failures += 1
            raise Boom("init")
        if mode == "ignore":
            return condukt.otp.IGNORE
        return None

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "ping":
            return "pong"
        return await super().handle_call(request, caller)


def flaky(child_id: Any, gate: Gate, **kwargs: Any) -> condukt.ChildSpec:
    """A :class:`Flaky` child spec registered under its id (keywords go to ``ChildSpec``)."""
    return condukt.ChildSpec(child_id, Flaky, (gate,), name=child_id, **kwargs)
