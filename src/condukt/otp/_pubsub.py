"""Node-local publish/subscribe: many readers of a stream of messages, none can slow a writer."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from types import MappingProxyType, TracebackType
from typing import Any

import trio

__all__ = ["ALL", "DEFAULT_BUFFER", "PubSub", "Subscription"]

#: The topic that receives every message published on the node.
ALL = "*"
#: Messages a subscription buffers before it drops the oldest.
DEFAULT_BUFFER = 1000


class Subscription:
    """Messages published on one topic (or all of them), as an async iterator.

    ``async with node.subscribe("*") as messages: async for message in messages: ...``

    Overflow policy: publishing never waits. When a reader falls more than
    ``buffer`` messages behind, the oldest buffered message is dropped and
    :attr:`dropped` counts it. Leaving the ``async with`` block (or
    :meth:`close`) unsubscribes and ends the iteration.
    """

    __slots__ = ("_lot", "_pubsub", "_queue", "closed", "dropped", "topic")

    def __init__(self, pubsub: PubSub, topic: Hashable, buffer: int) -> None:
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise ValueError(f"buffer must be a positive int, got {buffer!r}")
        self.topic = topic
        self._pubsub = pubsub
        self._queue: deque[Any] = deque(maxlen=buffer)
        self._lot = trio.lowlevel.ParkingLot()
        #: Messages dropped because this reader fell behind.
        self.dropped = 0
        #: True once closed.
        self.closed = False

    def _push(self, message: Any) -> None:
        queue = self._queue
        if len(queue) == queue.maxlen:
            self.dropped += 1
        queue.append(message)
        if self._lot:
            self._lot.unpark()

    def drain(self) -> list[Any]:
        """The messages buffered now, oldest first, taken out of the buffer without waiting.

        For a reader that must catch up before acting on something else
        (the observer's event log, before it records a crash). Synchronous.
        """
        queue = self._queue
        taken = list(queue)
        queue.clear()
        return taken

    def close(self) -> None:
        """Unsubscribe; a pending or later ``__anext__`` ends the iteration once drained."""
        if not self.closed:
            self.closed = True
            self._pubsub._remove(self)
            self._lot.unpark_all()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Any:
        while not self._queue:
            if self.closed:
                raise StopAsyncIteration
            await self._lot.park()
        await trio.lowlevel.checkpoint_if_cancelled()
        return self._queue.popleft()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class PubSub:
    """Topics -> subscriptions. ``publish`` is synchronous and never blocks."""

    __slots__ = ("_topics", "topics")

    def __init__(self) -> None:
        self._topics: dict[Hashable, set[Subscription]] = {}
        #: The topics that have subscribers, each with its subscriptions: a live, read-only view.
        #: Empty when nobody subscribes, and testing it for truth costs no Python call (unlike
        #: ``bool(pubsub)``): for publishers that build a message only when someone listens.
        self.topics: Mapping[Hashable, AbstractSet[Subscription]] = MappingProxyType(self._topics)

    def __bool__(self) -> bool:
        return bool(self._topics)

    def subscribe(self, topic: Hashable = ALL, buffer: int = DEFAULT_BUFFER) -> Subscription:
        """A new subscription to ``topic`` (``"*"``: everything)."""
        subscription = Subscription(self, topic, buffer)
        self._topics.setdefault(topic, set()).add(subscription)
        return subscription

    def publish(self, topic: Hashable, message: Any) -> None:
        """Deliver ``message`` to the subscribers of ``topic`` and of ``"*"``."""
        topics = self._topics
        for subscription in topics.get(topic, ()):
            subscription._push(message)
        if topic != ALL:
            for subscription in topics.get(ALL, ()):
                subscription._push(message)

    def close(self) -> None:
        """Close every subscription (the node is closing): their iterations end."""
        for subscriptions in list(self._topics.values()):
            for subscription in list(subscriptions):
                subscription.close()

    def _remove(self, subscription: Subscription) -> None:
        subscriptions = self._topics.get(subscription.topic)
        if subscriptions is not None:
            subscriptions.discard(subscription)
            if not subscriptions:
                del self._topics[subscription.topic]
