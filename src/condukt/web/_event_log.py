"""The observer's event log: a process on the node keeping each agent's recent events, and run statistics.

Agents publish every event of every run on the node's pubsub (already
scrubbed of secrets, as all events are) whenever anyone subscribes; this
process subscribes to all of them and keeps the last ``per_agent`` of each
agent (by session id), for at most ``max_agents`` agents (the least
recently active are forgotten first). Memory is thus bounded, and a reader
falling behind the publishers loses the oldest events (pubsub's rule),
never slows an agent down.

It also counts what the node's charts show: runs finished, tokens and
cost (from each turn's usage), and each run's latency (from its
``agent_start`` to its ``done``, as this process receives them).

An agent process that crashes in the middle of a run publishes nothing
more: its log would end at the step it was on. The observer tells this
process of the crash (``("crashed", session_id, error_type, message)``)
and the log then ends the way a failed run's does, with ``error`` and
``done`` (``"failed"``), marked ``"crash": true``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import trio

from .. import events
from ..otp import Caller, NameTaken, Node, Server

__all__ = ["EVENT_LOG_NAME", "EventLog", "RunStats", "event_log"]

#: The registered name of a node's event log process.
EVENT_LOG_NAME = "condukt.web.observer:event_log"
#: Latencies kept between two reads of the statistics (the oldest are dropped beyond).
MAX_LATENCIES = 10_000


class RunStats:
    """Totals since the log started, and the latencies (seconds) of the runs finished since the last read."""

    __slots__ = ("cost", "latencies", "runs", "tokens")

    def __init__(self, runs: int, tokens: int, cost: float, latencies: list[float]) -> None:
        self.runs = runs
        self.tokens = tokens
        self.cost = cost
        self.latencies = latencies


class EventLog(Server):
    """Subscribes to every agent event of the node; ``call(("events", session_id, after))`` reads them.

    The answer is ``(last_seq, [(seq, event_json), ...])``: the events of
    that agent numbered above ``after``, oldest first, as
    :func:`condukt.events.to_json` gives them (plus ``"seq"``).
    ``call(("stats",))`` answers a :class:`RunStats`;
    ``call(("crashed", session_id, error_type, message))`` ends that
    agent's log with a crash (see the module docstring).
    """

    async def init(self, per_agent: int = 300, max_agents: int = 10_000, buffer: int = 8192) -> None:
        self.per_agent = per_agent
        self.max_agents = max_agents
        self.logs: dict[str, deque[tuple[int, Any]]] = {}
        self.seq = 0
        self.runs = 0
        self.tokens = 0
        self.cost = 0.0
        self.started: dict[str, float] = {}
        self.latencies: deque[float] = deque(maxlen=MAX_LATENCIES)
        self.subscription = self.node.subscribe("*", buffer=buffer)
        self.start_soon(self._collect)

    async def _collect(self) -> None:
        async with self.subscription as subscription:
            async for item in subscription:
                self._ingest(item)

    def _ingest(self, item: Any) -> None:
        if type(item) is not events.AgentEvent:
            return
        event: Any = item.event
        session = item.agent_id
        kind = type(event)
        if kind is events.AgentStart:
            self.started[session] = trio.current_time()
        elif kind is events.TurnEnd:
            usage = event.message.usage
            self.tokens += usage.input_tokens + usage.output_tokens
            if usage.cost:
                self.cost += usage.cost
        elif kind is events.Done:
            self.runs += 1
            began = self.started.pop(session, None)
            if began is not None:
                self.latencies.append(trio.current_time() - began)
        self._append(session, event)

    def _append(self, session: str, entry: Any) -> None:
        self.seq += 1
        logs = self.logs
        log = logs.pop(session, None)  # re-inserted last: the dict's order is recency
        if log is None:
            log = deque(maxlen=self.per_agent)
            if len(logs) >= self.max_agents:
                forgotten = next(iter(logs))
                del logs[forgotten]
                self.started.pop(forgotten, None)
        log.append((self.seq, entry))
        logs[session] = log

    def _crashed(self, session: str, error_type: str, message: str) -> bool:
        for item in self.subscription.drain():  # what it published before it crashed goes first
            self._ingest(item)
        log = self.logs.get(session)
        if not log or _is_done(log[-1][1]):
            return False  # no run in progress: nothing to end
        if self.started.pop(session, None) is not None:
            self.runs += 1
        self._append(session, {"type": "error", "error_type": error_type, "message": message, "crash": True})
        self._append(session, {"type": "done", "status": "failed", "crash": True})
        return True

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        op = request[0]
        if op == "stats":
            latencies = list(self.latencies)
            self.latencies.clear()
            return RunStats(self.runs, self.tokens, self.cost, latencies)
        if op == "crashed":
            _, session, error_type, message = request
            return self._crashed(session, error_type, message)
        if op != "events":
            return await super().handle_call(request, caller)
        _, session_id, after = request
        log = self.logs.get(session_id)
        if not log:
            return self.seq, []
        found = []
        for seq, event in reversed(log):
            if seq <= after:
                break
            data = dict(event) if type(event) is dict else events.to_json(event)
            data["seq"] = seq
            found.append(data)
        found.reverse()
        return self.seq, found


def _is_done(entry: Any) -> bool:
    return type(entry) is events.Done or (type(entry) is dict and entry.get("type") == "done")


async def event_log(node: Node) -> Any:
    """The node's :class:`EventLog` process, started (under the node's root) on first use.

    Cancellation: a start cancelled while it runs leaves nothing behind.
    """
    handle = node.whereis(EVENT_LOG_NAME)
    if handle is not None:
        return handle
    try:
        return await node.spawn(EventLog, name=EVENT_LOG_NAME)
    except NameTaken:  # another request started it meanwhile
        return node.whereis(EVENT_LOG_NAME)
