"""What other surfaces build on (``condukt.a2a``): the web endpoint's sessions and protocol plumbing.

Weaker stability promises than :mod:`condukt.web` (as ``trio.lowlevel``):

* :class:`Sessions`: one agent process per conversation under a dynamic
  supervisor, found again after a restart, expired when idle;
  :class:`AgentRoute` is what a session starts.
* :class:`ProtocolError`, :func:`read_json`, :func:`bearer_ok`,
  :func:`decode_data_url`, :func:`attachment`: bounded JSON bodies, bearer
  tokens, data URLs, the errors adapters render in their protocol's shape.
* :func:`run_failure` / :func:`event_failure`: the HTTP status and code for
  a failed run (an exception, or a stream's ``Error`` event).
* :func:`guard_middleware`: the :class:`~condukt.web.BrowserGuard` entry of a
  Starlette app's middleware, its options checked at once.
"""

from __future__ import annotations

from ._guard import guard_middleware
from ._protocol import (
    AppNode,
    ProtocolError,
    attachment,
    bearer_ok,
    decode_data_url,
    event_failure,
    read_json,
    run_failure,
)
from ._sessions import AgentRoute, Sessions, SessionsFull

__all__ = [
    "AgentRoute",
    "AppNode",
    "ProtocolError",
    "Sessions",
    "SessionsFull",
    "attachment",
    "bearer_ok",
    "decode_data_url",
    "event_failure",
    "guard_middleware",
    "read_json",
    "run_failure",
]
