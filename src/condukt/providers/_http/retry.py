"""When to send a failed request again, and after how long: :class:`RetryPolicy`."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["NO_RETRY", "RETRY_STATUSES", "RetryPolicy", "parse_retry_after", "retry_policy"]

#: HTTP statuses worth another attempt: timeouts, too-early, rate limits,
#: server errors and Anthropic's 529 "overloaded".
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504, 529})


@attrs.frozen
class RetryPolicy:
    """Exponential backoff with jitter, honouring the server's ``Retry-After``.

    ``attempts`` counts every request, the first one included (``1``: never
    retry). Attempt *n* failing waits ``min(cap, base * 2**(n-1))`` seconds,
    scaled by a random factor in ``[1 - jitter, 1]``, unless the server said
    how long to wait (``Retry-After`` / ``retry-after-ms``): then exactly
    that, if it is at most ``max_retry_after`` seconds; a longer wait is not
    retried at all (the error says how long the server asked for).
    """

    attempts: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    base: float = attrs.field(default=0.3, validator=attrs.validators.ge(0))
    cap: float = attrs.field(default=5.0, validator=attrs.validators.ge(0))
    jitter: float = attrs.field(default=0.5, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based), or ``None``: give up."""
        if attempt >= self.attempts:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        delay = min(self.cap, self.base * 2 ** (attempt - 1))
        jittered: float = delay * (1.0 - self.jitter * random.random())
        return jittered


#: The policy of ``retry=False``: one attempt.
NO_RETRY = RetryPolicy(attempts=1)


def retry_policy(value: Any) -> RetryPolicy:
    """The policy for a ``retry=`` option: ``True``/``None`` (defaults), ``False``, an int of attempts,
    a mapping of :class:`RetryPolicy` fields, or a policy."""
    if value is None or value is True:
        return RetryPolicy()
    if value is False:
        return NO_RETRY
    if isinstance(value, RetryPolicy):
        return value
    if isinstance(value, int):
        return RetryPolicy(attempts=value)
    if isinstance(value, Mapping):
        return RetryPolicy(**value)
    raise TypeError(f"retry must be a bool, an int, a mapping or a RetryPolicy, got {value!r}")


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, else ``Retry-After`` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
