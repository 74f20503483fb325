"""A lead agent delegates to two sub-agents at once and combines their answers.

    python examples/subagents.py                # offline, on a scripted model
    CONDUKT_MODEL=anthropic:claude-sonnet-4-5 python examples/subagents.py

The sub-agents are real agent processes, supervised under the lead and
stopped with it; their events reach the lead's stream as SubagentEvent.
"""

from __future__ import annotations

import os

import trio

import condukt
from condukt import events as ev
from condukt.testing import FunctionModel, call, reply

MODEL = os.environ.get("CONDUKT_MODEL")  # unset: the scripted model, offline


class Lead(condukt.Agent):
    system_prompt = "You plan trips. Delegate research, then answer in two sentences."

    def subagents(self) -> dict[str, object]:
        return {
            "weather": condukt.Subagent(system_prompt="You know the climate of every city.",
                                        description="Answers questions about the weather"),
            "food": condukt.Subagent(system_prompt="You know what to eat everywhere.",
                                     description="Recommends local dishes"),
        }  # fmt: skip


def respond(request: condukt.ModelRequest) -> object:
    """The scripted model: answers as whichever agent (by its system prompt) asked."""
    system = request.system_prompt or ""
    if system.startswith("You know the climate"):
        return reply("Lisbon in May: sunny, around 22°C.")
    if system.startswith("You know what to eat"):
        return reply("Try pastéis de nata and grilled sardines.")
    if len(request.messages) == 1:  # the lead's first turn: two delegations at once
        return [
            call("subagent", {"role": "weather", "task": "What is Lisbon's weather in May?"}),
            call("subagent", {"role": "food", "task": "What should I eat in Lisbon?"}),
        ]
    findings = " ".join(message.text for message in request.messages[-2:])
    return reply(f"Pack light for Lisbon in May. {findings}")


async def main() -> None:
    async with condukt.open_node() as node:
        lead = await node.spawn(Lead, model=MODEL or FunctionModel(respond))
        async with lead.stream("Plan a weekend in Lisbon in May.") as events:
            async for event in events:
                if isinstance(event, ev.SubagentEvent) and isinstance(event.event, ev.AgentEnd):
                    print(f"[{event.role}] {event.event.text}")
        print(f"[lead] {events.result}")


if __name__ == "__main__":
    trio.run(main)
