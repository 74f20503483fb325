"""Model fallback: :class:`Fallback` asks its models in order, moving on when one fails."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..events import Event, Retry
from ..messages import AssistantMessage
from ._errors import AuthenticationFailed, InvalidResponse, ProviderUnavailable, RateLimited
from ._model import Emit, Model, ModelError, ModelRequest

__all__ = ["DEFAULT_FALLBACK_ON", "Fallback"]

logger = logging.getLogger("condukt.providers")

#: The failures :class:`Fallback` moves on after by default: the provider is
#: down or overloaded, kept refusing for rate limits, sent something that is
#: not the protocol, or refused the key. A rejected request
#: (:class:`~condukt.providers.InvalidRequest`) is not among them: the same
#: request would most likely be rejected by the next model too.
DEFAULT_FALLBACK_ON: tuple[type[ModelError], ...] = (
    ProviderUnavailable,
    RateLimited,
    InvalidResponse,
    AuthenticationFailed,
)


class Fallback:
    """A :class:`~condukt.providers.Model` that tries ``models`` in order.

    Each model first does its own retries (its
    :class:`~condukt.providers.RetryPolicy`); when it still fails with one
    of ``on`` (exception classes, or a predicate taking the exception;
    default :data:`DEFAULT_FALLBACK_ON`), the next model gets the same
    request, after a :class:`~condukt.events.Retry` event naming it. The
    last model's failure is raised as is. A model that has already streamed
    part of its answer is not replaced (the user has seen that part): its
    failure is raised.

    ``models`` are :class:`Model` objects or ``"provider:model"`` strings
    (resolved now, with keys from the environment: a missing key raises
    :class:`~condukt.providers.MissingApiKey` here)::

        model = condukt.providers.Fallback("anthropic:claude-sonnet-4-5", "openai:gpt-4.1")
        await node.spawn(condukt.Agent, model=model)
    """

    def __init__(
        self,
        *models: Model | str,
        on: Sequence[type[BaseException]] | Callable[[ModelError], bool] = DEFAULT_FALLBACK_ON,
        name: str | None = None,
    ) -> None:
        if len(models) < 2:
            raise ValueError("Fallback needs at least two models")
        from ._registry import resolve_model

        resolved: list[Model] = []
        for model in models:
            if isinstance(model, str):
                resolved.append(resolve_model(model))
            elif isinstance(model, type) or not callable(getattr(model, "complete", None)):
                raise TypeError(f"Fallback takes Model objects or 'provider:model' strings, got {model!r}")
            else:
                resolved.append(model)
        if callable(on) and not isinstance(on, type):
            self._should: Callable[[ModelError], bool] = on
        else:
            if isinstance(on, type):
                raise TypeError("on must be a list of exception classes or a predicate, not one class")
            classes = tuple(on)
            if not all(isinstance(c, type) and issubclass(c, BaseException) for c in classes):
                raise TypeError(f"on must hold exception classes, got {on!r}")
            self._should = lambda exc: isinstance(exc, classes)
        #: The models, in the order they are tried.
        self.models: tuple[Model, ...] = tuple(resolved)
        self._name = name or "fallback(" + ", ".join(m.name for m in self.models) + ")"

    @property
    def name(self) -> str:
        """``fallback(first, second, ...)``, or the ``name`` given."""
        return self._name

    async def complete(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Ask each model in turn until one answers; see the class.

        Raises the last failure (a :class:`ModelError`), or the first one
        that is not among ``on`` or came after a partial stream. Cancellation
        cancels the model being asked and propagates; no other model is tried.
        """
        last = len(self.models) - 1
        for index, model in enumerate(self.models):
            streamed = False

            async def forward(event: Event) -> None:
                nonlocal streamed
                if not isinstance(event, Retry):
                    streamed = True
                await emit(event)

            try:
                return await model.complete(request, forward)
            except ModelError as exc:
                if index == last or streamed or not self._should(exc):
                    raise
                following = self.models[index + 1]
                logger.info("%s failed (%s); falling back to %s", model.name, exc, following.name)
                await emit(Retry(following.name, index + 1, f"{model.name}: {_reason(exc)}", 0.0))
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close the models that have an ``aclose`` (HTTP models resolved outside a node).

        Cancellation: each model's close finishes what it must (an HTTP
        model closes its idle connections at once); the models after the one
        being closed are closed too before ``trio.Cancelled`` propagates.
        """
        failure: BaseException | None = None
        for model in self.models:
            close = getattr(model, "aclose", None)
            if close is not None:
                try:
                    await close()
                except BaseException as exc:  # keep closing the others, then raise the first failure
                    failure = failure or exc
        if failure is not None:
            raise failure

    def __repr__(self) -> str:
        return f"<Fallback {self.name}>"


def _reason(exc: BaseException) -> Any:
    return getattr(exc, "reason", None) or str(exc)
