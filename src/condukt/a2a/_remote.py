"""``condukt.a2a.remote``: a tool that asks a remote A2A agent (the ``a2a-sdk`` client)."""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

import httpx
import trio
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_message_text, new_text_part
from a2a.types import CancelTaskRequest, Message, Role, SendMessageRequest, StreamResponse, TaskState

from ..events import ToolProgress
from ..tools import Tool, ToolContext, ToolError

__all__ = ["RemoteAgent", "remote"]

#: How long cancelling the remote task may take when the call is cancelled (its own, shielded, budget).
CANCEL_TIMEOUT = 5.0
#: Conversations (calling sessions) whose remote ``contextId`` a tool remembers; the oldest are forgotten.
MAX_CONTEXTS = 1000

_ENDED = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
          TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}


def _default_name(url: str) -> str:
    host = urlsplit(url).hostname or "remote"
    return ("ask_" + re.sub(r"[^A-Za-z0-9_-]+", "_", host).strip("_"))[:64] or "ask_remote_agent"


class RemoteAgent(Tool):
    """Sends the model's message to the A2A agent at ``url`` and returns its answer.

    Built by :func:`remote`. One remote ``contextId`` per calling
    conversation: calls from the same session continue the remote
    conversation. The call is bounded by the tool's ``timeout``; when it is
    cancelled (timeout, the calling run's abort) the remote task is
    cancelled too (``tasks/cancel``, within :data:`CANCEL_TIMEOUT`; a call
    cancelled before the remote agent named its task has nothing to
    cancel). Each change of the remote task's state is a
    :class:`~condukt.events.ToolProgress` event of the calling run. A
    remote failure, a canceled task or an answer that is not A2A is a
    :class:`~condukt.ToolError`: the model sees it, the run goes on.
    """

    parameters = {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "What to ask or tell the remote agent."}},
        "required": ["message"],
        "additionalProperties": False,
    }

    def __init__(self, url: str, *, name: str | None = None, description: str | None = None,
                 timeout: float | None = 120.0, token: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__()
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"url must be the remote agent's http(s) base URL, got {url!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ValueError(f"timeout must be None or a number > 0, got {timeout!r}")
        self.url = url
        self.name = name or _default_name(url)
        self.description = description or (
            f"Sends a message to the remote agent at {url} (A2A) and returns its answer. "
            "Calls from this conversation continue the remote conversation."
        )
        self.timeout = timeout
        self._headers = dict(headers or {})
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._contexts: OrderedDict[str, str] = OrderedDict()

    def _context_id(self, session_id: str) -> str:
        context_id = self._contexts.pop(session_id, None) or uuid.uuid4().hex
        self._contexts[session_id] = context_id
        while len(self._contexts) > MAX_CONTEXTS:
            self._contexts.popitem(last=False)
        return context_id

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Ask the remote agent; its answer's text is the result.

        Cancellation (the tool's timeout, the run's abort) cancels the
        remote task, shielded for up to :data:`CANCEL_TIMEOUT` seconds.
        """
        context_id = self._context_id(context.session_id or "")
        message = Message(message_id=uuid.uuid4().hex, context_id=context_id, role=Role.ROLE_USER,
                          parts=[new_text_part(args["message"])])
        async with httpx.AsyncClient(headers=self._headers, timeout=httpx.Timeout(30.0, read=None)) as http:
            try:
                client = await ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create_from_url(self.url)
            except Exception as exc:  # unreachable, no card, a card that is not one
                raise ToolError(f"no A2A agent card at {self.url}: {exc}") from None
            task_id = ""
            answer = _Answer()
            try:
                async for response in client.send_message(SendMessageRequest(message=message)):
                    state = answer.state
                    task_id = answer.add(response) or task_id
                    if answer.state != state and context.emit is not None:
                        await context.emit(ToolProgress(context.tool_call_id, f"remote task {task_id}: "
                                                        f"{TaskState.Name(answer.state).removeprefix('TASK_STATE_')}"
                                                        .lower()))
            except Exception as exc:  # garbage, a broken stream, a JSON-RPC error
                raise ToolError(f"the remote agent at {self.url} failed: {type(exc).__name__}: {exc}") from None
            finally:
                if task_id and answer.state not in _ENDED:
                    # Cancelled (the timeout, the run's abort) or failed while the remote task runs: stop it.
                    with trio.move_on_after(CANCEL_TIMEOUT) as scope:
                        scope.shield = True
                        try:
                            await client.cancel_task(CancelTaskRequest(id=task_id))
                        except Exception:
                            pass  # ended meanwhile, or unreachable: the call is over either way
            return answer.result()


class _Answer:
    """The answer being read from a remote task's events."""

    def __init__(self) -> None:
        self.state: int = TaskState.TASK_STATE_UNSPECIFIED
        self.status_text = ""
        self.artifacts: dict[str, str] = {}
        self.message_text: str | None = None

    def add(self, response: StreamResponse) -> str:
        """Take one event; returns the task's id when it names one."""
        if response.HasField("message"):
            self.message_text = get_message_text(response.message)
            self.state = TaskState.TASK_STATE_COMPLETED
            return ""
        if response.HasField("task"):
            task = response.task
            self.state = task.status.state
            if task.status.HasField("message"):
                self.status_text = get_message_text(task.status.message)
            for artifact in task.artifacts:
                self.artifacts[artifact.artifact_id] = get_artifact_text(artifact, "")
            return task.id
        if response.HasField("status_update"):
            update = response.status_update
            self.state = update.status.state
            if update.status.HasField("message"):
                self.status_text = get_message_text(update.status.message)
            return update.task_id
        if response.HasField("artifact_update"):
            chunk = response.artifact_update
            text = get_artifact_text(chunk.artifact, "")
            key = chunk.artifact.artifact_id
            self.artifacts[key] = self.artifacts.get(key, "") + text if chunk.append else text
            return chunk.task_id
        return ""

    def result(self) -> str:
        if self.message_text is not None:
            return self.message_text
        text = self.status_text or "\n\n".join(t for t in self.artifacts.values() if t)
        if self.state == TaskState.TASK_STATE_COMPLETED:
            return text
        if self.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            return f"(the remote agent needs more input) {text}"
        if self.state in _ENDED:
            raise ToolError(f"the remote task ended {TaskState.Name(self.state)}: {text}")
        raise ToolError(f"the remote agent's stream ended before its task did ({TaskState.Name(self.state)})")


def remote(url: str, *, name: str | None = None, description: str | None = None, timeout: float | None = 120.0,
           token: str | None = None, headers: dict[str, str] | None = None) -> RemoteAgent:
    """A tool that asks the A2A agent whose card is at ``url`` (its base URL) and returns the answer.

    ``name`` is what the model calls it (default ``ask_<host>``);
    ``description`` what it is told about it. ``timeout`` bounds each call
    in seconds (the tool's own timeout: the model is told the call timed
    out, and the remote task is cancelled). ``token`` is sent as
    ``Authorization: Bearer``; ``headers`` with every request. The card is
    read at each call. Raises ``ValueError`` for a bad ``url`` or ``timeout``.
    """
    return RemoteAgent(url, name=name, description=description, timeout=timeout, token=token, headers=headers)
