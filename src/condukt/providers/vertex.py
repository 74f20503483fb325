"""Google Vertex AI: Gemini (``"vertex:<model>"``) and Claude (``"vertex-anthropic:<model>"``).

Both speak their own protocol (:mod:`~condukt.providers.gemini`'s
``generateContent``, :mod:`~condukt.providers.anthropic`'s Messages API) at
Vertex AI's URLs, from the Vertex AI REST reference:

- Gemini: ``POST {base}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent``
  (``:streamGenerateContent?alt=sse`` when streaming);
- Claude: ``POST .../publishers/anthropic/models/{model}:rawPredict``
  (``:streamRawPredict`` when streaming), the body without ``model`` and
  with ``"anthropic_version": "vertex-2023-10-16"``; no ``anthropic-version``
  header.

``{base}`` is ``https://{location}-aiplatform.googleapis.com``, or
``https://aiplatform.googleapis.com`` for the ``global`` location;
``base_url=`` replaces it (a proxy, a local test server). The project comes
from ``project=`` or ``GOOGLE_CLOUD_PROJECT``, the location from
``location=``, ``GOOGLE_CLOUD_LOCATION`` or ``global``.

Requests carry ``Authorization: Bearer <OAuth token>``: ``token=`` (a
string, or a sync or async callable returning a string, a ``(token,
expires_at)`` pair or an object with ``token`` and ``expiry``), else ``credentials=``
(a ``google.auth`` credentials object), else Application Default
Credentials (``google-auth``, the ``[vertex]`` extra: ``gcloud auth
application-default login``, ``GOOGLE_APPLICATION_CREDENTIALS``, or the
metadata server on Google Cloud). Credentials are found and renewed in a
worker thread before a request, never at agent start (the lookup may ask
the metadata server); none found, or a token that expired and cannot be
renewed, is :class:`~condukt.providers.MissingCredentials` and no request
is sent. Errors come as Google's ``{"error": {"code", "message",
"status"}}`` (a wrong project or location: ``NOT_FOUND``/``PERMISSION_DENIED``)
or, from Claude, as Anthropic's; both are classified as for the other
providers.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from ._errors import MissingCredentials
from ._http.node import DEFAULT_BASE_URLS
from ._model import ModelRequest
from ._registry import register_provider
from ._tokens import TokenSource
from .anthropic import AnthropicModel
from .gemini import GeminiModel

__all__ = [
    "DEFAULT_LOCATION",
    "SCOPE",
    "VERTEX_ANTHROPIC_VERSION",
    "VertexAnthropicModel",
    "VertexGeminiModel",
    "vertex_anthropic_model",
    "vertex_base_url",
    "vertex_model",
]

#: The location used when neither ``location=`` nor ``GOOGLE_CLOUD_LOCATION`` says one.
DEFAULT_LOCATION = "global"
#: The OAuth scope of the tokens Application Default Credentials are asked for.
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: The ``anthropic_version`` body field Claude on Vertex AI requires.
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
#: What to do when no credentials are found.
HINT = (
    "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS to a service account key"
    " file, or pass token=... (pip install 'condukt[vertex]' for Application Default Credentials)"
)

_LOCATION = re.compile(r"^[a-z0-9-]+$")
_PROJECT = re.compile(r"^[a-z0-9.:-]+$")


def vertex_base_url(location: str) -> str:
    """Vertex AI's endpoint for ``location``: regional, or the global one."""
    if location == "global":
        return "https://aiplatform.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def _adc_fetch() -> Callable[[], tuple[str, float | None]]:
    """A blocking fetch of Application Default Credentials' token (found on first use, then renewed)."""
    found: list[Any] = []

    def fetch() -> tuple[str, float | None]:
        import google.auth  # the [vertex] extra: imported in the worker thread, on first use
        import google.auth.transport.requests

        if not found:
            credentials, _ = google.auth.default(scopes=[SCOPE])
            found.append(credentials)
        return _refreshed(found[0])

    return fetch


def _refreshed(credentials: Any) -> tuple[str, float | None]:
    """``credentials``' token, renewed first when it is not valid (blocking)."""
    if not credentials.valid:
        import google.auth.transport.requests

        credentials.refresh(google.auth.transport.requests.Request())
    expiry = credentials.expiry
    # google-auth's expiry is a naive UTC datetime.
    expires = None if expiry is None else expiry.replace(tzinfo=_utc()).timestamp()
    return credentials.token, expires


def _utc() -> Any:
    import datetime

    return datetime.timezone.utc


def token_source(provider: str, token: Any, credentials: Any) -> TokenSource:
    """Where a Vertex model's bearer tokens come from: ``token``, ``credentials``, or ADC."""
    if token is not None:
        if isinstance(token, str):
            if not token:
                raise MissingCredentials(f"{provider}: token= is empty; {HINT}")
            return TokenSource.from_callable(provider, lambda: token, HINT)
        if not callable(token):
            raise TypeError(f"{provider}: token must be a str or a callable returning one, got {token!r}")
        return TokenSource.from_callable(provider, token, HINT)
    if credentials is not None:
        if not hasattr(credentials, "refresh") or not hasattr(credentials, "valid"):
            raise TypeError(f"{provider}: credentials must be google.auth credentials, got {credentials!r}")
        return TokenSource(provider, lambda: _refreshed(credentials), HINT)
    if importlib.util.find_spec("google.auth") is None:
        raise MissingCredentials(
            f"{provider}: no token given and google-auth is not installed: pip install 'condukt[vertex]'"
            " for Application Default Credentials, or pass token=..."
        )
    return TokenSource(provider, _adc_fetch(), HINT)


