"""Monitors: :class:`MonitorRef` (a process watching another) and :class:`Monitor` (code outside any process).

A monitor is an entry in the watched process's ``_monitors``; its exit
calls ``_on_down`` of each watcher with the :class:`Down` (a process's
handle puts it in its mailbox, a :class:`Monitor` sets its event). A
monitor of a process that is already dead yields ``Down(h, "noproc")`` at
once, as in OTP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ._signals import Down, ExitReason

if TYPE_CHECKING:
    from ._handle import Handle

__all__ = ["Monitor", "MonitorRef"]


class MonitorRef:
    """A monitor set by :meth:`Server.monitor`; identifies the :class:`Down` it yields."""

    __slots__ = ("_target", "_watcher")

    def __init__(self, target: Handle, watcher: Any) -> None:
        self._target = target
        self._watcher = watcher

    @property
    def target(self) -> Handle:
        """The monitored process."""
        return self._target

    def _down(self, reason: ExitReason) -> None:
        self._watcher._on_down(Down(self._target, reason, self))

    def _remove(self) -> bool:
        """End the watch here if it is not an entry of a local process (see ``_remote``)."""
        return False

    def __repr__(self) -> str:
        return f"<MonitorRef of {self._target!r}>"



def _add_monitor(target: Handle, watcher: Any) -> MonitorRef:
    """Monitor ``target`` for ``watcher`` (a Handle or a node Monitor); dead: ``Down`` at once."""
    ref = MonitorRef(target, watcher)
    proc = target._process
    if proc is None:
        ref._down("noproc")
    else:
        monitors = proc._monitors
        if monitors is None:
            monitors = proc._monitors = {}
        monitors[ref] = None
    return ref


def _remove_monitor(ref: MonitorRef) -> None:
    if ref._remove():
        return
    proc = ref._target._process
    if proc is not None and proc._monitors:
        proc._monitors.pop(ref, None)


class Monitor:
    """A monitor held by code outside any process; see :meth:`Node.monitor`."""

    __slots__ = ("_event", "_ref", "down")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._ref: MonitorRef | None = None
        #: The :class:`Down` once the process exited, else ``None``.
        self.down: Down | None = None

    def _on_down(self, down: Down) -> None:
        if self.down is None:
            self.down = down
            self._event.set()

    async def wait(self) -> Down:
        """Wait for the monitored process to exit; returns the :class:`Down`.

        Cancellation: only the waiting is cancelled; the monitor stays set
        until its ``async with`` block ends. Never raises otherwise.
        """
        await self._event.wait()
        assert self.down is not None
        return self.down


class _MonitorContext:
    def __init__(self, handle: Any, add: Callable[[Any, Any], MonitorRef] | None = None) -> None:
        self._handle = handle
        self._add = _add_monitor if add is None else add
        self._monitor = Monitor()

    async def __aenter__(self) -> Monitor:
        monitor = self._monitor
        monitor._ref = self._add(self._handle, monitor)
        await trio.lowlevel.checkpoint()
        return monitor

    async def __aexit__(self, *exc_info: object) -> None:
        ref = self._monitor._ref
        if ref is not None:
            _remove_monitor(ref)
