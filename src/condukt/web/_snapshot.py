"""The observer's data: a snapshot of a node's live supervision tree (trio side).

Everything is read through public APIs: ``node.root``, the supervisors'
``child_info()``, :func:`condukt.otp.lowlevel.process_of` (status, mailbox)
and :meth:`condukt.AgentHandle.info` (run, turn, tokens, tool calls).
Taking a snapshot never awaits, so it sees one consistent moment of the
node (trio runs one task at a time).
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

import attrs

from ..agent import AgentHandle
from ..messages import Usage
from ..otp import ChildExit, ChildInfo, ConduktError, DynamicSupervisorHandle, Handle, Node, SupervisorHandle
from ..otp.lowlevel import process_of

__all__ = ["AgentView", "ExitView", "ProcessView", "RunView", "Snapshot", "SupervisorView", "take_snapshot"]

#: How many agents' session ids a snapshot remembers by pid after they exit (to name a crashed one's log).
REMEMBERED_SESSIONS = 50_000

#: Prompts are cut to this many characters in a snapshot (the event log has them whole).
PROMPT_CHARS = 200


@attrs.frozen
class RunView:
    """An agent's run in progress: id (what abort takes), prompt (scrubbed, cut), turn, tokens so far,
    the tool calls in flight (``[id, name]``) and when it started (seconds since the epoch)."""

    id: str
    prompt: str
    turn: int
    usage: Usage
    tool_calls: tuple[tuple[str, str], ...]
    started: float


@attrs.frozen
class AgentView:
    """An agent's state: session id, lifecycle state, runs queued, and the run in progress."""

    session_id: str
    state: str
    queued: int
    run: RunView | None


@attrs.frozen
class ExitView:
    """A crash report: one exit of a child (abnormal, or followed by a restart), from its supervisor.

    ``pid``: the incarnation that exited; ``reason``: the exit reason as
    text (``"killed"``, ``"RuntimeError: boom"``); ``error_type``: the
    exception's class name for a crash, else ``None``; ``traceback``: the
    crash's traceback (its end), else ``None``; ``time``: seconds since the
    epoch; ``restarted``: whether its supervisor restarted it; ``session``:
    for an agent the session id of that incarnation (its event log, which
    ends in the crash's error), when the observer saw it alive.
    """

    pid: int
    reason: str
    error_type: str | None
    traceback: str | None
    time: float
    restarted: bool
    session: str | None
    child_id: str | None = None


@attrs.frozen
class SupervisorView:
    """A supervisor's restart policy: ``strategy``, ``max_restarts`` within ``max_seconds``, and ``intensity``
    (``"supervisor"``: its children's restarts count together; ``"per_child"``)."""

    strategy: str
    max_restarts: int
    max_seconds: float
    intensity: str


@attrs.frozen
class ProcessView:
    """One process of the tree, or one child slot of a supervisor with nothing running in it.

    ``key`` identifies the entry in the snapshot (the pid as a string; a
    slot without a process is ``"<supervisor pid>/<child id>"``); ``pid``
    is ``None`` for such a slot. ``kind``: ``"supervisor"``,
    ``"dynamic_supervisor"``, ``"agent"`` or ``"server"``; ``module``: the
    server class's name; ``status``: the process's (``"waiting"``,
    ``"running"``, ``"starting"``, ``"stopping"``) or, for an empty slot,
    ``"restarting"`` or ``"terminated"``; ``mailbox``: messages waiting;
    ``restarts``: how many times its supervisor restarted it; ``restart``:
    its restart type; ``parent`` and ``children``: keys in the snapshot;
    ``agent``: an agent's state; ``exits``: the crash reports of this child
    slot's last incarnations (oldest first); ``supervisor``: a supervisor's
    restart policy.
    """

    key: str
    pid: int | None
    name: str | None
    child_id: str | None
    kind: str
    module: str
    status: str
    mailbox: int
    restarts: int
    restart: str | None
    parent: str | None
    children: tuple[str, ...]
    agent: AgentView | None = None
    exits: tuple[ExitView, ...] = ()
    supervisor: SupervisorView | None = None


@attrs.frozen
class Snapshot:
    """A node's tree at one moment: ``processes`` in tree order (depth first), the root's key, and the time
    (seconds since the epoch). ``handles`` maps each live pid to its handle (not part of the JSON)."""

    time: float
    root: str
    processes: tuple[ProcessView, ...]
    handles: dict[int, Handle] = attrs.field(eq=False, repr=False)


def _label(value: Hashable | None) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else repr(value)


