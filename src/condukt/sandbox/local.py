"""The ``Local`` sandbox: commands run on the host, as the node's user, with a clean tree."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._base import Sandbox

__all__ = ["Local"]

_REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_reaper.py")


class Local(Sandbox):
    """No isolation: commands see the host's files and network as the node's user.

    What it does guarantee: the command's environment is an allowlist
    (:data:`~condukt.sandbox.SAFE_ENV_VARS` plus ``inherit``, ``env`` and the
    tool's grants); it runs under a small launcher (``reap=True``, the
    default) that is a child subreaper on Linux, so everything it started,
    ``setsid`` and double-forked daemons included, is killed when it ends,
    times out or is aborted; the launcher's own environment is that
    allowlist, so ``/proc/$PPID/environ`` shows nothing more. What it cannot
    prevent: a command running as the same user can read any process's
    ``/proc/<pid>/environ`` (the node's included) and any file the user can.
    Use :class:`~condukt.sandbox.Bubblewrap` for a boundary.

    ``reap=False`` skips the launcher (one interpreter start, 20-25 ms a
    command): only the command's process group is killed then, as on
    platforms without a subreaper (macOS, Windows).
    """

    def __init__(self, *, reap: bool = True, env: Mapping[str, str] | None = None, inherit: Sequence[str] = ()) -> None:
        super().__init__(env=env, inherit=inherit)
        if not isinstance(reap, bool):
            raise TypeError(f"reap must be a bool, got {type(reap).__name__}")
        self.reap = reap and sys.platform.startswith("linux")

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        tree: bool = True,
        stdin_grace: float | None = None,
    ) -> list[str]:
        """``argv`` itself, or under the reaping launcher (``python -I -S _reaper.py argv...``).

        ``stdin_grace``: once the command's standard input (a pipe) is
        closed by its writer, the launcher gives the command that many
        seconds to exit, then ``SIGTERM`` and as long again, then kills its
        tree (for servers spoken to over stdin, such as MCP servers).
        """
        if not self.reap or not tree:
            return list(argv)
        grace = () if stdin_grace is None else ("--stdin-grace", repr(float(stdin_grace)))
        return [sys.executable, "-I", "-S", _REAPER, *grace, *argv]

    def stop_signal(self) -> int:
        """``SIGTERM`` for the launcher (it kills the tree, then exits); ``SIGKILL`` without one."""
        return signal.SIGTERM if self.reap else signal.SIGKILL

    def __repr__(self) -> str:
        return f"Local(reap={self.reap})"
