"""``python -m condukt.demo runtime``: a supervised tree where a worker crashes and is restarted.

Runs offline in a few seconds. The narration shows the OTP semantics at work:
a ``one_for_one`` supervisor, a crash with its exit reason, the restart, the
name re-registered to the new incarnation, and an orderly shutdown in reverse
start order with every ``terminate`` called.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

import condukt

from . import run_demo


def say(text: str) -> None:
    print(text, flush=True)


def lookup(node: condukt.Node, name: str) -> Any:
    """The process registered under ``name``, or ``None`` between incarnations."""
    return node.whereis(name)


class Worker(condukt.Server):
    """Counts the jobs it handled; crashes on a poisoned job."""

    async def init(self, label: str) -> None:
        self.label = label
        self.done = 0
        say(f"  [{label}] started as {self.handle!r}")

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        kind, payload = request
        if kind == "job":
            if payload == "poison":
                raise RuntimeError(f"{self.label} choked on a poisoned job")
            await trio.sleep(0.05)
            self.done += 1
            return f"{self.label} did {payload!r} (job #{self.done} of this incarnation)"
        return await super().handle_call(request, caller)

    async def terminate(self, reason: condukt.ExitReason) -> None:
        say(f"  [{self.label}] terminate({reason!r})")


class Watcher(condukt.Server):
    """Monitors the workers and narrates every exit it sees."""

    async def init(self, handles: list[condukt.Handle]) -> None:
        for handle in handles:
            self.monitor(handle)

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        op, handle = request
        if op == "watch":
            self.monitor(handle)
            return None
        return await super().handle_call(request, caller)

    async def handle_info(self, message: Any) -> None:
        if isinstance(message, condukt.Down):
            say(f"  [watcher] DOWN {message.handle!r} reason={message.reason!r}")


async def main() -> None:
    # Crash reports go to the log; the narration tells the story instead.
    logging.getLogger("condukt").setLevel(logging.CRITICAL)
    say("condukt runtime demo: a supervised tree of workers\n")
    async with condukt.open_node() as node:
        say("1. start a one_for_one supervisor with three named workers")
        sup = await node.start_supervisor(
            [
                condukt.ChildSpec(label, Worker, args=(label,), name=label)
                for label in ("alpha", "beta", "gamma")
            ],
            strategy="one_for_one",
            max_restarts=3,
            max_seconds=5.0,
            name="workers",
        )
        watcher = await node.spawn(Watcher, [h for _, h in sup.which_children() if h])

        say("\n2. give every worker a job, concurrently")
        async with trio.open_nursery() as nursery:
            for label in ("alpha", "beta", "gamma"):

                async def job(label: str = label) -> None:
                    say("  " + await lookup(node, label).call(("job", "index the repo")))

                nursery.start_soon(job)

        say("\n3. send beta a poisoned job: it crashes, the caller gets CallError")
        old_beta = lookup(node, "beta")
        try:
            await old_beta.call(("job", "poison"))
        except condukt.CallError as error:
            say(f"  caller got CallError, reason={error.reason!r}")
        with trio.fail_after(1):
            while lookup(node, "beta") in (None, old_beta):
                await trio.sleep(0.01)
        new_beta = lookup(node, "beta")
        say(f"  old handle alive? {old_beta.alive}; whereis('beta') -> {new_beta!r}")
        await watcher.call(("watch", new_beta))

        say("\n4. the new incarnation works; alpha and gamma were never touched")
        say("  " + await new_beta.call(("job", "retry the index")))
        say(f"  children: {sup.which_children()}")

        say("\n5. leave the node: children stop in reverse start order")
    say("\ndone: every terminate ran, no task left behind.")


def run() -> None:
    """Entry point of ``python -m condukt.demo runtime``."""
    run_demo(main)


if __name__ == "__main__":
    run()
