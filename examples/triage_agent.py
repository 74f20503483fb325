"""An agent class for the command line: its tools, prompt and options, started by ``--agent``.

    npm install --prefix examples/mcp      # the issue tracker, a small MCP server in node
    condukt run --agent examples.triage_agent:Triage --mcp "node examples/mcp/server.js" "Triage issue 12"
    condukt chat --agent examples.triage_agent:Triage --mcp "node examples/mcp/server.js"
    condukt serve --agent examples.triage_agent:Triage --mcp "node examples/mcp/server.js"

The class brings its system prompt, thinking level and its own ``label``
tool; ``--mcp`` adds the tracker's ``get_issue`` and ``list_issues``;
``--model``/``--base-url`` (or ``CONDUKT_MODEL``) override its model.
Offline, against the local test server and a script of its answers::

    condukt test-server --script examples/triage_agent.jsonl &
    condukt run --agent examples.triage_agent:Triage --mcp "node examples/mcp/server.js" \\
        --model openai:scripted --base-url http://127.0.0.1:PORT/v1 --api-key none "Triage issue 12"
"""

from __future__ import annotations

from typing import Any

import condukt

#: The labels put on issues so far, by issue number (a real tool would call the tracker's API).
LABELS: dict[int, list[str]] = {}


@condukt.tool
async def label(number: int, labels: list[str]) -> str:
    """Put labels on an issue (bug, docs, enhancement, duplicate, wontfix...)."""
    LABELS.setdefault(number, []).extend(labels)
    return f"#{number} labelled {', '.join(labels)}"


class Triage(condukt.Agent):
    """Reads an issue from the tracker, labels it and says what to do next."""

    model = "anthropic:claude-sonnet-4-5"
    system_prompt = (
        "You triage issues. Read the issue with get_issue, put one or two labels on it with label, "
        "then say in two sentences what should happen next."
    )
    thinking_level = "off"
    tool_timeout = 30.0

    def tools(self) -> list[Any]:
        return [label]
