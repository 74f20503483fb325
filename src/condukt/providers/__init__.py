"""Model providers: the :class:`Model` interface, the registry, and one module per wire protocol."""

from ._model import (
    THINKING_LEVELS,
    Emit,
    Model,
    ModelError,
    ModelRequest,
    ThinkingLevel,
    validate_thinking_level,
)
from ._registry import ModelFactory, UnknownProvider, register_provider, registered_providers, resolve_model

__all__ = [
    "THINKING_LEVELS",
    "Emit",
    "Model",
    "ModelError",
    "ModelFactory",
    "ModelRequest",
    "ThinkingLevel",
    "UnknownProvider",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "validate_thinking_level",
]
