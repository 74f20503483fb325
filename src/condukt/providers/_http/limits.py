"""Node-wide limits per provider: concurrency, requests and tokens per minute, 429 back-off.

Every agent on a node that talks to the same provider endpoint shares one
:class:`ProviderLimits`, so a thousand agents do not stampede a provider,
and a 429 seen by one of them slows everybody's traffic to that provider.

By default the concurrency limit is adaptive (:data:`ADAPTIVE`): it starts
open and backs off when the provider says it is overloaded, as TCP's
congestion control does (additive increase, multiplicative decrease).
"""

from __future__ import annotations

import math
from typing import Final, Literal

import trio

__all__ = ["ADAPTIVE", "DEFAULT_MAX_CONCURRENCY", "ProviderLimits"]

#: ``max_concurrency="adaptive"``: start at :data:`ADAPTIVE_START` requests in
#: flight; halve on a 429, 503 or 529, once per window (failures of requests
#: sent before the last halving do not halve again: they were sent under the
#: old limit); grow by one after each full window of successes, up to the start.
ADAPTIVE: Final = "adaptive"
#: Requests in flight to one provider endpoint from one node, unless configured.
DEFAULT_MAX_CONCURRENCY: Final = ADAPTIVE
#: Where an adaptive limit starts, and the most it grows to (the node's HTTP
#: client holds at most 1,000 connections by default).
ADAPTIVE_START = 1000

_UNSET: object = object()


class _Bucket:
    """A token bucket refilled continuously at ``per_minute / 60`` per second."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.stamp = now

    def wait(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` (at most the capacity) is available."""
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        missing = min(amount, self.capacity) - self.level
        return missing / self.rate if missing > 0 else 0.0

    def take(self, amount: float) -> None:
        """Spend ``amount`` (the level may go negative: later requests wait longer)."""
        self.level -= amount