def _place(provider: str, project: str | None, location: str | None) -> tuple[str, str]:
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or None
    if project is None:
        raise MissingCredentials(f"{provider}: no Google Cloud project: set GOOGLE_CLOUD_PROJECT or pass project=...")
    location = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or DEFAULT_LOCATION
    if not _PROJECT.match(project):
        raise ValueError(f"{provider}: invalid project id {project!r}")
    if not _LOCATION.match(location):
        raise ValueError(f"{provider}: invalid location {location!r}")
    return project, location


class _Vertex:
    """What Gemini and Claude on Vertex AI share: project, location, and a bearer token per request."""

    signs_requests = True
    publisher: str
    #: The method of a plain and of a streamed request.
    methods: tuple[str, str]
    project: str
    location: str
    model: str
    stream: bool
    _tokens: TokenSource

    def _setup(
        self,
        provider: str,
        project: str | None,
        location: str | None,
        token: Any,
        credentials: Any,
        options: dict[str, Any],
    ) -> None:
        self.project, self.location = _place(provider, project, location)
        self._tokens = token_source(provider, token, credentials)
        if not options.get("base_url"):
            options["base_url"] = vertex_base_url(self.location)
        options["provider"] = provider

    def endpoint_path(self) -> str:
        """``/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}``."""
        method = self.methods[1] if self.stream else self.methods[0]
        return (
            f"/v1/projects/{self.project}/locations/{self.location}"
            f"/publishers/{self.publisher}/models/{self.model}:{method}"
        )

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """None fixed: the bearer token is made per request (:meth:`request_headers`)."""
        return {}

    def secret_values(self) -> Sequence[str]:
        """The API key, if any, and the bearer token in use."""
        tokens = self._tokens
        token = None if tokens is None else tokens.current
        key: Any = getattr(self, "_api_key", None)
        return tuple(value for value in (key, token) if value)

    async def request_headers(self, body: bytes) -> Sequence[tuple[bytes, bytes]]:
        """``Authorization: Bearer <token>``, renewed in a worker thread when it is about to expire.

        Raises :class:`~condukt.providers.MissingCredentials` (the request is
        not sent) when no token can be had; cancellable, see :meth:`TokenSource.header`.
        """
        return (await self._tokens.header(),)


class VertexGeminiModel(_Vertex, GeminiModel):
    """Gemini on Vertex AI (``vertex:``): :class:`~condukt.providers.GeminiModel`'s protocol, Vertex's URL and OAuth.

    ``project``, ``location``, ``token``, ``credentials``: see the module
    docstring; other options: see :class:`~condukt.providers.lowlevel.HttpModel`.
    """

    publisher = "google"
    methods = ("generateContent", "streamGenerateContent?alt=sse")
    protocol = "Gemini generateContent (Vertex AI)"

    def __init__(
        self,
        model: str,
        *,
        project: str | None = None,
        location: str | None = None,
        token: Any = None,
        credentials: Any = None,
        **options: Any,
    ) -> None:
        self._setup(options.get("provider") or "vertex", project, location, token, credentials, options)
        super().__init__(model, **options)


class VertexAnthropicModel(_Vertex, AnthropicModel):
    """Claude on Vertex AI (``vertex-anthropic:``): the Messages API through ``rawPredict``/``streamRawPredict``.

    ``project``, ``location``, ``token``, ``credentials``: see the module
    docstring; other options: see :class:`~condukt.providers.AnthropicModel`.
    """

    publisher = "anthropic"
    methods = ("rawPredict", "streamRawPredict")
    protocol = "the Anthropic Messages API (Vertex AI)"

    def __init__(
        self,
        model: str,
        *,
        project: str | None = None,
        location: str | None = None,
        token: Any = None,
        credentials: Any = None,
        **options: Any,
    ) -> None:
        self._setup(options.get("provider") or "vertex-anthropic", project, location, token, credentials, options)
        super().__init__(model, **options)

    def head_fields(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API's fields, the model in the URL rather than the body, and ``anthropic_version``."""
        head = super().head_fields(request)
        del head["model"]
        return {"anthropic_version": VERTEX_ANTHROPIC_VERSION, **head}


def _no_api_key(provider: str, api_key: str | None) -> None:
    if api_key:
        raise ValueError(
            f"{provider}: Vertex AI takes an OAuth token, not an API key: pass token=... (or use Application"
            " Default Credentials)"
        )


def vertex_model(
    model: str, *, api_key: str | None = None, base_url: str | None = None, node: Any = None, **options: Any
) -> VertexGeminiModel:
    """The ``vertex:`` factory: raises :class:`~condukt.providers.MissingCredentials` at once without a project."""
    _no_api_key("vertex", api_key)
    return VertexGeminiModel(model, base_url=base_url, node=node, **options)


def vertex_anthropic_model(
    model: str, *, api_key: str | None = None, base_url: str | None = None, node: Any = None, **options: Any
) -> VertexAnthropicModel:
    """The ``vertex-anthropic:`` factory: :class:`~condukt.providers.MissingCredentials` at once without a project."""
    _no_api_key("vertex-anthropic", api_key)
    return VertexAnthropicModel(model, base_url=base_url, node=node, **options)


DEFAULT_BASE_URLS["vertex"] = DEFAULT_BASE_URLS["vertex-anthropic"] = vertex_base_url(DEFAULT_LOCATION)
register_provider("vertex", vertex_model, replace=True)
register_provider("vertex-anthropic", vertex_anthropic_model, replace=True)
