"""Calling tools the way an agent does, for the built-in tool tests.

``invoke`` validates the arguments against the tool's schema (as the agent
loop does before ``call``) and calls the tool with a ``ToolContext`` rooted
at ``cwd``. ``through_agent`` runs one real agent turn instead: the model
calls the tools, and the results the model saw come back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import condukt
from condukt.messages import ToolResultMessage
from condukt.testing import ScriptedModel, reply


async def invoke(
    tool: condukt.Tool,
    args: dict[str, Any],
    cwd: Path,
    *,
    confine: bool = False,
    sandbox: condukt.sandbox.Sandbox | None = None,
) -> Any:
    """``tool.call(args, context)`` after schema validation (``AssertionError`` if invalid)."""
    problem = tool.validate(args)
    assert problem is None, problem
    context = condukt.ToolContext(
        agent=None, cwd=cwd, opts=tool.opts, session_id="session", tool_call_id="call", confine=confine
    )
    if sandbox is not None:
        context.sandbox = sandbox
    return await tool.call(args, context)


async def through_agent(
    tools: list[Any], calls: Any, cwd: Path, **options: Any
) -> tuple[list[ToolResultMessage], ScriptedModel]:
    """One agent turn in which the model makes ``calls``; returns the results it saw, in order."""
    model = ScriptedModel([calls, reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=tools, cwd=cwd, **options)
        assert await agent.run("use the tools") == "done"
    results = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    return results, model
