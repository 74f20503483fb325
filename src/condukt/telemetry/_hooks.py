"""The process-global handler table: :func:`attach`, :func:`emit`, :func:`enabled`."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import attrs

__all__ = ["Handler", "TelemetryEvent", "attach", "attached", "emit", "enabled"]

logger = logging.getLogger("condukt.telemetry")


@attrs.frozen
class TelemetryEvent:
    """One telemetry event, as handlers receive it.

    ``measurements`` and ``metadata`` are read-only snapshots taken when the
    event was emitted: a handler can keep the event, and neither the emitter
    nor another handler can change it afterwards.
    """

    #: e.g. ``("condukt", "run", "start")``.
    name: tuple[str, ...]
    #: Numbers: durations in seconds, token counts, turn counts.
    measurements: Mapping[str, float | int]
    #: Identifiers and labels (never prompts, tool arguments or results).
    metadata: Mapping[str, Any]


#: A telemetry handler: called synchronously, in the emitting thread and task.
Handler = Callable[[TelemetryEvent], None]


class _Attachment:
    """One :func:`attach` call; the same handler attached twice is two of these."""

    __slots__ = ("handler",)

    def __init__(self, handler: Handler) -> None:
        self.handler = handler


# Copy-on-write: emit reads the tuple without a lock (one atomic load), and
# attach/detach replace it under the lock.
_attachments: tuple[_Attachment, ...] = ()
_lock = threading.Lock()


def attach(handler: Handler) -> Callable[[], None]:
    """Call ``handler(event)`` for every event emitted from now on, in any thread.

    Returns ``detach``, which removes this attachment; calling it again is a
    no-op. Attaching the same handler twice makes it receive every event twice,
    and each ``detach`` removes one attachment. Handlers are process-global,
    like Erlang's ``:telemetry``.

    Raises ``TypeError`` if ``handler`` is not callable.
    """
    if not callable(handler):
        raise TypeError(f"a telemetry handler must be callable, got {handler!r}")
    attachment = _Attachment(handler)
    global _attachments
    with _lock:
        _attachments = (*_attachments, attachment)

    def detach() -> None:
        _remove(attachment)

    return detach


@contextlib.contextmanager
def attached(handler: Handler) -> Iterator[Handler]:
    """Attach ``handler`` for the duration of a ``with`` block; yields it."""
    detach = attach(handler)
    try:
        yield handler
    finally:
        detach()


def enabled() -> bool:
    """Whether any handler is attached.

    Emitters may check this first to skip measuring and building the
    dictionaries of an event nobody receives.
    """
    return bool(_attachments)


def emit(name: tuple[str, ...], measurements: Mapping[str, float | int], metadata: Mapping[str, Any]) -> None:
    """Deliver an event to every attached handler, in attach order.

    With no handler attached this returns at once, without reading its
    arguments. Handlers run synchronously in the caller's thread; ``emit``
    never awaits, so it has no cancellation point.

    A handler that raises an ``Exception`` does not reach the emitter: the
    error is logged on the ``condukt.telemetry`` logger and that attachment is
    detached, so a broken handler fails once, not on every event. (A
    ``BaseException`` such as ``KeyboardInterrupt`` propagates.)

    A handler detached in one thread while another thread is emitting may
    still receive that one event.
    """
    attachments = _attachments
    if not attachments:
        return
    event = TelemetryEvent(
        tuple(name), MappingProxyType(dict(measurements)), MappingProxyType(dict(metadata))
    )
    for attachment in attachments:
        try:
            attachment.handler(event)
        except Exception:
            logger.exception(
                "telemetry handler %r raised on event %s; it has been detached",
                attachment.handler,
                ".".join(event.name),
            )
            _remove(attachment)


def _remove(attachment: _Attachment) -> None:
    global _attachments
    with _lock:
        _attachments = tuple(a for a in _attachments if a is not attachment)
