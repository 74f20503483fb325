"""Model providers: the :class:`Model` interface, the registry, and one module per wire protocol.

Importing this package registers ``anthropic:`` (:mod:`.anthropic`) and
``openai:``, ``ollama:``, ``openrouter:``, ``groq:``, ``together:``,
``vllm:`` (:mod:`.openai`), so ``resolve_model("anthropic:claude-sonnet-4-5")``
works. All of them send through the node's shared ``httpx.AsyncClient``
(:func:`configure_http`) under node-wide :class:`ProviderLimits`, retry per
a :class:`RetryPolicy`, and fail with a :class:`ProviderError` subclass.
See ``docs/providers.md``.
"""

from ._errors import (
    AuthenticationFailed,
    InvalidRequest,
    InvalidResponse,
    MissingApiKey,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    StreamError,
)
from ._http import HttpSettings, configure_http, provider_limits
from ._http_model import HttpModel, StreamAssembler
from ._limits import DEFAULT_MAX_CONCURRENCY, ProviderLimits
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
from ._retry import RETRY_STATUSES, RetryPolicy
from ._sse import ServerSentEvent, SSEDecoder
from ._transport import TrioTransport
from .anthropic import AnthropicModel
from .openai import OpenAIModel, OpenAIPreset

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "RETRY_STATUSES",
    "THINKING_LEVELS",
    "AnthropicModel",
    "AuthenticationFailed",
    "Emit",
    "HttpModel",
    "HttpSettings",
    "InvalidRequest",
    "InvalidResponse",
    "MissingApiKey",
    "Model",
    "ModelError",
    "ModelFactory",
    "ModelRequest",
    "OpenAIModel",
    "OpenAIPreset",
    "ProviderError",
    "ProviderLimits",
    "ProviderUnavailable",
    "RateLimited",
    "RetryPolicy",
    "SSEDecoder",
    "ServerSentEvent",
    "StreamAssembler",
    "StreamError",
    "ThinkingLevel",
    "TrioTransport",
    "UnknownProvider",
    "configure_http",
    "provider_limits",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "validate_thinking_level",
]
