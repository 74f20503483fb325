"""A2A tasks backed by agent runs: each task is one run of its context's agent.

A task's run is driven by a task of the app's *runner* process (a condukt
``Server`` on the node), not by the request that started it: a client that
leaves (a closed stream, a dropped ``message/send``) does not stop the work,
as A2A wants; ``tasks/cancel`` does (the run is aborted, its tool
subprocesses killed). Readers wait on the record (:class:`TaskRecord`):
``message/send`` for its end, ``message/stream`` and resubscriptions for its
events.

Each task's run is a detached run of its context's agent
(``agent.submit``): its id is known from the start (``tasks/cancel`` aborts
it by id, queued or running), the runner follows it with ``attach`` and
reads its outcome with ``result``, and with a session store its event log
and result are kept there with the session's.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any

import attrs
import trio
from a2a.helpers import new_text_part
from a2a.types import (
    Artifact,
    Message,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)

from .. import events
from ..agent import Aborted
from ..messages import DocumentBlock, ImageBlock
from ..otp import Caller, NameTaken, Node, Server

__all__ = ["LISTENER_BUFFER", "TERMINAL", "TaskRecord", "Tasks"]

#: Events buffered per reader of a task; a slower reader holds the run back (as ``agent.stream`` does).
LISTENER_BUFFER = 256

#: The states a task never leaves.
TERMINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
                      TaskState.TASK_STATE_REJECTED})

_DONE_STATES = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "timeout": TaskState.TASK_STATE_FAILED,
    "aborted": TaskState.TASK_STATE_CANCELED,
}

Update = TaskStatusUpdateEvent | TaskArtifactUpdateEvent


@attrs.define(eq=False)
class TaskRecord:
    """One task: its A2A state (``task``), the agent whose run it is, and who waits for it."""

    task: Task
    agent: Any
    prompt: str
    images: tuple[ImageBlock, ...] = ()
    documents: tuple[DocumentBlock, ...] = ()
    #: The run's id once the agent accepted it (``agent.abort(run_id)`` stops it, queued or running).
    run_id: str | None = None
    cancel_requested: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)
    listeners: list[trio.MemorySendChannel[Update]] = attrs.field(factory=list)
    artifact_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    text: str = ""
    separate: bool = False
    turn_has_text: bool = False

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def terminal(self) -> bool:
        return self.task.status.state in TERMINAL

    def agent_message(self, text: str) -> Message:
        return Message(message_id=uuid.uuid4().hex, context_id=self.task.context_id, task_id=self.task.id,
                       role=Role.ROLE_AGENT, parts=[new_text_part(text)])

    def snapshot(self, history_length: int | None = None) -> Task:
        """A copy of the task (its last ``history_length`` messages when given), its answer as an artifact."""
        copy = Task()
        copy.CopyFrom(self.task)
        if self.text:
            answer = Artifact(artifact_id=self.artifact_id, name="answer", parts=[new_text_part(self.text)])
            copy.artifacts.append(answer)
        if history_length is not None and history_length >= 0 and len(copy.history) > history_length:
            keep = list(copy.history)[len(copy.history) - history_length:] if history_length else []
            del copy.history[:]
            copy.history.extend(keep)
        return copy

    def subscribe(self) -> trio.MemoryReceiveChannel[Update]:
        """A channel of this task's updates from now on; closed when the task ends."""
        send, receive = trio.open_memory_channel[Update](LISTENER_BUFFER)
        if self.done.is_set():
            send.close()
        else:
            self.listeners.append(send)
        return receive

    async def publish(self, update: Update, *, wait: bool = True) -> None:
        """Give ``update`` to every reader; without ``wait``, a reader whose buffer is full loses it and is dropped."""
        for listener in list(self.listeners):
            try:
                if wait:
                    await listener.send(update)
                else:
                    listener.send_nowait(update)
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):  # that reader left
                listener.close()
                self.listeners.remove(listener)

    async def set_state(self, state: int, text: str | None = None, *, wait: bool = True) -> None:
        status = self.task.status
        status.Clear()
        status.state = state  # type: ignore[assignment]
        status.timestamp.GetCurrentTime()
        if text is not None:
            message = self.agent_message(text)
            status.message.CopyFrom(message)
            if state in TERMINAL:
                self.task.history.append(message)
        if self.listeners:
            update = TaskStatusUpdateEvent(task_id=self.task.id, context_id=self.task.context_id)
            update.status.CopyFrom(status)
            await self.publish(update, wait=wait)

    async def on_event(self, event: Any) -> None:
        """Follow the run: working at its start, its text as artifact chunks, its end as the final state."""
        kind = type(event)
        if kind is events.TextDelta:
            text = event.text
            if self.separate and not self.turn_has_text:
                text = "\n\n" + text
            self.turn_has_text = True
            first = not self.text
            self.text += text
            if self.listeners:
                artifact = Artifact(artifact_id=self.artifact_id, name="answer", parts=[new_text_part(text)])
                await self.publish(TaskArtifactUpdateEvent(task_id=self.task.id, context_id=self.task.context_id,
                                                           artifact=artifact, append=not first, last_chunk=False))
        elif kind is events.TurnStart:
            self.separate = self.separate or self.turn_has_text
            self.turn_has_text = False
        elif kind is events.AgentStart:
            self.run_id = event.run_id
            if self.cancel_requested:  # canceled while queued: stop at once (abort returns at once from here)
                await self.agent.abort(event.run_id)
                return
            await self.set_state(TaskState.TASK_STATE_WORKING)

    async def end(self, status: str, text: str) -> None:
        """The run ended (``status`` as its ``Done`` says); ``text`` is its result or its error."""
        # Shielded at the node's shutdown: readers that cannot take the last updates lose them.
        if self.text and self.listeners:
            await self.publish(TaskArtifactUpdateEvent(
                task_id=self.task.id, context_id=self.task.context_id, append=True, last_chunk=True,
                artifact=Artifact(artifact_id=self.artifact_id, name="answer")), wait=False)
        await self.set_state(_DONE_STATES.get(status, TaskState.TASK_STATE_FAILED), text, wait=False)

    def close(self) -> None:
        for listener in self.listeners:
            listener.close()
        self.listeners.clear()
        self.done.set()


