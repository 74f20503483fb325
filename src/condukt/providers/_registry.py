"""Resolving ``"provider:model"`` strings to :class:`Model` objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..otp import ConduktError
from ._model import Model

__all__ = ["ModelFactory", "UnknownProvider", "register_provider", "registered_providers", "resolve_model"]

#: ``factory(model_name, *, api_key, base_url, node, **options) -> Model``;
#: it should raise a clear error for a missing key at once (agent start).
ModelFactory = Callable[..., Model]

_providers: dict[str, ModelFactory] = {}
_model_types: set[type] = set()


class UnknownProvider(ConduktError, ValueError):
    """No provider is registered for the prefix of a model string."""


def register_provider(prefix: str, factory: ModelFactory, *, replace: bool = False) -> None:
    """Make ``"prefix:model"`` strings resolve through ``factory``."""
    if not prefix or ":" in prefix:
        raise ValueError(f"invalid provider prefix {prefix!r}")
    if prefix in _providers and not replace:
        raise ValueError(f"provider {prefix!r} is already registered (pass replace=True)")
    _providers[prefix] = factory


def registered_providers() -> list[str]:
    """The prefixes that resolve, sorted."""
    return sorted(_providers)


def resolve_model(
    model: Model | str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    node: Any = None,
    **options: Any,
) -> Model:
    """A :class:`Model` for ``model``: returned as is if it already is one.

    Raises :class:`UnknownProvider` for an unknown prefix, ``ValueError`` for
    a malformed string, and whatever the provider raises (e.g. a missing key).
    """
    if not isinstance(model, str):
        kind = type(model)
        if kind in _model_types or isinstance(model, Model):
            _model_types.add(kind)  # the Protocol check is slow; a class passes once
            return model
        raise TypeError(f"model must be a 'provider:model' string or a Model, got {model!r}")
    prefix, sep, name = model.partition(":")
    if not sep or not prefix or not name:
        raise ValueError(f"model string must look like 'provider:model', got {model!r}")
    factory = _providers.get(prefix)
    if factory is None:
        known = ", ".join(registered_providers()) or "none"
        raise UnknownProvider(f"no provider registered for {prefix!r} (known: {known})")
    return factory(name, api_key=api_key, base_url=base_url, node=node, **options)
