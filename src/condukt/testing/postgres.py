"""A throw-away PostgreSQL server for tests and benchmarks of :class:`~condukt.sessions.PostgresStore`.

:class:`PostgresServer` runs ``initdb`` into a new temporary directory and
``postgres`` on 127.0.0.1 and a free port, with ``fsync=off`` (a test's data
need not survive a power loss) and trust authentication for a superuser
named ``condukt``. It uses the PostgreSQL binaries on ``PATH`` or under
``/usr/lib/postgresql/<version>/bin`` (Debian's ``postgresql`` package).
PostgreSQL refuses to run as root: as root, the server runs as the
``postgres`` user when there is one, else as ``nobody``.

    server = PostgresServer()
    server.start()                # initdb on the first start, then pg_ctl start -w
    store = PostgresStore(server.dsn)
    ...
    server.stop()                 # or server.kill() (immediate), server.start() again
    server.remove()               # stop it and delete its directory

Every method blocks (it runs ``pg_ctl``, which waits until the server
accepts connections or has stopped): call them from synchronous code, or
through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from ..otp import ConduktError

__all__ = ["PostgresNotFound", "PostgresServer", "find_binaries"]


class PostgresNotFound(ConduktError, RuntimeError):
    """No PostgreSQL server binaries (``initdb``, ``pg_ctl``, ``postgres``) on this machine (a ``RuntimeError`` too)."""


def find_binaries() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Looks on ``PATH`` first, then in the newest ``/usr/lib/postgresql/*/bin``.
    Raises :class:`PostgresNotFound` saying where it looked.
    """
    on_path = shutil.which("pg_ctl")
    candidates = [Path(on_path).resolve().parent] if on_path else []
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    candidates += [Path(found) for found in versions]
    for directory in candidates:
        if all((directory / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    raise PostgresNotFound(
        "PostgreSQL server binaries not found (initdb, pg_ctl, postgres on PATH or in "
        "/usr/lib/postgresql/*/bin): install the Debian package postgresql"
    )


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _run_as() -> pwd.struct_passwd | None:
    """The user to run PostgreSQL as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresNotFound("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as")


class PostgresServer:
    """One PostgreSQL server in its own temporary directory; see the module docstring.

    ``tls``: a ``(certificate_pem, private_key_pem)`` pair of bytes turns on
    ``ssl`` with that certificate (clients then connect with ``sslmode=``...).
    ``settings``: more ``postgres -c`` settings.
    """

    def __init__(self, *, tls: tuple[bytes, bytes] | None = None, settings: dict[str, str] | None = None) -> None:
        self.bin = find_binaries()
        self._user = _run_as()
        self.directory = Path(tempfile.mkdtemp(prefix="condukt-pg-"))
        self.data = self.directory / "data"
        self.log = self.directory / "postgres.log"
        self.port = _free_port()
        self._tls = tls
        self._settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": "",
            "fsync": "off",
            "full_page_writes": "off",
            "max_connections": "300",
            **(settings or {}),
        }
        self._initialised = False
        if self._user is not None:
            os.chown(self.directory, self._user.pw_uid, self._user.pw_gid)
            os.chmod(self.directory, 0o700)

    @property
    def dsn(self) -> str:
        """A libpq connection string for the superuser ``condukt`` and the ``postgres`` database."""
        return f"host=127.0.0.1 port={self.port} user=condukt dbname=postgres connect_timeout=10"

    def start(self) -> None:
        """Create the cluster on the first call, then start the server and wait until it accepts connections."""
        if not self._initialised:
            self._pg("initdb", "-D", str(self.data), "-U", "condukt", "--auth=trust", "-E", "UTF8", "--no-sync")
            if self._tls is not None:
                self._write_private(self.data / "server.crt", self._tls[0])
                self._write_private(self.data / "server.key", self._tls[1])
                self._settings.update(ssl="on", ssl_cert_file="server.crt", ssl_key_file="server.key")
            self._initialised = True
        settings = self._settings.items()
        options = " ".join(f"-c {name}={value!s}" if value else f"-c {name}=''" for name, value in settings)
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start")

    def stop(self) -> None:
        """Stop the server (``fast``: sessions are disconnected, then a clean shutdown)."""
        self._pg("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-m", "fast", "stop")

    def kill(self) -> None:
        """Stop the server at once, as a crash would (``immediate``: no checkpoint, recovery on the next start)."""
        self._pg("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-m", "immediate", "stop")

    def running(self) -> bool:
        """Whether the server is running (``pg_ctl status``)."""
        if not self._initialised:
            return False
        return self._pg("pg_ctl", "-D", str(self.data), "status", check=False) == 0

    def remove(self) -> None:
        """Stop the server if it runs, and delete its directory."""
        if self.running():
            self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def log_text(self) -> str:
        """What the server logged so far."""
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _write_private(self, path: Path, data: bytes) -> None:
        path.write_bytes(data)
        path.chmod(0o600)
        if self._user is not None:
            os.chown(path, self._user.pw_uid, self._user.pw_gid)

    def _pg(self, program: str, *args: str, check: bool = True) -> int:
        user = self._user
        completed = subprocess.run(
            [str(self.bin / program), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.directory,
            user=None if user is None else user.pw_uid,
            group=None if user is None else user.pw_gid,
            extra_groups=None if user is None else [],
            env={**os.environ, "LC_ALL": "C", **({} if user is None else {"HOME": str(self.directory)})},
            timeout=120,
        )
        if check and completed.returncode != 0:
            output = completed.stdout.decode(errors="replace")
            raise RuntimeError(f"{program} failed ({completed.returncode}): {output}\n{self.log_text()}")
        return completed.returncode
