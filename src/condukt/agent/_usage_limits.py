"""Usage limits per run: requests, tokens and cost, as a capability."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..messages import AssistantMessage, Usage
from ._capability import Capability
from ._errors import AgentError

if TYPE_CHECKING:
    from ._run import Run

__all__ = ["UsageLimitExceeded", "UsageLimits"]


class UsageLimitExceeded(AgentError):
    """A run went over one of its :class:`UsageLimits`.

    ``limit`` names it (``"max_requests"``, ``"max_total_tokens"``...),
    ``allowed`` is the limit and ``used`` what the run had used when it
    stopped. The history keeps the run's completed turns, as after an abort.
    """

    def __init__(self, limit: str, allowed: float, used: float) -> None:
        super().__init__(f"usage limit {limit}={allowed:g} reached: the run used {used:g}")
        self.limit = limit
        self.allowed = allowed
        self.used = used


class UsageLimits(Capability):
    """Stop a run that uses too much: model requests, tokens, or money.

    ``capabilities=[condukt.agent.UsageLimits(max_requests=10, max_total_tokens=200_000)]``.
    Checked after every turn, against the run's sums (each run starts from
    zero): over ``max_input_tokens``, ``max_output_tokens``,
    ``max_total_tokens`` or ``max_cost``, the run fails with
    :class:`UsageLimitExceeded`; at ``max_requests`` it fails if the model
    still wants another turn (it asked for tools). ``max_cost`` needs
    ``prices``: dollars per million ``(input, output)`` tokens; cache reads
    count as input. The limits apply to each run of the agent.
    """

    def __init__(
        self,
        *,
        max_requests: int | None = None,
        max_input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        max_total_tokens: int | None = None,
        max_cost: float | None = None,
        prices: tuple[float, float] | None = None,
    ) -> None:
        for name, value in (
            ("max_requests", max_requests),
            ("max_input_tokens", max_input_tokens),
            ("max_output_tokens", max_output_tokens),
            ("max_total_tokens", max_total_tokens),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")
        if max_cost is not None:
            if isinstance(max_cost, bool) or not isinstance(max_cost, (int, float)) or not max_cost > 0:
                raise ValueError(f"max_cost must be a positive number or None, got {max_cost!r}")
            if prices is None:
                raise ValueError("max_cost needs prices=(input, output) in dollars per million tokens")
        if prices is not None:
            if (
                not isinstance(prices, tuple)
                or len(prices) != 2
                or not all(isinstance(p, (int, float)) and not isinstance(p, bool) and p >= 0 for p in prices)
            ):
                raise ValueError(f"prices must be (input, output) dollars per million tokens, got {prices!r}")
        self.max_requests = max_requests
        self.max_input_tokens = max_input_tokens
        self.max_output_tokens = max_output_tokens
        self.max_total_tokens = max_total_tokens
        self.max_cost = max_cost
        self.prices = prices

    def cost(self, usage: Usage) -> float:
        """Dollars for ``usage`` at ``prices`` (0 without prices)."""
        if self.prices is None:
            return 0.0
        input_price, output_price = self.prices
        inputs = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        return (inputs * input_price + usage.output_tokens * output_price) / 1_000_000

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """Fail the run with :class:`UsageLimitExceeded` when it went over a limit."""
        usage = run.usage
        checks = (
            ("max_input_tokens", self.max_input_tokens, usage.input_tokens),
            ("max_output_tokens", self.max_output_tokens, usage.output_tokens),
            ("max_total_tokens", self.max_total_tokens, usage.input_tokens + usage.output_tokens),
            ("max_cost", self.max_cost, self.cost(usage)),
        )
        for name, allowed, used in checks:
            if allowed is not None and used > allowed:
                raise UsageLimitExceeded(name, allowed, used)
        if self.max_requests is not None and run.turn >= self.max_requests and message.tool_calls:
            raise UsageLimitExceeded("max_requests", self.max_requests, run.turn)
        return False

    def __repr__(self) -> str:
        limits = {
            k: v
            for k, v in vars(self).items()
            if k.startswith("max_") and v is not None
        }
        return f"UsageLimits({', '.join(f'{k}={v!r}' for k, v in limits.items())})"
