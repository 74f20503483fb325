"""Sampling settings every protocol maps to its own fields: :class:`ModelSettings`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["SETTING_NAMES", "ModelSettings", "model_settings"]

#: The settings :class:`ModelSettings` holds, in the order they are documented.
SETTING_NAMES = ("temperature", "top_p", "max_tokens", "stop", "seed")


def _number(name: str, low: float, high: float) -> Any:
    def check(_: Any, attribute: Any, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise TypeError(f"{name} must be a number, got {value!r}")
        if not low <= value <= high:
            raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")

    return check


def _positive_int(_: Any, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int, got {value!r}")
    if attribute.name == "max_tokens" and value < 1:
        raise ValueError(f"max_tokens must be at least 1, got {value!r}")


def _stop(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    items: Iterable[Any] = (value,) if isinstance(value, str) else value
    if isinstance(value, (bytes, Mapping)) or not isinstance(items, Iterable):
        raise TypeError(f"stop must be a str or a list of str, got {value!r}")
    stop = tuple(items)
    if not stop or not all(isinstance(item, str) and item for item in stop):
        raise ValueError(f"stop must hold non-empty strings, got {value!r}")
    return stop


@attrs.frozen
class ModelSettings:
    """Sampling settings for a model request, mapped by each protocol to its own field names.

    ``temperature`` (0 to 2), ``top_p`` (above 0, at most 1), ``max_tokens``
    (the output cap), ``stop`` (a string or a list of stop sequences) and
    ``seed`` (an int, for providers that sample reproducibly). ``None``
    leaves a setting to the provider's default. Give them as the
    ``model_settings=`` start option of an agent, or per run
    (``agent.run(prompt, model_settings=...)``): a run's settings override
    the agent's, field by field.

    A setting the agent's protocol cannot take (``seed`` on the Anthropic
    Messages API, ``stop`` on the OpenAI Responses API...) fails the run with
    :class:`~condukt.providers.UnsupportedSetting`, naming the protocol,
    before any request is sent. docs/providers.md lists each protocol's
    field names. A bad value raises ``TypeError``/``ValueError`` here.
    """

    temperature: float | None = attrs.field(default=None, validator=_number("temperature", 0.0, 2.0))
    top_p: float | None = attrs.field(default=None, validator=_number("top_p", 0.0, 1.0))
    max_tokens: int | None = attrs.field(default=None, validator=_positive_int)
    stop: tuple[str, ...] | None = attrs.field(default=None, converter=_stop)
    seed: int | None = attrs.field(default=None, validator=_positive_int)

    def __attrs_post_init__(self) -> None:
        if self.top_p is not None and self.top_p == 0:
            raise ValueError("top_p must be above 0")

    def given(self) -> dict[str, Any]:
        """The settings that are set (not ``None``), by name."""
        return {name: value for name in SETTING_NAMES if (value := getattr(self, name)) is not None}

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with those ``override`` sets replacing them."""
        if override is None:
            return self
        changes = override.given()
        return attrs.evolve(self, **changes) if changes else self

    def __bool__(self) -> bool:
        return any(getattr(self, name) is not None for name in SETTING_NAMES)


def model_settings(value: Any) -> ModelSettings | None:
    """The ``model_settings`` option: ``None``, a :class:`ModelSettings`, or a mapping of its fields."""
    if value is None or isinstance(value, ModelSettings):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - set(SETTING_NAMES)
        if unknown:
            raise TypeError(
                f"model_settings: unknown setting(s) {', '.join(sorted(map(str, unknown)))}"
                f" (known: {', '.join(SETTING_NAMES)})"
            )
        return ModelSettings(**value)
    raise TypeError(f"model_settings must be a condukt.ModelSettings or a mapping, got {value!r}")
