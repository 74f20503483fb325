"""Agents the protocol adapters' tests share: text, a server-side tool, client tools, a slow tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import condukt
from condukt.messages import ImageBlock, ToolResultMessage, UserMessage
from condukt.testing import FunctionModel, call, reply


@condukt.tool
async def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _users(request: condukt.ModelRequest) -> list[UserMessage]:
    return [m for m in request.messages if type(m) is UserMessage]


def assistant_logic(request: condukt.ModelRequest) -> Any:
    """What the test model answers, from the request alone (so it is the same on any agent process).

    * the last message is a tool result: ``"<tool> said: <result>"`` (after the
      client's tool, or the agent's own ``get_weather``);
    * a prompt containing "weather": call the agent's own ``get_weather``;
    * a prompt containing "lookup" when the client declared ``lookup``: call it;
    * a prompt with an image: say its media type and size;
    * else ``"turn N: <prompt>"``, N counting the user messages, with the
      system prompt's last line appended after " | " when the client added one.
    """
    last = request.messages[-1]
    if type(last) is ToolResultMessage:
        return reply(f"{last.name} said: {last.text}")
    prompt = last.text
    names = {tool.name for tool in request.tools}
    if "weather" in prompt:
        return call("get_weather", {"city": "Paris"})
    if "lookup" in prompt and "lookup" in names:
        return [reply("Looking it up."), call("lookup", {"query": prompt})]
    images = [block for block in last.content if type(block) is ImageBlock]
    if images:
        return reply(f"an image: {images[0].media_type}, {len(images[0].to_bytes())} bytes")
    text = f"turn {len(_users(request))}: {prompt}"
    system = request.system_prompt or ""
    if "\n\n" in system:
        text += " | " + system.rsplit("\n\n", 1)[1]
    return reply(text)


class Assistant(condukt.Agent):
    """The protocol tests' agent: see :func:`assistant_logic`."""

    model = FunctionModel(assistant_logic)
    system_prompt = "You help."

    def tools(self) -> list[Any]:
        return [get_weather]


def sleeper(pid_file: Path) -> condukt.ChildSpec:
    """An agent whose first tool call runs 'sleep 600', writing the shell's pid to ``pid_file`` first.

    ``pid_file`` may be a FIFO the test reads (``waiting.open_fifo``): the test
    then wakes when the pid is written, instead of looking for the file.
    """
    command = f"echo $$ > {pid_file} && exec sleep 600"

    def respond(request: condukt.ModelRequest) -> Any:
        if type(request.messages[-1]) is ToolResultMessage:
            return reply("slept")
        return [reply("Going to sleep."), call("bash", {"command": command})]

    return condukt.ChildSpec(
        None, condukt.Agent,
        kwargs={"model": FunctionModel(respond), "tools": [condukt.tools.Bash], "cwd": pid_file.parent},
    )


LOOKUP_TOOL = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}


def text_of(content: Any) -> str:
    """The text of a JSON content that is a string or a list of text parts."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)

