"""condukt agents over A2A, the Agent2Agent protocol (extra ``[a2a]``, on the official ``a2a-sdk``).

* :func:`asgi_app` serves an agent: its card at
  ``/.well-known/agent-card.json``, JSON-RPC at the root (``message/send``,
  ``message/stream``, ``tasks/get``, ``tasks/cancel``...). An A2A
  ``contextId`` is a condukt session; each message is a task, one run of it.
* :func:`remote` is a tool that sends a message to a remote A2A agent and
  returns its answer, with a timeout; cancelling the call (the agent's
  abort, the tool's timeout) cancels the remote task.

See ``docs/a2a.md``.
"""

from __future__ import annotations

try:
    import a2a  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("condukt.a2a needs a2a-sdk: install the extra, `pip install 'condukt[a2a]'`") from exc

from ._remote import RemoteAgent, remote
from ._server import asgi_app

__all__ = ["RemoteAgent", "asgi_app", "remote"]
