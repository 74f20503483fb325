"""The observer's event log: a process on the node keeping each agent's recent events.

Agents publish every event of every run on the node's pubsub (already
scrubbed of secrets, as all events are) whenever anyone subscribes; this
process subscribes to all of them and keeps the last ``per_agent`` of each
agent (by session id), for at most ``max_agents`` agents (the least
recently active are forgotten first). Memory is thus bounded, and a reader
falling behind the publishers loses the oldest events (pubsub's rule),
never slows an agent down.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .. import events
from ..otp import Caller, NameTaken, Node, Server

__all__ = ["EVENT_LOG_NAME", "EventLog", "event_log"]

#: The registered name of a node's event log process.
EVENT_LOG_NAME = "condukt.web.observer:event_log"


class EventLog(Server):
    """Subscribes to every agent event of the node; ``call(("events", session_id, after))`` reads them.

    The answer is ``(last_seq, [(seq, event_json), ...])``: the events of
    that agent numbered above ``after``, oldest first, as
    :func:`condukt.events.to_json` gives them (plus ``"seq"``).
    """

    async def init(self, per_agent: int = 300, max_agents: int = 10_000, buffer: int = 8192) -> None:
        self.per_agent = per_agent
        self.max_agents = max_agents
        self.logs: dict[str, deque[tuple[int, events.Event]]] = {}
        self.seq = 0
        self.dropped = 0
        self.subscription = self.node.subscribe("*", buffer=buffer)
        self.start_soon(self._collect)

    async def _collect(self) -> None:
        logs, per_agent = self.logs, self.per_agent
        async with self.subscription as subscription:
            async for item in subscription:
                if type(item) is not events.AgentEvent:
                    continue
                self.seq += 1
                log = logs.pop(item.agent_id, None)  # re-inserted last: the dict's order is recency
                if log is None:
                    log = deque(maxlen=per_agent)
                    if len(logs) >= self.max_agents:
                        del logs[next(iter(logs))]
                log.append((self.seq, item.event))
                logs[item.agent_id] = log

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        op, session_id, after = request
        if op != "events":
            return await super().handle_call(request, caller)
        log = self.logs.get(session_id)
        if not log:
            return self.seq, []
        found = []
        for seq, event in reversed(log):
            if seq <= after:
                break
            data = events.to_json(event)
            data["seq"] = seq
            found.append(data)
        found.reverse()
        return self.seq, found


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
