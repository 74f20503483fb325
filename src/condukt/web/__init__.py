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
"""

from __future__ import annotations

try:
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("condukt.web needs Starlette: install the extra, `pip install 'condukt[web]'`") from exc

from ._app import create_app
from ._guard import BrowserGuard
from ._sessions import SessionsFull

__all__ = ["BrowserGuard", "SessionsFull", "create_app"]
