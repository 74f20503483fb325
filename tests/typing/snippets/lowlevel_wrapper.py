"""A wrapper around spawn keeps the handle type, through condukt.otp.lowlevel.Spawnable."""

from __future__ import annotations

from typing import Any, TypeVar, assert_type

import condukt
from condukt.otp.lowlevel import Process, Spawnable, process_of, send_system, server_of

H = TypeVar("H", bound=condukt.Handle)


class TaskHandle(condukt.Handle):
    __slots__ = ()

    def queued(self) -> int:
        process = process_of(self)
        return 0 if process is None else process.mailbox_length


class Tasks(condukt.Server):
    handle_class = TaskHandle


async def start_named(node: condukt.Node, cls: type[Spawnable[H]], name: str, **options: Any) -> H:
    return await node.spawn(cls, name=name, **options)


async def main() -> None:
    async with condukt.open_node() as node:
        tasks = await start_named(node, Tasks, "tasks")
        assert_type(tasks, TaskHandle)
        assert_type(tasks.queued(), int)
        plain = await start_named(node, condukt.Server, "plain")
        assert_type(plain, condukt.Handle)
        send_system(tasks, "tick")
        assert_type(server_of(tasks), condukt.Server | None)
        process = process_of(tasks)
        assert_type(process, Process | None)
        if process is not None:
            assert_type(process.stopping, bool)
