"""Azure OpenAI: ``"azure:<deployment>"``, Chat Completions or the Responses API on a deployment.

From the Azure OpenAI REST reference:

- The resource's endpoint (``https://<resource>.openai.azure.com``) comes
  from ``base_url=`` or ``AZURE_OPENAI_ENDPOINT``.
- ``api_version="v1"`` (the default; also from ``OPENAI_API_VERSION`` or
  ``AZURE_OPENAI_API_VERSION``): the v1 API, ``POST {endpoint}/openai/v1/chat/completions``
  (or ``/openai/v1/responses``), the deployment name as the body's
  ``model``. A dated version (``"2024-10-21"``): ``POST
  {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...``
  (the Responses API: ``/openai/responses?api-version=...``).
- ``api="chat"`` (the default) or ``api="responses"`` picks the protocol;
  the wire format is :mod:`~condukt.providers.openai`'s or
  :mod:`~condukt.providers.openai_responses`'s.
- Authentication: an ``api-key`` header (``api_key=`` or
  ``AZURE_OPENAI_API_KEY``); else a Microsoft Entra ID bearer token per
  request: ``token=`` (a string, or a sync or async callable returning a
  string, a ``(token, expires_at)`` pair or an ``AccessToken`` such as
  azure-identity's ``get_bearer_token_provider`` makes), else
  ``credential=`` (an azure-identity credential), else azure-identity's
  ``DefaultAzureCredential`` (the ``[azure]`` extra), for the scope
  :data:`SCOPE`. Tokens are fetched and renewed in a worker thread before a
  request; none to be had is :class:`~condukt.providers.MissingCredentials`,
  and no request is sent.
- Errors are OpenAI's shape, ``code`` often the status as a string
  (``"429"``) or Azure's own (``"DeploymentNotFound"``, a 404; a prompt
  the content filter blocks is a 400 with ``"content_filter"``).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal
from urllib.parse import quote

from ._errors import MissingCredentials
from ._http.keys import resolve_api_key
from ._registry import register_provider
from ._tokens import TokenSource
from .openai import OpenAIModel, OpenAIPreset
from .openai_responses import OpenAIResponsesModel

__all__ = [
    "DEFAULT_API_VERSION",
    "PRESET",
    "SCOPE",
    "AzureOpenAIModel",
    "AzureResponsesModel",
    "azure_model",
]

#: The API version when none is given: the v1 API (no ``api-version`` needed).
DEFAULT_API_VERSION = "v1"
#: The Entra ID scope of Azure OpenAI's bearer tokens.
SCOPE = "https://cognitiveservices.azure.com/.default"
#: Chat Completions on Azure: ``max_completion_tokens``, OpenAI's reasoning efforts.
PRESET = OpenAIPreset(
    "azure", "", "AZURE_OPENAI_API_KEY", minimal_effort="minimal", max_tokens_field="max_completion_tokens"
)
HINT = (
    "set AZURE_OPENAI_API_KEY, pass api_key=... or token=..., or sign in for DefaultAzureCredential"
    " (az login, or AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET; pip install 'condukt[azure]')"
)
_VERSION = re.compile(r"^(v1|preview|\d{4}-\d{2}-\d{2}(-preview)?)$")


def _credential_fetch(credential: Any) -> Callable[[], tuple[str, float | None]]:
    def fetch() -> tuple[str, float | None]:
        token = credential.get_token(SCOPE)
        return token.token, float(token.expires_on)

    return fetch


def _default_credential_fetch() -> Callable[[], tuple[str, float | None]]:
    found: list[Any] = []

    def fetch() -> tuple[str, float | None]:
        if not found:
            from azure.identity import DefaultAzureCredential  # the [azure] extra, on first use

            found.append(DefaultAzureCredential())
        return _credential_fetch(found[0])()

    return fetch


def token_source(token: Any, credential: Any) -> TokenSource | None:
    """Where Entra ID tokens come from: ``token``, ``credential``, ``DefaultAzureCredential``; ``None``: none."""
    if token is not None:
        if isinstance(token, str):
            if not token:
                raise MissingCredentials(f"azure: token= is empty; {HINT}")
            return TokenSource.from_callable("azure", lambda: token, HINT)
        if not callable(token):
            raise TypeError(f"azure: token must be a str or a callable returning one, got {token!r}")
        return TokenSource.from_callable("azure", token, HINT)
    if credential is not None:
        if not callable(getattr(credential, "get_token", None)):
            raise TypeError(f"azure: credential must have get_token(scope) (azure-identity), got {credential!r}")
        return TokenSource("azure", _credential_fetch(credential), HINT)
    if importlib.util.find_spec("azure.identity") is None:
        return None
    return TokenSource("azure", _default_credential_fetch(), HINT)


class _Azure:
    """The deployment's URL and the ``api-key`` header or an Entra ID token, for either protocol."""

    api_version: str
    deployment: str
    _tokens: TokenSource | None
    #: The path under ``/openai`` of a dated API version (``{deployment}`` filled in).
    dated_path: str
    #: The path under ``/openai/v1``.
    v1_path: str

    def _setup(self, model: str, api_version: str | None, token: Any, credential: Any, options: dict[str, Any]) -> None:
        version = api_version or os.environ.get("OPENAI_API_VERSION") or os.environ.get("AZURE_OPENAI_API_VERSION")
        version = version or DEFAULT_API_VERSION
        if not _VERSION.match(version):
            raise ValueError(f"azure: api_version must be 'v1', 'preview' or a date like '2024-10-21', got {version!r}")
        self.api_version = version
        self.deployment = model
        endpoint = options.get("base_url") or os.environ.get("AZURE_OPENAI_ENDPOINT") or None
        if endpoint is None:
            raise MissingCredentials(
                "azure: no endpoint: set AZURE_OPENAI_ENDPOINT (https://<resource>.openai.azure.com)"
                " or pass base_url=..."
            )
        endpoint = endpoint.rstrip("/")
        for suffix in ("/openai/v1", "/openai"):
            if endpoint.endswith(suffix):
                endpoint = endpoint[: -len(suffix)]
        options["base_url"] = endpoint + ("/openai/v1" if version in ("v1", "preview") else "/openai")
        options["provider"] = "azure"
        key = resolve_api_key("azure", options.pop("api_key", None), "AZURE_OPENAI_API_KEY", required=False)
        self._tokens = None
        if key is None:
            self._tokens = token_source(token, credential)
            if self._tokens is None:
                raise MissingCredentials(f"azure: no API key and no Entra ID token; {HINT}")
        elif token is not None or credential is not None:
            raise ValueError("azure: give an API key or an Entra ID token (token=/credential=), not both")
        options["api_key"] = key
        self.signs_requests = self._tokens is not None

    def endpoint_path(self) -> str:
        """``/chat/completions`` (v1 API), or the dated version's path with ``api-version``."""
        if self.api_version == "v1":
            return self.v1_path
        if self.api_version == "preview":
            return f"{self.v1_path}?api-version=preview"
        path = self.dated_path.format(deployment=quote(self.deployment, safe=""))
        return f"{path}?api-version={self.api_version}"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``api-key`` when there is a key (an Entra ID token is made per request instead)."""
        return {"api-key": api_key} if api_key else {}

    def secret_values(self) -> Sequence[str]:
        """The API key, if any, and the bearer token in use."""
        tokens = self._tokens
        token = None if tokens is None else tokens.current
        key: Any = getattr(self, "_api_key", None)
        return tuple(value for value in (key, token) if value)

    async def request_headers(self, body: bytes) -> Sequence[tuple[bytes, bytes]]:
        """``Authorization: Bearer <Entra ID token>``, renewed when about to expire (only without a key).

        Raises :class:`~condukt.providers.MissingCredentials` (the request is
        not sent) when no token can be had; cancellable before anything is sent.
        """
        tokens = self._tokens
        return () if tokens is None else (await tokens.header(),)


class AzureOpenAIModel(_Azure, OpenAIModel):
    """Chat Completions on an Azure OpenAI deployment (``azure:<deployment>``). Options: see the module docstring."""

    v1_path = "/chat/completions"
    dated_path = "/deployments/{deployment}/chat/completions"
    protocol = "Chat Completions (Azure OpenAI)"

    def __init__(
        self,
        model: str,
        *,
        api_version: str | None = None,
        token: Any = None,
        credential: Any = None,
        **options: Any,
    ) -> None:
        self._setup(model, api_version, token, credential, options)
        options.setdefault("preset", PRESET)
        super().__init__(model, **options)


class AzureResponsesModel(_Azure, OpenAIResponsesModel):
    """The Responses API on Azure OpenAI (``azure:<deployment>`` with ``api="responses"``)."""

    v1_path = "/responses"
    dated_path = "/responses"
    protocol = "the OpenAI Responses API (Azure OpenAI)"

    def __init__(
        self,
        model: str,
        *,
        api_version: str | None = None,
        token: Any = None,
        credential: Any = None,
        **options: Any,
    ) -> None:
        self._setup(model, api_version, token, credential, options)
        super().__init__(model, **options)


def azure_model(
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    node: Any = None,
    api: Literal["chat", "responses"] = "chat",
    **options: Any,
) -> AzureOpenAIModel | AzureResponsesModel:
    """The ``azure:`` factory: :class:`~condukt.providers.MissingCredentials` at once without an endpoint,
    or without a key when no Entra ID token source is given or installed."""
    if api == "chat":
        return AzureOpenAIModel(model, api_key=api_key, base_url=base_url, node=node, **options)
    if api == "responses":
        return AzureResponsesModel(model, api_key=api_key, base_url=base_url, node=node, **options)
    raise ValueError(f"azure: api must be 'chat' or 'responses', got {api!r}")


register_provider("azure", azure_model, replace=True)