def _kind(handle: Handle) -> str:
    if isinstance(handle, AgentHandle):
        return "agent"
    if isinstance(handle, SupervisorHandle):
        return "supervisor"
    if isinstance(handle, DynamicSupervisorHandle):
        return "dynamic_supervisor"
    return "server"


def _agent_view(handle: AgentHandle, now: float) -> AgentView | None:
    try:
        info = handle.info()
    except (ConduktError, AttributeError):  # exited, or still in its init (no session yet)
        return None
    run = info.run
    view = None
    if run is not None:
        prompt = run.prompt if len(run.prompt) <= PROMPT_CHARS else run.prompt[: PROMPT_CHARS - 1] + "…"
        calls = tuple((call.id, call.name) for call in run.tool_calls)
        # Rounded: the start stays the same number from one snapshot to the next (no diff).
        view = RunView(run.id, prompt, run.turn, run.usage, calls, round(now - run.elapsed, 1))
    return AgentView(info.session_id, info.state, info.queued, view)


def _exits(info: ChildInfo | None, sessions: dict[int, str] | None) -> tuple[ExitView, ...]:
    if info is None or not info.exits:
        return ()
    found = sessions.get if sessions is not None else (lambda pid: None)
    return tuple(exit_view(e, found(e.pid)) for e in info.exits)


def exit_view(record: ChildExit, session: str | None) -> ExitView:
    """The :class:`ExitView` of a supervisor's crash report, with the session of that incarnation if known."""
    return ExitView(record.pid, record.reason, record.error_type, record.traceback, round(record.time, 3),
                    record.restarted, session, _label(record.child_id))


def _supervisor_view(handle: Any) -> SupervisorView | None:
    try:
        info = handle.info()
    except ConduktError:
        return None
    return SupervisorView(info.strategy, info.max_restarts, info.max_seconds, info.intensity)


def take_snapshot(node: Node, sessions: dict[int, str] | None = None) -> Snapshot:
    """The tree of ``node`` now, from its root supervisor down. Synchronous; call it inside the node's trio run.

    ``sessions``: a dict the caller keeps from one snapshot to the next; the
    snapshot records each live agent's session id by pid in it, and names
    the session of a crashed incarnation from it (``ExitView.session``).
    Raises :class:`~condukt.ConduktError` if the node is not running.
    """
    now = time.time()
    root = node.root
    views: list[ProcessView] = []
    handles: dict[int, Handle] = {}
    # Depth first, children in start order: (handle or None for an empty slot, its key, parent key, its ChildInfo).
    stack: list[tuple[Any, str, str | None, ChildInfo | None]] = [(root, str(root.id), None, None)]
    while stack:
        handle, key, parent, info = stack.pop()
        if handle is None:  # a child slot with nothing running
            assert info is not None
            views.append(ProcessView(
                key, None, None, _label(info.id), "supervisor" if info.supervisor else "server",
                info.server_class.__name__, "restarting" if info.restarting else "terminated", 0, info.restarts,
                info.restart, parent, (), None, _exits(info, sessions),
            ))
            continue
        proc = process_of(handle)
        if proc is None:
            continue  # exited since its supervisor listed it
        handles[handle.id] = handle
        kind = _kind(handle)
        children: list[ChildInfo] = []
        if kind in ("supervisor", "dynamic_supervisor"):
            try:
                children = handle.child_info()
            except ConduktError:
                children = []
        child_keys = [
            str(c.handle.id) if c.handle is not None else f"{key}/{_label(c.id) if c.id is not None else f'#{i}'}"
            for i, c in enumerate(children)
        ]
        agent = _agent_view(handle, now) if kind == "agent" else None
        if agent is not None and sessions is not None and handle.id not in sessions:
            sessions[handle.id] = agent.session_id
        views.append(ProcessView(
            key, handle.id, _label(handle.name), _label(info.id) if info is not None else None, kind,
            handle.server_class.__name__, proc.status, proc.mailbox_length,
            info.restarts if info is not None else 0, info.restart if info is not None else None,
            parent, tuple(child_keys), agent, _exits(info, sessions),
            _supervisor_view(handle) if kind == "supervisor" or kind == "dynamic_supervisor" else None,
        ))
        for child, child_key in zip(reversed(children), reversed(child_keys), strict=True):
            stack.append((child.handle, child_key, key, child))
    if sessions is not None and len(sessions) > REMEMBERED_SESSIONS:
        for pid in list(sessions)[: len(sessions) - REMEMBERED_SESSIONS // 2]:  # the oldest first
            del sessions[pid]
    return Snapshot(now, str(root.id), tuple(views), handles)
