"""Custom tools: a Tool subclass, a parameterized tool added twice, and a function tool.

    python examples/custom_tool.py              # offline, on a scripted model
    CONDUKT_MODEL=anthropic:claude-sonnet-4-5 python examples/custom_tool.py

``Weather`` follows the seed project's custom tool (name, description,
JSON Schema parameters, an async ``call``; a failure is a ``ToolError`` the
model sees as an error result). ``Database`` is added once per table, its
name and description computed from its options. ``convert`` is a plain
function turned into a tool by ``@condukt.tool`` (schema from its signature).
"""

from __future__ import annotations

import os
from typing import Any

import trio

import condukt
from condukt.testing import ScriptedModel, call, reply

MODEL = os.environ.get("CONDUKT_MODEL")  # unset: the scripted model, offline


class WeatherAPI:
    """Stands in for a real weather service."""

    temperatures = {"Paris": 70, "Oslo": 41}

    @classmethod
    async def get(cls, location: str) -> dict[str, int]:
        await trio.sleep(0.01)
        if location not in cls.temperatures:
            raise LookupError(f"no weather station near {location}")
        return {"temp": cls.temperatures[location]}


class Weather(condukt.Tool):
    name = "get_weather"
    description = "Gets the current weather for a location"
    parameters = {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "City name"}},
        "required": ["location"],
    }

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        try:
            data = await WeatherAPI.get(args["location"])
        except LookupError as reason:
            raise condukt.ToolError(str(reason)) from None
        return f"Temperature: {data['temp']}F"


TABLES = {"users": [{"id": 1, "name": "ada"}], "orders": [{"user": 1, "item": "umbrella"}]}


class Database(condukt.Tool):
    @property
    def name(self) -> str:
        return f"query_{self.opts['table']}"

    @property
    def description(self) -> str:
        return f"Query the {self.opts['table']} table"

    parameters = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> list[dict[str, Any]]:
        return [row for row in TABLES[context.opts["table"]] if args["q"] in str(row.values())]


@condukt.tool
def convert(fahrenheit: float) -> str:
    """Converts a temperature from Fahrenheit to Celsius."""
    return f"{(fahrenheit - 32) * 5 / 9:.1f}C"


class Assistant(condukt.Agent):
    system_prompt = "You help with errands."

    def tools(self) -> list[object]:
        return [Weather, Database(table="users"), Database(table="orders"), convert]


def scripted_model() -> ScriptedModel:
    return ScriptedModel(
        [
            [call("get_weather", {"location": "Oslo"}), call("get_weather", {"location": "Atlantis"}),
             call("query_orders", {"q": "1"})],
            call("convert", {"fahrenheit": 41}),
            reply("Oslo is 5.0C (41F) and Atlantis has no station; good thing Ada ordered an umbrella."),
        ]
    )  # fmt: skip


async def main() -> None:
    model = MODEL or scripted_model()
    async with condukt.open_node() as node:
        agent = await node.spawn(Assistant, model=model)
        async with agent.stream("Weather in Oslo and Atlantis, in Celsius? Did Ada order anything?") as events:
            async for event in events:
                if isinstance(event, condukt.events.ToolCallEnd):
                    print(f"{event.name}: {'error: ' if event.is_error else ''}{event.result}")
        print(events.result)


if __name__ == "__main__":
    trio.run(main)
