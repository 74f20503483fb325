"""Usage limits (budgets) per run or per agent: requests, tokens, cost, tool calls and time, as a capability."""

from __future__ import annotations

import math
from typing import Literal

import trio

from ...messages import AssistantMessage, Usage
from ...providers import ModelRequest
from .._capability import Capability, SendRequest
from .._errors import AgentError
from .._run import Run

__all__ = ["UsageLimitExceeded", "UsageLimits"]


class UsageLimitExceeded(AgentError):
    """A run went over one of its :class:`UsageLimits`.

    ``limit`` names it (``"max_requests"``, ``"max_total_tokens"``...),
    ``allowed`` is the limit and ``used`` what the run had used when it
    stopped (``per`` says whose: ``"run"`` or ``"agent"``). The history
    keeps the run's completed turns, as after an abort.
    """

    def __init__(self, limit: str, allowed: float, used: float, per: str = "run", reason: str | None = None) -> None:
        super().__init__(reason or f"usage limit {limit}={allowed:g} reached: the {per} used {used:g}")
        self.limit = limit
        self.allowed = allowed
        self.used = used
        self.per = per


class UsageLimits(Capability):
    """Stop a run that uses too much: model requests, tokens, money, tool calls or time.

    ``capabilities=[condukt.agent.UsageLimits(max_requests=10, max_total_tokens=200_000)]``.

    Token and cost limits are checked after every turn: over
    ``max_input_tokens``, ``max_output_tokens``, ``max_total_tokens`` or
    ``max_cost``, the run fails with :class:`UsageLimitExceeded`; at
    ``max_requests`` it fails if the model still wants another turn (it asked
    for tools). ``max_cost`` (US dollars) counts the ``cost`` the provider
    put in each answer's usage (from the ``genai-prices`` table, the
    ``[prices]`` extra, or the model's ``prices=`` option); ``prices``
    (dollars per million ``(input, output)`` tokens; cache reads and writes
    count as input) replaces it. An answer whose cost is unknown (a model
    no table knows, without ``prices``) fails a run that has ``max_cost``
    with :class:`UsageLimitExceeded` saying so, rather than spending blind.
    ``max_tool_calls`` is checked when a response asks for tools: calls that
    would go over it never run (that response is dropped, the run fails).
    ``max_duration`` (seconds) bounds the time the run spends, model
    requests included: one in flight at the limit is cancelled.

    ``per="run"`` (the default): each run starts from zero. ``per="agent"``:
    the sums run over every run of the agent (a budget); once spent, a new
    run fails before its first request. The sums live in this object: give
    each agent its own, or one to several agents to share a budget.
    ``used()`` tells what was spent.
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
        max_tool_calls: int | None = None,
        max_duration: float | None = None,
        per: Literal["run", "agent"] = "run",
    ) -> None:
        for name, value in (
            ("max_requests", max_requests),
            ("max_input_tokens", max_input_tokens),
            ("max_output_tokens", max_output_tokens),
            ("max_total_tokens", max_total_tokens),
            ("max_tool_calls", max_tool_calls),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")
        if max_duration is not None and (
            isinstance(max_duration, bool) or not isinstance(max_duration, (int, float)) or not max_duration > 0
        ):
            raise ValueError(f"max_duration must be a positive number of seconds or None, got {max_duration!r}")
        if per not in ("run", "agent"):
            raise ValueError(f"per must be 'run' or 'agent', got {per!r}")
        if max_cost is not None:
            if isinstance(max_cost, bool) or not isinstance(max_cost, (int, float)) or not max_cost > 0:
                raise ValueError(f"max_cost must be a positive number or None, got {max_cost!r}")
        if prices is not None:
            if (
                not isinstance(prices, tuple)
                or len(prices) != 2
                or not all(isinstance(p, (int, float)) and not isinstance(p, bool) and p >= 0 for p in prices)
            ):
                raise ValueError(f"prices must be (input, output) dollars per million tokens, got {prices!r}")
        self.max_tool_calls = max_tool_calls
        self.max_duration = max_duration
        self.per = per
        # What earlier runs spent (per="agent"): usage, requests, tool calls, seconds.
        self._usage = Usage()
        self._requests = 0
        self._tool_calls = 0
        self._seconds = 0.0
        self._key = f"condukt.usage_limits.{id(self)}"  # this object's tool-call count in run.state
        self.max_requests = max_requests
        self.max_input_tokens = max_input_tokens
        self.max_output_tokens = max_output_tokens
        self.max_total_tokens = max_total_tokens
        self.max_cost = max_cost
        self.prices = prices

    def cost(self, usage: Usage) -> float:
        """Dollars for ``usage``: at ``prices`` when given, else its own ``cost`` (NaN when that is unknown)."""
        if self.prices is None:
            if usage.cost is not None:
                return usage.cost
            return math.nan if usage.has_tokens else 0.0
        input_price, output_price = self.prices
        inputs = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        return (inputs * input_price + usage.output_tokens * output_price) / 1_000_000

    def used(self, run: Run | None = None) -> dict[str, float]:
        """What counts against the limits: of ``run`` (per="run"), or of the agent so far (per="agent")."""
        usage, requests, calls, seconds = Usage(), 0, 0, 0.0
        if self.per == "agent":
            usage, requests, calls, seconds = self._usage, self._requests, self._tool_calls, self._seconds
        if run is not None:
            usage = usage + run.usage
            requests += run.turn
            calls += run.state.get(self._key, 0)
            seconds += trio.current_time() - run.started_at
        return {
            "max_requests": requests,
            "max_input_tokens": usage.input_tokens,
            "max_output_tokens": usage.output_tokens,
            "max_total_tokens": usage.input_tokens + usage.output_tokens,
            "max_cost": self.cost(usage),
            "max_tool_calls": calls,
            "max_duration": seconds,
        }

    def _over(self, used: dict[str, float]) -> None:
        for name in ("max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost"):
            allowed = getattr(self, name)
            if allowed is not None and used[name] > allowed:
                raise UsageLimitExceeded(name, allowed, used[name], self.per)
        if self.max_cost is not None and math.isnan(used["max_cost"]):
            raise UsageLimitExceeded(
                "max_cost",
                self.max_cost,
                used["max_cost"],
                self.per,
                f"usage limit max_cost={self.max_cost:g} cannot be checked: the cost of the model's answers is unknown"
                " (no price for the model: install condukt[prices] for the genai-prices table, or give"
                " UsageLimits(prices=(input, output)) or the model option prices=...)",
            )

    async def wrap_model_request(self, run: Run, request: ModelRequest, send: SendRequest) -> AssistantMessage:
        """Refuse a request the budget cannot pay for; bound it by the time left; count the tool calls it asks for.

        An abort or the run's timeout cancels the request as usual.
        """
        used = self.used(run)
        if self.per == "agent":
            self._over(used)  # spent by earlier runs: not one more request
            if self.max_requests is not None and used["max_requests"] > self.max_requests:
                raise UsageLimitExceeded("max_requests", self.max_requests, used["max_requests"] - 1, self.per)
        left = math.inf if self.max_duration is None else self.max_duration - used["max_duration"]
        if left <= 0:
            raise UsageLimitExceeded("max_duration", self.max_duration or 0, used["max_duration"], self.per)
        with trio.move_on_after(left) as scope:
            response = await send(request)
        if scope.cancelled_caught:
            raise UsageLimitExceeded("max_duration", self.max_duration or 0, self.used(run)["max_duration"], self.per)
        calls = len(response.tool_calls)
        if calls:
            if self.max_tool_calls is not None and used["max_tool_calls"] + calls > self.max_tool_calls:
                self._usage = self._usage + response.usage  # the dropped response was paid for
                raise UsageLimitExceeded(
                    "max_tool_calls", self.max_tool_calls, used["max_tool_calls"] + calls, self.per
                )
            run.state[self._key] = run.state.get(self._key, 0) + calls
        return response

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """Fail the run with :class:`UsageLimitExceeded` when it went over a limit."""
        used = self.used(run)
        self._over(used)
        if self.max_requests is not None and used["max_requests"] >= self.max_requests and message.tool_calls:
            raise UsageLimitExceeded("max_requests", self.max_requests, used["max_requests"], self.per)
        return False

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """Add what the run spent to the agent's sums (per="agent"). Never waits: nothing to cancel."""
        if self.per == "agent":
            self._usage = self._usage + run.usage
            self._requests += run.turn
            self._tool_calls += run.state.get(self._key, 0)
            self._seconds += trio.current_time() - run.started_at

    def __repr__(self) -> str:
        limits = {
            k: v
            for k, v in vars(self).items()
            if k.startswith("max_") and v is not None and not k.startswith("_")
        }
        if self.per != "run":
            limits["per"] = self.per
        return f"UsageLimits({', '.join(f'{k}={v!r}' for k, v in limits.items())})"
