"""The ``Bubblewrap`` sandbox: Linux namespaces through the ``bwrap`` program."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._base import Sandbox, SandboxError

__all__ = ["Bubblewrap", "SYSTEM_PATHS"]

#: Host directories every sandboxed command sees, read-only (those that exist).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
#: The sandbox's home directory and temporary directory (a private tmpfs).
SANDBOX_HOME = "/tmp/home"
_CONDUKT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Bubblewrap(Sandbox):
    """Commands run in fresh Linux namespaces made by ``bwrap`` (Debian package ``bubblewrap``).

    Each command gets a private PID namespace and ``/proc`` (it sees only its
    own processes, and when it ends, times out or is aborted every process
    in it is gone), a private ``/tmp`` (``HOME`` is ``/tmp/home``), no
    network unless ``network=True`` (only its own loopback), the system
    directories (:data:`SYSTEM_PATHS`) and the Python that runs condukt
    read-only, ``readable`` paths read-only, and the working directory plus
    ``writable`` paths read-write; nothing else of the host exists inside.
    Session files under ``<cwd>/.condukt`` are hidden behind an empty
    directory. The environment is the allowlist (see
    :meth:`~condukt.sandbox.Sandbox.environment`): no host credential is
    visible by any means, ``/proc/*/environ`` included. The built-in file
    tools apply the same view: reading outside it, or writing outside the
    writable paths, is refused.

    It needs unprivileged user namespaces (or root); :meth:`available` says
    whether ``bwrap`` runs here.
    """

    def __init__(
        self,
        *,
        network: bool = False,
        writable: Sequence[str | os.PathLike[str]] = (),
        readable: Sequence[str | os.PathLike[str]] = (),
        env: Mapping[str, str] | None = None,
        inherit: Sequence[str] = (),
        executable: str = "bwrap",
    ) -> None:
        super().__init__(env=env, inherit=inherit)
        if not isinstance(network, bool):
            raise TypeError(f"network must be a bool, got {type(network).__name__}")
        self.network = network
        self.writable = _paths("writable", writable)
        self.readable = _paths("readable", readable)
        self.executable = executable
        python = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
        self._system = tuple(p for p in SYSTEM_PATHS if os.path.exists(p)) + tuple(sorted(python)) + (_CONDUKT_DIR,)

    @classmethod
    def available(cls, executable: str = "bwrap") -> bool:
        """Whether ``bwrap`` is installed and can make namespaces on this machine."""
        program = shutil.which(executable)
        if program is None:
            return False
        import subprocess

        try:
            done = subprocess.run(
                [program, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
                capture_output=True,
                timeout=10,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0

    def environment(self, granted: Mapping[str, str] | None = None) -> dict[str, str]:
        """The allowlist, with ``HOME`` and ``TMPDIR`` inside the sandbox."""
        env = super().environment(granted)
        env["HOME"] = SANDBOX_HOME
        env["TMPDIR"] = "/tmp"
        for name in ("TMP", "TEMP"):
            env.pop(name, None)
        return env

    def command(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], tree: bool = True) -> list[str]:
        """``bwrap`` with this sandbox's namespaces and mounts, then ``argv``."""
        program = shutil.which(self.executable)
        if program is None:
            raise SandboxError(
                f"{self.executable} not found: the Bubblewrap sandbox needs it "
                "(Debian/Ubuntu: apt-get install bubblewrap)"
            )
        # No --new-session: the command has no terminal (condukt starts bwrap in a new session),
        # and staying in bwrap's process group lets one group kill reach every process of it.
        args = [program, "--die-with-parent", "--unshare-all"]
        if self.network:
            args.append("--share-net")
        # The private /tmp first: binds made after it may live under /tmp (a
        # virtualenv or a working directory there), and would be hidden by it.
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
        for path in self._system:
            args += ["--ro-bind-try", path, path]
        for path in self.readable:
            args += ["--ro-bind", path, path]
        root = str(cwd)
        for path in (root, *self.writable):
            args += ["--bind", path, path]
        hidden = os.path.join(root, ".condukt")
        if os.path.isdir(hidden):
            args += ["--tmpfs", hidden, "--remount-ro", hidden]
        args += ["--chdir", root, "--"]
        args.extend(argv)
        return args

    def stop_signal(self) -> int:
        """``SIGKILL``: ``bwrap`` dies, and with it (``--die-with-parent``) its PID namespace."""
        return signal.SIGKILL

    def check_path(self, path: Path, *, cwd: Path, write: bool = False) -> None:
        """Refuse paths outside the sandbox's view (or its writable paths, for ``write``) and session files."""
        real = os.path.realpath(path)
        root = os.path.realpath(cwd)
        if _inside(real, os.path.join(root, ".condukt")):
            raise SandboxError(f"{path} is the agents' session storage: the sandbox hides it")
        roots = (root, *self.writable) if write else (root, *self._system, *self.readable, *self.writable)
        if any(_inside(real, r) for r in roots):
            return
        what = "written" if write else "read"
        raise SandboxError(f"{path} cannot be {what}: it is outside the sandbox")

    def __repr__(self) -> str:
        return f"Bubblewrap(network={self.network}, writable={list(self.writable)}, readable={list(self.readable)})"


def _paths(name: str, values: Sequence[str | os.PathLike[str]]) -> tuple[str, ...]:
    if isinstance(values, (str, os.PathLike)):
        raise TypeError(f"{name} must be a list of paths, not one path")
    out = []
    for value in values:
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{name} must hold paths (str or os.PathLike), got {value!r}")
        path = os.path.realpath(os.path.expanduser(os.fspath(value)))
        if not os.path.exists(path):
            raise ValueError(f"{name} path {path} does not exist")
        out.append(path)
    return tuple(out)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
