"""Deferred tools: tools whose result comes from outside the agent (a person, another system).

A call of a :class:`DeferredTool` does not run code in the agent: the run
emits :class:`~condukt.events.InputRequested` and waits until
``agent.respond(call_id, value)`` gives the result (over HTTP too). The
wait is kept in the session snapshot like an approval's, so it survives a
crash or a restart of the node (``resume=True`` with a session store). The
agent's :mod:`~condukt.agent.capabilities.deferred` capability does the
waiting; these classes only describe the request and the result.
"""

from __future__ import annotations

import json
from typing import Any

from ._tool import Tool, ToolContext, ToolError

__all__ = ["AskUser", "DeferredTool"]


class DeferredTool(Tool):
    """A tool answered from outside: subclass it with a ``name``, ``description`` and ``parameters``.

    ``question(args)`` is the text shown to whoever answers (the
    ``question`` of :class:`~condukt.events.InputRequested`); ``result(value)``
    turns the value given to ``agent.respond`` into the tool's result (a
    ``str`` as is, anything else JSON-encoded, as a tool's return value;
    raise :class:`ToolError` to report a bad value to the model as an error
    result). Time spent waiting does not count against the tool's timeout
    nor the run's; the run's abort ends the wait.
    """

    #: Waiting for an answer is not a tool's work: no tool timeout applies.
    timeout = None

    def question(self, args: dict[str, Any]) -> str:
        """The request shown to whoever answers (the default: the arguments as JSON)."""
        return json.dumps(args, ensure_ascii=False, sort_keys=True)

    def result(self, value: Any) -> Any:
        """The tool's result for ``value`` (given to ``agent.respond``); the default: the value itself."""
        return value

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Never run by an agent (its deferred capability answers the call); raises :class:`ToolError` if called.

        Nothing to cancel: it returns at once.
        """
        raise ToolError(f"{self.name} is answered from outside the agent (agent.respond), not called")


class AskUser(DeferredTool):
    """``ask_user(question)``: the model asks a person and gets their answer as the result.

    The question goes out in :class:`~condukt.events.InputRequested`;
    ``await agent.respond(call_id, "the answer")`` answers it. See
    ``docs/deferred-tools.md``.
    """

    name = "ask_user"
    description = (
        "Ask the user a question and wait for their answer. Use it when you need information "
        "or a choice only the user can give; ask one clear question at a time."
    )
    parameters = {
        "type": "object",
        "properties": {"question": {"type": "string", "description": "The question for the user"}},
        "required": ["question"],
        "additionalProperties": False,
    }

    def question(self, args: dict[str, Any]) -> str:
        """The model's question."""
        return str(args["question"])

    def result(self, value: Any) -> Any:
        """The answer as text (a non-str answer is JSON-encoded)."""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
