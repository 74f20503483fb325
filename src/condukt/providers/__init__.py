"""Model providers: the :class:`Model` interface, the registry, and one module per wire protocol.

Importing this package registers ``anthropic:`` (:mod:`.anthropic`),
``gemini:`` (:mod:`.gemini`), ``openai-responses:`` (:mod:`.openai_responses`),
``openai:``, ``ollama:``, ``openrouter:``, ``groq:``, ``together:``,
``vllm:``, ``mistral:``, ``xai:``, ``deepseek:`` (:mod:`.openai`),
``azure:`` (:mod:`.azure`), ``vertex:`` and ``vertex-anthropic:``
(:mod:`.vertex`) and ``bedrock:`` (:mod:`.bedrock`), so ``resolve_model("anthropic:claude-sonnet-4-5")``
works. All of them send through the node's shared ``httpx.AsyncClient``
(:func:`configure_http`) under node-wide :class:`ProviderLimits`, retry per
a :class:`RetryPolicy`, and fail with a :class:`ProviderError` subclass.
See ``docs/providers.md``.
"""

from typing import Any

from . import lowlevel
from ._errors import (
    AuthenticationFailed,
    CorruptFrame,
    EmptyPrompt,
    InvalidRequest,
    InvalidResponse,
    MissingApiKey,
    MissingCredentials,
    ModelRefused,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    StreamError,
    UnsupportedContent,
    UnsupportedSetting,
)
from ._fallback import DEFAULT_FALLBACK_ON, Fallback
from ._http.limits import ADAPTIVE, DEFAULT_MAX_CONCURRENCY, ProviderLimits
from ._http.node import HttpSettings, configure_http, provider_limits
from ._http.retry import RETRY_STATUSES, RetryPolicy
from ._model import (
    THINKING_LEVELS,
    Emit,
    Model,
    ModelError,
    ModelRequest,
    ThinkingLevel,
    validate_thinking_level,
)
from ._prices import Price
from ._registry import ModelFactory, UnknownProvider, register_provider, registered_providers, resolve_model
from ._settings import ModelSettings
from .anthropic import AnthropicModel
from .azure import AzureOpenAIModel, AzureResponsesModel
from .bedrock import BedrockModel
from .gemini import GeminiModel
from .openai import OpenAIModel, OpenAIPreset
from .openai_responses import OpenAIResponsesModel
from .vertex import VertexAnthropicModel, VertexGeminiModel

__all__ = [
    "ADAPTIVE",
    "DEFAULT_FALLBACK_ON",
    "DEFAULT_MAX_CONCURRENCY",
    "RETRY_STATUSES",
    "THINKING_LEVELS",
    "AnthropicModel",
    "AuthenticationFailed",
    "AzureOpenAIModel",
    "AzureResponsesModel",
    "BedrockModel",
    "CorruptFrame",
    "Emit",
    "EmptyPrompt",
    "Fallback",
    "GeminiModel",
    "HttpSettings",
    "InvalidRequest",
    "InvalidResponse",
    "MissingApiKey",
    "MissingCredentials",
    "Model",
    "ModelError",
    "ModelFactory",
    "ModelRefused",
    "ModelRequest",
    "ModelSettings",
    "OpenAIModel",
    "OpenAIPreset",
    "OpenAIResponsesModel",
    "Price",
    "ProviderError",
    "ProviderLimits",
    "ProviderUnavailable",
    "RateLimited",
    "RetryPolicy",
    "StreamError",
    "ThinkingLevel",
    "UnknownProvider",
    "UnsupportedContent",
    "UnsupportedSetting",
    "VertexAnthropicModel",
    "VertexGeminiModel",
    "configure_http",
    "lowlevel",
    "provider_limits",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "validate_thinking_level",
]


def __getattr__(name: str) -> Any:
    # Moved to condukt.providers.lowlevel; still found here, with a warning.
    if name in lowlevel.__all__:
        import warnings

        warnings.warn(
            f"condukt.providers.{name} moved to condukt.providers.lowlevel.{name}", DeprecationWarning, stacklevel=2
        )
        return getattr(lowlevel, name)
    raise AttributeError(f"module 'condukt.providers' has no attribute {name!r}")