def _positive_or_none(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number or None, got {value!r}")
    return float(value)


class ProviderLimits:
    """The limits one node applies to one provider endpoint.

    ``max_concurrency`` bounds requests in flight: an int, ``None``
    (unbounded) or ``"adaptive"`` (the default, see :data:`ADAPTIVE`:
    :meth:`overloaded` and :meth:`succeeded` move it; :attr:`concurrency`
    is where it stands);
    ``requests_per_minute`` and ``tokens_per_minute`` are token buckets (a
    request reserves its estimated input tokens, and is charged its real
    usage when it completes). :meth:`slow_down` (called on a 429) holds every
    new request back until the given time has passed. Waiting is FIFO and
    runs under the caller's cancel scope.
    """

    def __init__(
        self,
        name: str,
        *,
        max_concurrency: int | None | Literal["adaptive"] = DEFAULT_MAX_CONCURRENCY,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
    ) -> None:
        #: The endpoint these limits apply to (``"anthropic https://api.anthropic.com"``).
        self.name = name
        self._slots = trio.CapacityLimiter(math.inf)
        self._lock = trio.Lock()
        self._resume_at = -math.inf
        self._rpm: _Bucket | None = None
        self._tpm: _Bucket | None = None
        self._max_concurrency: int | None | Literal["adaptive"] = None
        self._adaptive_limit = ADAPTIVE_START
        self._credit = 0.0
        #: Bumped at every adaptive decrease; see :meth:`overloaded`.
        self.generation = 0
        #: The most requests that were in flight at once.
        self.peak_in_flight = 0
        self.configure(
            max_concurrency=max_concurrency,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
        )

    def configure(
        self,
        *,
        max_concurrency: int | None | object = _UNSET,
        requests_per_minute: float | None | object = _UNSET,
        tokens_per_minute: float | None | object = _UNSET,
    ) -> None:
        """Change the limits that are given (``None`` removes one); requests in flight are not affected."""
        if max_concurrency is not _UNSET:
            if max_concurrency == ADAPTIVE:
                self._max_concurrency = ADAPTIVE
                self._adaptive_limit, self._credit = ADAPTIVE_START, 0.0
                self._slots.total_tokens = ADAPTIVE_START
            elif max_concurrency is None or (
                isinstance(max_concurrency, int) and not isinstance(max_concurrency, bool) and max_concurrency >= 1
            ):
                self._max_concurrency = max_concurrency
                self._slots.total_tokens = math.inf if max_concurrency is None else max_concurrency
            else:
                raise ValueError(
                    f"max_concurrency must be a positive int, None or 'adaptive', got {max_concurrency!r}"
                )
        now = trio.current_time() if _in_trio() else 0.0
        if requests_per_minute is not _UNSET:
            rpm = _positive_or_none("requests_per_minute", requests_per_minute)
            self._rpm = None if rpm is None else _Bucket(rpm, now)
        if tokens_per_minute is not _UNSET:
            tpm = _positive_or_none("tokens_per_minute", tokens_per_minute)
            self._tpm = None if tpm is None else _Bucket(tpm, now)

    @property
    def max_concurrency(self) -> int | None | Literal["adaptive"]:
        """The configured limit: an int, ``None`` (unbounded) or ``"adaptive"``."""
        return self._max_concurrency

    @property
    def concurrency(self) -> float:
        """Requests allowed in flight right now (``math.inf`` when unbounded; moves when adaptive)."""
        return self._slots.total_tokens

    def overloaded(self, generation: int | None = None) -> None:
        """The provider said it is overloaded (429, 503, 529): an adaptive limit halves.

        ``generation`` is :attr:`generation` as it was when the failed request
        was sent: a request sent before the last halving does not halve
        again (the requests of one burst all fail; the limit halves once).
        A fixed limit does not move.
        """
        if self._max_concurrency != ADAPTIVE:
            return
        if generation is not None and generation != self.generation:
            return
        self.generation += 1
        # Half of what was really in flight: the nominal limit means little when fewer requests were sent.
        in_flight = self._slots.borrowed_tokens or self._adaptive_limit
        self._adaptive_limit = max(1, min(self._adaptive_limit, in_flight) // 2)
        self._credit = 0.0
        self._slots.total_tokens = self._adaptive_limit

    def succeeded(self) -> None:
        """A request completed: an adaptive limit below its start grows by one per full window of successes."""
        if self._max_concurrency != ADAPTIVE or self._adaptive_limit >= ADAPTIVE_START:
            return
        self._credit += 1.0 / self._adaptive_limit
        if self._credit >= 1.0:
            self._credit = 0.0
            self._adaptive_limit += 1
            self._slots.total_tokens = self._adaptive_limit

    @property
    def requests_per_minute(self) -> float | None:
        """The request rate limit, if any."""
        return None if self._rpm is None else self._rpm.capacity

    @property
    def tokens_per_minute(self) -> float | None:
        """The token rate limit, if any."""
        return None if self._tpm is None else self._tpm.capacity

    @property
    def in_flight(self) -> int:
        """Requests holding a slot right now."""
        return self._slots.borrowed_tokens

    def slow_down(self, seconds: float) -> None:
        """Hold every request that has not started yet back for ``seconds`` (a 429 was seen)."""
        self._resume_at = max(self._resume_at, trio.current_time() + seconds)

    async def acquire(self, borrower: object, estimated_tokens: int = 0) -> None:
        """Wait until ``borrower`` may send a request; pair with :meth:`release`.

        Cancellable: a cancelled wait holds nothing.
        """
        if self._rpm is not None or self._tpm is not None or self._resume_at > trio.current_time():
            await self._wait_for_rate(estimated_tokens)
        slots = self._slots
        try:
            slots.acquire_on_behalf_of_nowait(borrower)
        except trio.WouldBlock:
            await slots.acquire_on_behalf_of(borrower)
        try:
            # A 429 may have arrived while this request waited for its slot.
            while self._resume_at > trio.current_time():
                await trio.sleep_until(self._resume_at)
        except BaseException:
            slots.release_on_behalf_of(borrower)
            raise
        in_flight = slots.borrowed_tokens
        self.peak_in_flight = max(self.peak_in_flight, in_flight)

    def release(self, borrower: object) -> None:
        """Give back the slot :meth:`acquire` took for ``borrower``."""
        self._slots.release_on_behalf_of(borrower)

    def charge(self, actual_tokens: int, estimated_tokens: int) -> None:
        """Correct the token bucket with a finished request's real usage."""
        if self._tpm is not None:
            self._tpm.take(actual_tokens - estimated_tokens)

    async def _wait_for_rate(self, tokens: int) -> None:
        async with self._lock:  # FIFO: the first to wait is the first to go
            while True:
                now = trio.current_time()
                wait = self._resume_at - now
                if self._rpm is not None:
                    wait = max(wait, self._rpm.wait(1, now))
                if self._tpm is not None:
                    wait = max(wait, self._tpm.wait(tokens, now))
                if wait <= 0:
                    break
                await trio.sleep(wait)
            if self._rpm is not None:
                self._rpm.take(1)
            if self._tpm is not None:
                self._tpm.take(tokens)

    def __repr__(self) -> str:
        return (
            f"<ProviderLimits {self.name} max_concurrency={self._max_concurrency} concurrency={self.concurrency} "
            f"rpm={self.requests_per_minute} tpm={self.tokens_per_minute} in_flight={self.in_flight}>"
        )


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
