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

    With a ``node`` and an ``api_key``, a string resolves once per node and
    settings (the same string, key, URL and options give the same model
    object; a provider's model holds no per-agent state). Without a key,
    each call builds a model (its key or credentials come from the
    environment as it is then).

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
    # One model per node and settings: building one (a provider's client
    # set-up, its checks) is most of a one-shot run's spawn
    # (benchmarks/oneshot_http.py). Models hold no per-agent state.
    cache: dict[Any, Model] | None = None
    key: Any = None
    # Only with an explicit key: a provider reading its key or credentials
    # from the environment must see the environment of each start.
    if node is not None and api_key is not None:
        try:
            key = (model, api_key, base_url, factory, tuple(sorted(options.items())))
            hash(key)
        except TypeError:  # an unhashable option value: built each time
            key = None
        else:
            cache = node.extensions.get(_CACHE)
            if cache is None:
                cache = node.extensions[_CACHE] = {}
            cached = cache.get(key)
            if cached is not None:
                return cached
    made = factory(name, api_key=api_key, base_url=base_url, node=node, **options)
    if cache is not None:
        if len(cache) >= _CACHE_SIZE:
            cache.pop(next(iter(cache)))  # oldest first: many one-off keys must not grow it forever
        cache[key] = made
    return made


#: The node extension holding the models resolved on that node (see ``resolve_model``).
_CACHE = "condukt.providers.models"
#: Distinct (string, key, URL, options) settings a node keeps models for.
_CACHE_SIZE = 256
