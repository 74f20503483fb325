"""The launcher every local tool command runs under: it leaves no process behind.

Run as a script (``python -I -S _reaper.py COMMAND ARGS...``), never
imported by condukt: it must start fast and depend on nothing but the
standard library. It makes itself a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``, Linux 3.4+), so every process the command
starts stays its descendant even after ``setsid``, a double fork or
``nohup``; it then runs the command and, when the command exits or the
launcher gets ``SIGTERM``/``SIGINT``/``SIGHUP``, kills every descendant
(``SIGKILL``, repeated until none is left) and exits with the command's
status. Signals kill it as ``128 + signal`` like a shell.

Without a subreaper (not Linux, or ``prctl`` refused) it still runs the
command; the caller's process-group kill is then all there is.

``_reaper.py --stdin-grace SECONDS COMMAND...`` also watches the standard
input it shares with the command (a pipe, for an MCP server on stdio):
once its writer closes it, the command gets ``SECONDS`` to exit on its
own, then ``SIGTERM`` and as long again, then the tree is killed. A client
that closes the pipe so sees the command gone within about twice
``SECONDS`` even if it ignores the end of its input (the MCP SDK's own
client waits a fixed 2 s before it signals; benchmarks/mcp_servers.py
measures the difference). The launcher never reads the pipe: it polls it
for a hang-up only.

Hand-written because no well-kept package does this from Python without a
compiler; it costs one interpreter start per command (measured in
docs/benchmarks.md, "sandboxes").
"""

# The C module behind `signal`: the same functions and numbers, without
# importing enum, a good part of the launcher's start (benchmarks/code_choices.py).
import _signal as signal  # type: ignore[import-not-found]
import os
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36
_DEFAULT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, name))


def _subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        # _ctypes directly where it has call_function (cheaper to import than
        # ctypes: benchmarks/code_choices.py); ctypes otherwise.
        import _ctypes

        prctl = _ctypes.dlsym(_ctypes.dlopen(None), "prctl")  # type: ignore[arg-type]
        return bool(_ctypes.call_function(prctl, (_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0)
    except (ImportError, OSError, AttributeError):
        pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (one /proc scan, then the tree)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_tree() -> None:
    me = os.getpid()
    for _ in range(1000):  # each round also kills what the last one's victims forked meanwhile
        victims = _descendants(me)
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.001)  # never a blocking wait: a process forked after the scan may be alive
        _reap_all()


class _Stop(Exception):
    pass


def _exited(child: int) -> int | None:
    """The command's wait status if it exited (other descendants reaped meanwhile), else ``None``."""
    status = None
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child:
            status = raw


def _wait_with_stdin_grace(child: int, grace: float) -> int | None:
    """Wait for the command; once stdin hangs up, ``grace`` seconds, ``SIGTERM``, ``grace`` more.

    ``None`` when it outlived both (the caller kills the tree).
    """
    import select
    import stat

    poller = select.poll()
    try:
        piped = stat.S_ISFIFO(os.fstat(0).st_mode) or stat.S_ISSOCK(os.fstat(0).st_mode)
    except OSError:
        piped = False
    if piped:  # (anything else never hangs up: the grace never starts)
        poller.register(0, 0)  # no events asked: poll reports a hang-up (or an error) only
    try:
        pidfd = os.pidfd_open(child)  # Linux 5.3+
        poller.register(pidfd, select.POLLIN)
    except (AttributeError, OSError):
        pidfd = -1
    deadline = None
    terminated = False
    while True:
        status = _exited(child)
        if status is not None:
            return status
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            if terminated:
                return None
            try:
                os.kill(child, signal.SIGTERM)
            except OSError:
                pass
            terminated = True
            deadline = now + grace
            continue
        wait = None if deadline is None else deadline - now
        if pidfd < 0:  # no pidfd: look at the child every 50 ms
            wait = 0.05 if wait is None else min(wait, 0.05)
        for fd, events in poller.poll(None if wait is None else max(wait * 1000, 1)):
            if fd == 0 and events & (select.POLLHUP | select.POLLERR | select.POLLNVAL) and deadline is None:
                poller.unregister(0)
                deadline = time.monotonic() + grace


def main(argv: list[str]) -> int:
    grace = None
    if argv[:1] == ["--stdin-grace"] and len(argv) > 1:
        grace = float(argv[1])
        argv = argv[2:]
    if not argv:
        sys.stderr.write("usage: _reaper.py [--stdin-grace SECONDS] COMMAND [ARGS...]\n")
        return 2
    reaping = _subreaper()
    stop: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        stop.append(signum)
        raise _Stop

    for handled in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(handled, on_signal)
    status = None
    try:
        try:
            # Python ignores SIGPIPE; the command gets the default back, as with subprocess.
            child = os.posix_spawnp(argv[0], argv, os.environ, setsigdef=_DEFAULT_SIGNALS)
        except FileNotFoundError:
            sys.stderr.write(f"executable not found: {argv[0]}\n")
            return 127
        except PermissionError:
            sys.stderr.write(f"permission denied running {argv[0]}\n")
            return 126
        if grace is not None:
            status = _wait_with_stdin_grace(child, grace)
        while status is None and grace is None:
            try:
                pid, raw = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid == child:
                status = raw
    except _Stop:
        pass
    for handled in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(handled, signal.SIG_IGN)  # the cleanup below runs to its end
    if reaping:
        _kill_tree()
    if stop:
        return 128 + stop[0]
    if status is None:
        return 1
    if os.WIFSIGNALED(status):
        # Die of the same signal, so the caller sees what killed the command.
        signum = os.WTERMSIG(status)
        if signum != signal.SIGKILL and signum != signal.SIGSTOP:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
