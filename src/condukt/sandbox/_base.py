"""The sandbox interface: how tools run commands and which paths they may touch."""

from __future__ import annotations

import abc
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
import trio

from ..otp import ConduktError

__all__ = [
    "BASE_ENV",
    "CREDENTIAL_NAME",
    "SAFE_ENV_VARS",
    "ProcessResult",
    "Sandbox",
    "SandboxError",
    "redact_host_credentials",
]

#: Host variables a tool command inherits (when set), unless a sandbox's
#: ``inherit`` option adds more. Everything else stays out: an allowlist,
#: so credentials with unusual names (``DATABASE_URL``, ``SSH_AUTH_SOCK``)
#: never reach a command by accident.
SAFE_ENV_VARS = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES",
    "LC_COLLATE", "LC_NUMERIC", "LC_TIME", "TZ", "TMPDIR", "TMP", "TEMP",
)  # fmt: skip

#: Set for every tool command: no pagers, no terminal escapes.
BASE_ENV = {"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}

#: Host variable names whose values are redacted from command output, even
#: though they are never passed on (a command can still find them, e.g. in
#: another process's ``/proc/<pid>/environ`` outside a sandbox): ``*KEY*``,
#: ``*TOKEN*``, ``*SECRET*``, ``*PASSW*`` (``PASSWORD``, ``PASSWD``),
#: ``*PASSPHRASE*``, ``PASS`` and ``*_PASS``/``PASS_*``, ``*_PWD``
#: (``MYSQL_PWD``; not the shell's ``PWD``/``OLDPWD``), ``*CREDENTIAL*``,
#: ``*AUTH*``, ``*COOKIE*``, ``*SESSION*``, ``DSN``/``*_DSN``, ``*_URL``, ``*_URI``.
CREDENTIAL_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|(?:^|_)PASS(?:_|$)|_PWD(?:_|$)|CREDENTIAL|AUTH|COOKIE|SESSION"
    r"|(?:^|_)DSN(?:_|$)|_URL$|_URI$",
    re.IGNORECASE,
)

#: A URL whose userinfo holds a password (``postgres://user:password@host``): whatever the variable's
#: name, its value (and the password alone) is redacted too.
_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://[^\s/?#@:]*:([^\s/?#@]+)@", re.IGNORECASE)

#: Values shorter than this are not redacted: they would mangle ordinary text.
_MIN_REDACT = 4
_DRAIN_GRACE = 2.0  # seconds to collect output once the command is gone
_STOP_GRACE = 2.0  # seconds a launcher gets to kill its tree before SIGKILL


class SandboxError(ConduktError):
    """A sandbox refused an operation (a path outside its view) or cannot start.

    Built-in tools report it to the model as a tool error.
    """


@attrs.frozen
class ProcessResult:
    """What a finished command produced: stdout and stderr combined, bounded.

    ``output`` holds at most ``max_output`` bytes of it (decoded as UTF-8,
    host credential values redacted), ``total_bytes`` how much there was.
    ``exit_code`` is negative for a signal, ``None`` after a timeout.
    """

    output: str
    exit_code: int | None
    timed_out: bool
    total_bytes: int


