"""OTP for trio: processes, handles, links, monitors, supervisors, registry, node.

This layer knows nothing of LLMs and can be used on its own::

    import condukt

    class Counter(condukt.Server):
        async def init(self, start=0):
            self.n = start
        async def handle_call(self, request, caller):
            return self.n
        async def handle_cast(self, message):
            self.n += message[1]

    async with condukt.open_node() as node:
        counter = await node.spawn(Counter, 5, name="counter")
        await counter.cast(("add", 1))
        assert await counter.call("get") == 6

See ``docs/runtime.md`` for the full guide and how it maps onto OTP.
"""

from ._caller import Caller
from ._child_spec import (
    DEFAULT_SHUTDOWN,
    EXITS_KEPT,
    TIMELINE_KEPT,
    ChildCounts,
    ChildExit,
    ChildInfo,
    ChildSpec,
    RestartType,
    SupervisorInfo,
)
from ._dynamic_supervisor import DynamicSupervisor, DynamicSupervisorHandle
from ._errors import (
    CallError,
    CallingSelf,
    CallTimeout,
    ChildNotFound,
    ChildRestarting,
    ChildRunning,
    ConduktError,
    MailboxFull,
    NameTaken,
    NoProc,
    TooManyChildren,
)
from ._handle import Handle
from ._monitors import Monitor, MonitorRef
from ._node import Node, current_node, open_node
from ._process import DEFAULT_MAILBOX_SIZE
from ._pubsub import Subscription
from ._server import Server, UnhandledMessage
from ._signals import IGNORE, NO_REPLY, Down, Exit, ExitReason, is_normal_exit, is_shutdown_exit
from ._supervisor import Supervisor, SupervisorHandle
from ._timers import TimerRef

__all__ = [
    "DEFAULT_MAILBOX_SIZE",
    "DEFAULT_SHUTDOWN",
    "EXITS_KEPT",
    "IGNORE",
    "NO_REPLY",
    "CallError",
    "CallTimeout",
    "Caller",
    "CallingSelf",
    "ChildCounts",
    "ChildExit",
    "ChildInfo",
    "ChildNotFound",
    "ChildRestarting",
    "ChildRunning",
    "ChildSpec",
    "ConduktError",
    "Down",
    "DynamicSupervisor",
    "DynamicSupervisorHandle",
    "Exit",
    "ExitReason",
    "Handle",
    "MailboxFull",
    "Monitor",
    "MonitorRef",
    "NameTaken",
    "NoProc",
    "Node",
    "RestartType",
    "Server",
    "Subscription",
    "Supervisor",
    "SupervisorHandle",
    "SupervisorInfo",
    "TIMELINE_KEPT",
    "TimerRef",
    "TooManyChildren",
    "UnhandledMessage",
    "current_node",
    "is_normal_exit",
    "is_shutdown_exit",
    "open_node",
]
