"""What a response cost: :class:`Price` given by the user, else the maintained table of ``genai-prices``.

``genai-prices`` (the ``[prices]`` extra; pydantic's price table, kept up
to date by its maintainers) pulls in pydantic and a second HTTP client and
takes about half a second to import, so it is not a core dependency: it
is imported once, in a worker thread, the first time a model's price is
looked up, and each model's price is then kept here. Its ``calc_price``
is generic (units, tiers, price variants) and costs a couple of hundred
microseconds a call, as much as condukt's whole client path for a
request (``benchmarks/providers_cloud.py`` measures both); a model whose
prices are flat (or whose tiers start above the request's input) is
priced here from the table's numbers instead, in about a microsecond,
with the same result; ``calc_price`` prices the rest.

An unknown model has no price: its usage says ``cost=None``, never a
guess. Prices a user gives (the ``prices=`` model option) replace the
table's.
"""

from __future__ import annotations

import datetime
import importlib.util
import logging
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from ..messages import Usage

__all__ = ["PROVIDER_IDS", "Price", "lookup_price", "price_option", "table_available"]

logger = logging.getLogger("condukt.providers")

#: condukt's provider prefix -> the provider id of ``genai-prices`` (prefixes not here are not priced).
PROVIDER_IDS: Mapping[str, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "gemini": "google",
    "vertex": "google",
    "vertex-anthropic": "google",
    "bedrock": "aws",
    "azure": "azure",
    "mistral": "mistral",
    "xai": "x-ai",
    "deepseek": "deepseek",
    "groq": "groq",
    "together": "together",
    "openrouter": "openrouter",
}


def _rate(_: Any, attribute: Any, value: Any) -> None:
    if value is None and attribute.name.startswith("cache"):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"Price.{attribute.name} must be a non-negative number of dollars, got {value!r}")


@attrs.frozen
class Price:
    """A model's prices in US dollars per million tokens.

    ``input`` (uncached input), ``output``, ``cache_read`` and
    ``cache_write`` (cached input read and written; ``None``: as
    ``input``). Give it as the ``prices=`` model option
    (``model_options={"prices": Price(3, 15, 0.3, 3.75)}``, or ``(3, 15)``)
    to price a model the table does not know, or to replace its prices.
    """

    input: float = attrs.field(validator=_rate)
    output: float = attrs.field(validator=_rate)
    cache_read: float | None = attrs.field(default=None, validator=_rate)
    cache_write: float | None = attrs.field(default=None, validator=_rate)

    def cost(self, usage: Usage) -> float:
        """Dollars for ``usage`` at these prices."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
        ) / 1_000_000


def price_option(value: Any) -> Price | None | bool:
    """The ``prices`` model option: a :class:`Price`, ``(input, output)``, ``None`` (the table) or ``False`` (none)."""
    if value is None or value is False or isinstance(value, Price):
        return value
    if isinstance(value, tuple) and len(value) in (2, 4):
        return Price(*value)
    if isinstance(value, Mapping):
        return Price(**value)
    raise TypeError(
        f"prices must be a condukt.providers.Price, (input, output) dollars per million tokens, or False, got {value!r}"
    )


class _TablePrice:
    """A model's entry of the table: flat rates when they apply, else ``genai-prices``' own calculation."""

    __slots__ = ("_flat", "_info", "_provider", "_threshold")

    def __init__(self, info: Any, provider: Any) -> None:
        self._info = info
        self._provider = provider
        prices = info.get_prices(datetime.datetime.now(datetime.timezone.utc))
        rates: list[float | None] = []
        threshold: float | None = None
        for key in ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok"):
            value: Any = getattr(prices, key, None)
            tiers = getattr(value, "tiers", None)
            if tiers is not None:  # a TieredPrices: its base rate below the first tier
                start = min(tier.start for tier in tiers) if tiers else None
                threshold = start if threshold is None or start is None else min(threshold, start)
                value = value.base
            rates.append(None if value is None else float(value))
        input_rate, output_rate, read, write = rates
        self._flat = Price(input_rate or 0.0, output_rate or 0.0, read, write) if input_rate is not None else None
        self._threshold = threshold

    def cost(self, usage: Usage) -> float | None:
        flat = self._flat
        total_input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        if flat is not None and (self._threshold is None or total_input <= self._threshold):
            return flat.cost(usage)
        from genai_prices import Usage as TableUsage

        table_usage = TableUsage(
            input_tokens=total_input,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )
        try:
            return float(self._info.calc_price(table_usage, self._provider).total_price)
        except Exception:  # a unit the table cannot price this way: no cost rather than a wrong one
            return None


#: (genai-prices provider id, model) -> its entry, or None when the table does not know it.
#: Kept for the process: a model's price is read once (a long-running process keeps the
#: prices of when it first priced the model).
_TABLE: dict[tuple[str, str], _TablePrice | None] = {}


def table_available() -> bool:
    """Whether ``genai-prices`` is installed."""
    return importlib.util.find_spec("genai_prices") is not None


def _find(provider_id: str, model: str) -> None:
    """Put the table's entry for ``model`` at ``provider_id`` in the cache (blocking: imports the table)."""
    from genai_prices import data_snapshot

    entry: _TablePrice | None = None
    try:
        provider, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        pass
    else:
        try:
            entry = _TablePrice(info, provider)
        except Exception:  # an entry this reading does not understand: unpriced, as an unknown model
            logger.info("genai-prices: cannot read the price of %s at %s", model, provider_id)
    _TABLE[(provider_id, model)] = entry


def cached_price(provider: str, model: str) -> tuple[bool, _TablePrice | None]:
    """``(known, entry)`` from the cache, without looking anything up."""
    provider_id = PROVIDER_IDS.get(provider)
    if provider_id is None:
        return True, None
    key = (provider_id, model)
    if key in _TABLE:
        return True, _TABLE[key]
    return False, None


async def lookup_price(provider: str, model: str) -> _TablePrice | None:
    """The table's price of ``model`` at condukt provider ``provider``; ``None`` when it is unknown.

    The first lookup of a model runs in a worker thread (the table's
    import and search block); later ones answer from the cache. Cancelling
    it abandons the wait; the lookup finishes and is cached for the next
    request.
    """
    known, entry = cached_price(provider, model)
    if known:
        return entry
    provider_id = PROVIDER_IDS[provider]
    key = (provider_id, model)
    if not table_available():
        _TABLE[key] = None
        return None
    # Two first requests of one model may both search: the same answer, cached twice.
    await trio.to_thread.run_sync(_find, provider_id, model, abandon_on_cancel=True)
    return _TABLE[key]