class Runner(Server):
    """Drives task runs in its own tasks: they outlive the requests that start them, not the node."""

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        if type(request) is tuple and request and request[0] == "drive":
            _, record, timeout = request
            self.start_soon(_drive, record, timeout)
            return None
        return await super().handle_call(request, caller)


async def _drive(record: TaskRecord, timeout: float | None) -> None:
    """Submit the task's prompt as a detached run and follow it to its end; never raises (it would crash the runner).

    ``benchmarks/protocols.py`` measures what following a detached run costs
    against a run with an event callback.
    """
    status, text = "failed", ""
    try:
        agent = record.agent
        run_id = await agent.submit(record.prompt, images=list(record.images) or None,
                                    documents=list(record.documents) or None, timeout=timeout)
        record.run_id = run_id
        async with agent.attach(run_id) as run_events:
            async for event in run_events:
                await record.on_event(event)
        result = await agent.result(run_id)
        status, text = "completed", result if isinstance(result, str) else str(result)
    except Aborted:
        status, text = "aborted", "the task was canceled"
    except Exception as exc:  # failed, timed out; the agent crashed (its session restarts) or refused the run
        status, text = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if not record.done.is_set():  # a task canceled before its run started has ended already
            with trio.CancelScope(shield=True):
                try:
                    await record.end(status, text)
                finally:
                    record.close()


class Tasks:
    """The app's tasks: the most recent ``max_tasks`` kept (finished ones forgotten first)."""

    RUNNER_NAME = "condukt.a2a:runner"

    def __init__(self, max_tasks: int, run_timeout: float | None, app_id: int) -> None:
        self.max_tasks = max_tasks
        self.run_timeout = run_timeout
        self.records: OrderedDict[str, TaskRecord] = OrderedDict()
        self.runner_name = (self.RUNNER_NAME, app_id)

    def get(self, task_id: str) -> TaskRecord | None:
        return self.records.get(task_id)

    def add(self, record: TaskRecord) -> None:
        self.records[record.id] = record
        if len(self.records) > self.max_tasks:
            for task_id, old in list(self.records.items()):
                if len(self.records) <= self.max_tasks:
                    break
                if old.done.is_set():
                    del self.records[task_id]

    async def runner(self, node: Node) -> Any:
        handle = node.whereis(self.runner_name)
        if handle is not None:
            return handle
        try:
            return await node.spawn(Runner, name=self.runner_name)
        except NameTaken:  # another request started it meanwhile
            return node.whereis(self.runner_name)

    async def start(self, node: Node, record: TaskRecord) -> None:
        """Start the record's run on the runner process (it returns at once)."""
        self.add(record)
        runner = await self.runner(node)
        await runner.call(("drive", record, self.run_timeout), timeout=None)

    def in_context(self, context_id: str) -> list[TaskRecord]:
        """The tasks kept, of ``context_id`` (all when empty), oldest first."""
        return [record for record in self.records.values() if not context_id or record.task.context_id == context_id]
