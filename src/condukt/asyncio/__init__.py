"""condukt from asyncio code: trio runs as a guest on the running asyncio loop.

::

    import asyncio
    import condukt.asyncio as ca

    async def main():
        async with ca.open_node() as node:           # trio runs as a guest on this loop
            agent = await node.spawn(MyAgent, model=...)
            print(await agent.run("hi"))
            async with agent.stream("go") as events:
                async for event in events: ...
        print(await ca.run("one-shot", model=..., tools=[...]))

    asyncio.run(main())

One trio guest run (:func:`trio.lowlevel.start_guest_run`) per asyncio loop
is shared by every node opened on it, and ends when the last one closes.
The proxies returned here (:class:`Node`, :class:`Handle`,
:class:`AgentHandle`, :class:`SupervisorHandle`,
:class:`DynamicSupervisorHandle`, :class:`Stream`) have the names of the
trio API, and **every method is awaitable** on asyncio, the trio API's
sync ones included (they must run inside trio's run); properties are read
directly. They are typed: each method takes the trio method's parameters
(a type checker reads them off the trio class), and ``spawn`` and
``start_child`` give the proxy of what they start (``await
node.spawn(MyAgent)`` is an :class:`AgentHandle`). Proxies handed back to
a trio method arrive as the trio objects they stand for; a handle proxy
compares and hashes equal to its trio handle.

Cancellation crosses both ways. Cancelling the asyncio task that awaits a
call (``asyncio.wait_for`` or ``asyncio.timeout`` running out, a client
disconnecting) cancels the trio call, and the await returns once that has
ended; for ``run`` and ``stream`` that means the agent aborts the run (its
tool subprocesses are killed), exactly as when a trio caller is cancelled.
An exception on the trio side arrives as the same exception on asyncio;
``trio.Cancelled`` never does.

Why guest mode and not a thread: calls run on the loop's thread (no
locks), and trio's cancellation maps onto asyncio's task cancellation. An
idle guest run waits for I/O in a worker thread, so waking it costs two
thread hand-offs; trio stays on the loop for ``LINGER_TICKS`` ticks after
each answer, so that a call made right away does not have to wake it, and
a call made while trio is runnable runs trio's pending ticks itself, on
the spot (up to ``INLINE_TICKS``), so that it is often answered without
the awaiting task being suspended at all. Calls start right in the
awaiting task, between trio's ticks; ``agent.run`` with a callback
(:func:`condukt.agent.lowlevel.start_run`), without a trio task of its
own. Where guest mode cannot be used (a loop per request),
``open_node(thread=True)`` runs trio in a thread of its own instead, with
the same API and cancellation; its nodes serve every loop of the process.
The bridge is hand-written because no well-kept package
exposes trio objects to asyncio this way (trio-asyncio goes the other way,
asyncio code inside trio, and is in maintenance mode; anyio targets code
written for both, not a trio library called from asyncio).

Where things are: ``_guest`` (the guest-mode runner: one trio guest run
per loop, the calls into it), ``_thread`` (the thread-backed host),
``_translate`` (proxies and trio objects, both ways), ``_methods`` (trio
methods as typed asyncio awaitables), ``_handles``, ``_supervisors`` and
``_node`` (the proxies), ``_stream`` (streams), ``_steps`` (``iter``'s steps), ``_open_node``
(``open_node``, ``current_node``) and ``_calls`` (``run``, ``call``).
"""

from __future__ import annotations

from ._calls import call, run
from ._handles import AgentHandle, Handle, VirtualHandle
from ._node import Node
from ._open_node import current_node, open_node
from ._steps import Steps
from ._stream import Stream
from ._supervisors import DynamicSupervisorHandle, SupervisorHandle

__all__ = [
    "AgentHandle",
    "DynamicSupervisorHandle",
    "Handle",
    "Node",
    "Steps",
    "Stream",
    "SupervisorHandle",
    "VirtualHandle",
    "call",
    "current_node",
    "open_node",
    "run",
]

# The tunables below are read from this module at each use (the bridge's
# modules look them up here), so that setting ``condukt.asyncio.LINGER_TICKS = 0``
# takes effect at once.

#: Events a stream holds for the asyncio side before the run waits for it to read.
STREAM_BUFFER = 64

#: Guest ticks trio stays runnable after it answered a call, so that a next call
#: made right away enters trio on the loop's thread instead of waking trio's
#: I/O-wait thread (the guest run's clock after an agent run's answer, the
#: answering task itself after other calls). A call awaited directly (or
#: under ``asyncio.timeout``) comes back within 1 tick; through a task of its
#: own (``create_task``, ``gather``, Python 3.11's ``wait_for``) within 3-4.
#: Each tick nobody uses costs some CPU (``benchmarks/embedding.py`` measures
#: it); 0 turns lingering off.
LINGER_TICKS = 4

#: Guest ticks a call may run on the spot, in the awaiting asyncio task, while
#: trio is runnable: enough for an agent run on an in-process model, and a
#: bound on how long the loop's other callbacks wait.
INLINE_TICKS = 16

#: Calls that may be answered on the spot before the loop gets a turn: a task
#: that only makes such calls still lets the loop's other callbacks run every
#: ``INLINE_CALLS`` calls.
INLINE_CALLS = 32
