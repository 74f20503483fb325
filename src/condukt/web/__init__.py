"""Agents and operations as an HTTP endpoint: ``condukt.web.create_app`` (extra ``[web]``).

::

    app = condukt.web.create_app(agents={"reviewer": ReviewAgent},
                                 operations=[ReviewAgent.review_pr], token=os.environ["API_TOKEN"])

returns a Starlette ASGI app with the routes of ``docs/http.md``: runs as
JSON or Server-Sent Events, sessions (one agent process per conversation,
under a dynamic supervisor whose restart intensity is per child), steer,
abort, history, delete, typed operations, ``/openapi.json`` and
``/healthz``; with ``observer=True`` the live dashboard of the node
(:mod:`condukt.web.observer`). Served natively on trio (``hypercorn -k trio``, or
:func:`hypercorn.trio.serve`) or on asyncio (uvicorn) through
:mod:`condukt.asyncio`: the same app object on both.

:class:`BrowserGuard` is the ASGI middleware every condukt HTTP surface
puts in front of its routes: it refuses what a hostile web page can make
a browser on the same machine send (a foreign ``Host`` after DNS
rebinding, a foreign ``Origin``, a body that is not JSON).

The ecosystem's protocols, each an ASGI app of its own (``docs/openai.md``,
``docs/ag-ui.md``, ``docs/vercel-ai.md``; A2A is :mod:`condukt.a2a`):
:func:`openai_app` (the OpenAI API: models, chat completions, responses),
:func:`ag_ui_app` (AG-UI, extra ``[ag-ui]``) and :func:`vercel_ai_app` (the
AI SDK's UI message stream).
"""

from __future__ import annotations

from typing import Any

try:
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("condukt.web needs Starlette: install the extra, `pip install 'condukt[web]'`") from exc

from starlette.applications import Starlette

from ._app import create_app, drain
from ._guard import BrowserGuard
from ._openai import openai_app
from ._sessions import SessionsFull
from ._vercel import vercel_ai_app

try:
    from ._ag_ui import ag_ui_app
except ImportError as _missing:  # pragma: no cover - depends on the environment
    _reason = _missing

    def ag_ui_app(*args: Any, **kwargs: Any) -> Starlette:  # type: ignore[misc]
        """Needs ``ag-ui-protocol``: the extra ``[ag-ui]`` (see ``docs/ag-ui.md``)."""
        raise ImportError("condukt.web.ag_ui_app needs ag-ui-protocol: `pip install 'condukt[ag-ui]'`") from _reason


__all__ = ["BrowserGuard", "SessionsFull", "ag_ui_app", "create_app", "drain", "openai_app", "vercel_ai_app"]