def redact_host_credentials(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with host credentials replaced by ``[REDACTED:NAME]``.

    A credential is the value of a variable named like one
    (:data:`CREDENTIAL_NAME`), or a value holding a URL with a password in
    its userinfo (``postgres://user:password@host``, whatever the name),
    whose password alone is redacted too. Values shorter than 4 characters
    are left alone (they would mangle ordinary text).
    """
    for name, value in (os.environ if environ is None else environ).items():
        if len(value) < _MIN_REDACT:
            continue
        passwords = [p for p in _USERINFO.findall(value) if len(p) >= _MIN_REDACT] if "://" in value else []
        if not passwords and not CREDENTIAL_NAME.search(name):
            continue
        for form in (value, *passwords):  # the whole value first: it contains the password
            if form in text:
                text = text.replace(form, f"[REDACTED:{name}]")
    return text


class Sandbox(abc.ABC):
    """Where an agent's tools run commands and touch files.

    Built-in tools call :meth:`run` for every command (``Bash``, ``Command``,
    the ``Grep`` and ``Glob`` scanners) and :meth:`check_path` before every
    file access. A backend implements :meth:`command` (the argv that runs a
    command inside it) and may override :meth:`check_path` and
    :meth:`environment`; :meth:`run` then starts, bounds, and kills the
    command the same way for all. ``env`` adds fixed variables to every
    command; ``inherit`` names extra host variables to pass through.
    """

    def __init__(self, *, env: Mapping[str, str] | None = None, inherit: Sequence[str] = ()) -> None:
        if isinstance(inherit, str):
            raise TypeError("inherit must be a list of variable names, not a str")
        self.env = {_check_name(k): str(v) for k, v in (env or {}).items()}
        self.inherit = tuple(_check_name(name) for name in inherit)

    @abc.abstractmethod
    def command(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], tree: bool = True) -> list[str]:
        """The argv that runs ``argv`` in ``cwd`` with exactly ``env``, inside this sandbox.

        ``tree=False`` promises the command starts no processes of its own
        (condukt's own scanners): a backend may then skip what it does to
        clean up after them.
        """

    def stop_signal(self) -> int:
        """The signal that asks the started process to stop its whole tree (see :meth:`run`)."""
        return signal.SIGTERM

    def check_path(self, path: Path, *, cwd: Path, write: bool = False) -> None:
        """Raise :class:`SandboxError` if tools of an agent in ``cwd`` may not read (or ``write``) ``path``.

        ``path`` is absolute. The base class allows everything.
        """
        return None

    def environment(self, granted: Mapping[str, str] | None = None) -> dict[str, str]:
        """A command's environment: allowlisted host variables, :data:`BASE_ENV`, ``env``, then ``granted``."""
        names = SAFE_ENV_VARS + self.inherit
        env = {name: os.environ[name] for name in names if name in os.environ}
        env.update(BASE_ENV)
        env.update(self.env)
        if granted:
            env.update(granted)
        return env

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str],
        timeout: float,
        max_output: int = 4 * 50 * 1024,
        stdin: bytes | None = None,
        tree: bool = True,
    ) -> ProcessResult:
        """Run ``argv`` in ``cwd`` with exactly ``env``; collect its combined output.

        Raises :class:`SandboxError` if it cannot start (missing executable or
        directory). After ``timeout`` seconds, or when cancelled (an abort, a
        run timeout), the sandbox stops the command and everything it
        started (:meth:`stop_signal`, then ``SIGKILL`` to the process group
        after a grace period) and waits for it before returning or letting
        ``Cancelled`` propagate. ``stdin``: bytes fed to the command (none:
        ``/dev/null``). ``tree``: see :meth:`command`.
        """
        cwd = Path(cwd)
        if not cwd.is_dir():
            raise SandboxError(f"directory not found: {cwd}")
        program = argv[0] if argv else ""
        if os.sep in program:
            found = os.path.isfile(program) and os.access(program, os.X_OK)
        else:
            found = bool(program) and shutil.which(program, path=env.get("PATH", "")) is not None
        if not found:
            raise SandboxError(f"executable not found: {program}")
        full = self.command(argv, cwd=cwd, env=env, tree=tree)
        try:
            process = await trio.lowlevel.open_process(
                full,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=os.fspath(cwd),
                env=dict(env),
                start_new_session=True,
            )
        except FileNotFoundError:
            raise SandboxError(f"executable not found: {full[0]}") from None
        except PermissionError:
            raise SandboxError(f"permission denied running {full[0]}") from None
        buffer = bytearray()
        total = 0
        drained = trio.Event()
        stdout = process.stdout
        assert stdout is not None

        async def read() -> None:
            nonlocal total
            try:
                while True:
                    chunk = await stdout.receive_some(65536)
                    if not chunk:
                        break
                    total += len(chunk)
                    room = max_output - len(buffer)
                    if room > 0:
                        buffer.extend(chunk[:room])
            except trio.ClosedResourceError:
                pass
            finally:
                drained.set()

        async def feed() -> None:
            assert process.stdin is not None and stdin is not None
            try:
                await process.stdin.send_all(stdin)
                await process.stdin.aclose()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

        timed_out = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                if stdin is not None:
                    nursery.start_soon(feed)
                with trio.move_on_after(timeout) as scope:
                    await process.wait()
                timed_out = scope.cancelled_caught
                if timed_out:
                    await _stop(process, self.stop_signal())
                _kill_group(process)  # stragglers, where no launcher reaps them
                with trio.move_on_after(_DRAIN_GRACE):
                    await drained.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    await _stop(process, self.stop_signal())
                _kill_group(process)
                await process.wait()
                await stdout.aclose()
                if process.stdin is not None:
                    await process.stdin.aclose()
        text = redact_host_credentials(buffer.decode("utf-8", "replace"))
        return ProcessResult(text, None if timed_out else process.returncode, timed_out, total)


async def _stop(process: trio.Process, signum: int) -> None:
    """Ask ``process`` to stop its tree with ``signum``; ``SIGKILL`` its group if it takes too long."""
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        return
    with trio.move_on_after(_STOP_GRACE):
        await process.wait()
    _kill_group(process)


def _kill_group(process: trio.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid environment variable name")
    return name
