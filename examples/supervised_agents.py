"""Many agents at once under a supervisor: 20 concurrent runs, a crash, a restart.

    python examples/supervised_agents.py        # offline, on a scripted model
    CONDUKT_MODEL=anthropic:claude-haiku-4-5 python examples/supervised_agents.py

Twenty agents, each a supervised process, classify support tickets at the
same time. One of them crashes (the scripted model simulates a bug in the
machinery, not a model error); its supervisor restarts it, and the ticket
is retried on the new incarnation, found again by its registered name.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter

import trio

import condukt
from condukt.testing import FunctionModel, reply

MODEL = os.environ.get("CONDUKT_MODEL")  # unset: the scripted model, offline
LATENCY = 0.2  # seconds per scripted model call

TICKETS = [
    f"Ticket {i}: " + text
    for i, text in enumerate(
        [
            "I was charged twice for my subscription.",
            "The app crashes when I open settings.",
            "How do I export my data?",
            "My invoice shows the wrong address.",
        ]
        * 5
    )
]
CATEGORIES = {"charged": "billing", "invoice": "billing", "crashes": "bug", "export": "question"}


def scripted_model() -> FunctionModel:
    """Answers by keyword after a model's latency; the first call about ticket 7 hits a simulated bug."""
    crashed: set[str] = set()

    async def respond(request: condukt.ModelRequest) -> object:
        await trio.sleep(LATENCY)
        text = request.messages[-1].text
        if text.startswith("Ticket 7:") and not crashed:
            crashed.add(text)
            raise RuntimeError("simulated bug in the agent loop")  # crashes the agent process
        return reply(next(category for word, category in CATEGORIES.items() if word in text))

    return FunctionModel(respond)


async def classify(node: condukt.Node, name: str, ticket: str, results: dict[str, str]) -> None:
    agent = node.whereis(name)
    try:
        results[ticket] = await agent.run(ticket)
    except condukt.CallError as error:
        print(f"{name} crashed ({error.reason!r}); its supervisor restarts it")
        with trio.fail_after(5):
            while node.whereis(name) in (None, agent):
                await trio.sleep(0.01)
        results[ticket] = await node.whereis(name).run(ticket)
        print(f"{name} (restarted) answered: {results[ticket]}")


async def main() -> None:
    logging.getLogger("condukt").setLevel(logging.CRITICAL)  # the crash is expected here
    model = MODEL or scripted_model()
    system = "Classify the support ticket. Answer with one word: billing, bug or question."
    async with condukt.open_node() as node:
        supervisor = await node.start_dynamic_supervisor(max_restarts=5)
        for i in range(len(TICKETS)):
            options = {"model": model, "system_prompt": system}
            spec = condukt.ChildSpec(i, condukt.Agent, kwargs=options, name=f"agent-{i}")
            await supervisor.start_child(spec)
        print(f"{supervisor.count_children().active} agents running under one supervisor")

        results: dict[str, str] = {}
        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            for i, ticket in enumerate(TICKETS):
                nursery.start_soon(classify, node, f"agent-{i}", ticket, results)
        elapsed = time.monotonic() - started

        print(f"{len(results)} tickets classified in {elapsed:.1f}s (one model call alone: {LATENCY}s)")
        counts = Counter(answer.strip().lower() for answer in results.values())
        print(", ".join(f"{category}: {n}" for category, n in sorted(counts.items())))
        print(f"{supervisor.count_children().active} agents still running")


if __name__ == "__main__":
    trio.run(main)
