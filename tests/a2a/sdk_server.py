"""A2A agents served by the a2a-sdk alone (its request handler, task store and executor; asyncio, on uvicorn)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from a2a.helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Task, TaskState, TaskStatus
from starlette.applications import Starlette

from tests.web.helpers import free_port, uvicorn_server


class Echo(AgentExecutor):
    """Answers 'echo N: <text>', N counting the messages of the context; 'hang' waits for ever."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.cancelled = threading.Event()
        self.hanging = threading.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        await event_queue.enqueue_event(Task(id=task_id, context_id=context_id,
                                             status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                                             history=[context.message] if context.message else []))
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        text = context.get_user_input()
        if text == "hang":
            self.hanging.set()
            await asyncio.Event().wait()
        self.seen[context_id] += 1
        await updater.add_artifact([new_text_part(f"echo {self.seen[context_id]}: {text}")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.set()
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


@contextmanager
def sdk_agent() -> Iterator[tuple[str, Echo]]:
    """The Echo agent on uvicorn (a thread of its own): yields its base URL and the executor."""
    executor = Echo()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(name="echo", description="Echoes.", version="1.0.0",
                     skills=[AgentSkill(id="echo", name="echo", description="Echoes.", tags=["test"])],
                     capabilities=AgentCapabilities(streaming=True),
                     default_input_modes=["text/plain"], default_output_modes=["text/plain"],
                     supported_interfaces=[AgentInterface(url=f"{url}/", protocol_binding="JSONRPC",
                                                          protocol_version="1.0")])
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    with uvicorn_server(app, port=port) as served:
        assert served == url
        yield url, executor


