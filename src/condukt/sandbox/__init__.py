"""Sandboxes: where an agent's tools run commands and which files they may touch.

Set one per agent with the ``sandbox=`` start option (or class attribute)::

    await node.spawn(MyAgent, sandbox=condukt.sandbox.Bubblewrap(network=False))

- :class:`Local` (the default): commands run on the host, as the node's user,
  with an allowlisted environment and no process left behind.
- :class:`Bubblewrap`: Linux namespaces through ``bwrap``: private PID
  namespace and ``/proc``, read-only system, only the working directory
  writable, no network unless allowed.

Every built-in tool goes through the agent's sandbox (``Bash``, ``Command``,
``Grep`` and ``Glob`` run their work with :meth:`Sandbox.run`; ``Read``,
``Write`` and ``Edit`` ask :meth:`Sandbox.check_path`); a user tool reaches it
as ``context.sandbox``. A new backend (a container, a remote machine)
subclasses :class:`Sandbox`. docs/sandboxes.md says what each guarantees.
"""

from ._base import (
    BASE_ENV,
    CREDENTIAL_NAME,
    SAFE_ENV_VARS,
    ProcessResult,
    Sandbox,
    SandboxError,
    redact_host_credentials,
)
from .bubblewrap import Bubblewrap
from .local import Local

__all__ = [
    "BASE_ENV",
    "CREDENTIAL_NAME",
    "SAFE_ENV_VARS",
    "Bubblewrap",
    "Local",
    "ProcessResult",
    "Sandbox",
    "SandboxError",
    "redact_host_credentials",
]
