"""Extension points for code that builds on the runtime (like :mod:`trio.lowlevel`).

Application code needs none of this: :class:`~condukt.Server`,
:class:`~condukt.Handle` and the node are enough. Layers that build their
own behaviours on :class:`~condukt.Server` (condukt's agents are one) use
these names instead of reaching into the runtime's private state. They are
public and documented, with weaker stability promises than the main API.

Behaviour authors also override two hooks of :class:`~condukt.Server`:

* :meth:`Server.boot` — what the runtime runs at start (default: ``init``);
  a behaviour does its own set-up around its users' ``init`` here.
* :meth:`Server.needs_terminate` — whether ``terminate`` has work at exit
  (skipping it saves a shielded cancel scope per exit).
"""

from __future__ import annotations

from typing import Any

from ._process import Handle, Server

__all__ = ["send_system", "server_of"]


def send_system(handle: Handle, message: Any) -> None:
    """Deliver ``message`` to the process's ``handle_info`` now, past its mailbox capacity.

    For runtime-level notices whose number the sender bounds itself (one
    per run, per monitor, per timer): they must neither block nor fail on a
    full mailbox. A message to a process that has exited is dropped.
    Synchronous: never blocks, never raises.
    """
    handle._system(message)


def server_of(handle: Handle) -> Server | None:
    """The :class:`Server` instance a live process runs, or ``None`` once it has exited.

    For a behaviour's own handle class (an agent's handle reading its
    agent's state). The instance belongs to the process: read it, do not
    call its callbacks from outside.
    """
    return handle._server
