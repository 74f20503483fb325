"""A FastAPI service with condukt: the agent endpoint under /v1, and a handler of your own.

Run it (offline: a stand-in model answers, so no API key is needed)::

    python examples/fastapi_app.py                      # or: uvicorn examples.fastapi_app:app

    curl -s localhost:8000/v1/agents/assistant/runs -H 'Authorization: Bearer dev-token' \\
         -H 'Content-Type: application/json' -d '{"prompt": "hello"}'
    curl -sN localhost:8000/v1/agents/assistant/runs -H 'Authorization: Bearer dev-token' \\
         -H 'Accept: text/event-stream' -H 'Content-Type: application/json' -d '{"prompt": "hello"}'
    curl -s localhost:8000/v1/operations/classify -H 'Authorization: Bearer dev-token' \\
         -H 'Content-Type: application/json' -d '{"text": "the app crashes on start"}'
    curl -s localhost:8000/shout -H 'Content-Type: application/json' -d '{"text": "hello"}'

Set ``CONDUKT_MODEL`` (e.g. ``anthropic:claude-sonnet-4-5``, with its API key
in the environment) to use a real model, ``API_TOKEN`` for the bearer token
and ``PORT`` for the port.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

import condukt
import condukt.asyncio
import condukt.lifespan
import condukt.web
from condukt.testing import FunctionModel, call, reply


def offline(request: condukt.ModelRequest) -> Any:
    """A stand-in model: answers operations with a verdict, and prompts with an echo."""
    if any(tool.name == "submit_result" for tool in request.tools):
        return call("submit_result", {"result": "bug"})
    return reply(f"You said: {request.messages[-1].text}")


MODEL: Any = os.environ.get("CONDUKT_MODEL") or FunctionModel(offline)


class Assistant(condukt.Agent):
    model = MODEL
    system_prompt = "You are a concise assistant."

    classify = condukt.operation(
        input={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        output={"enum": ["bug", "question", "feature"]},
        instructions="Classify the support ticket.",
    )


# The node lives as long as the app; condukt.asyncio.run in handlers uses it.
app = FastAPI(lifespan=condukt.lifespan.lifespan)
app.mount(
    "/v1",
    condukt.web.create_app(
        agents={"assistant": Assistant},
        operations=[Assistant.classify],
        token=os.environ.get("API_TOKEN", "dev-token"),
    ),
)


class Shout(BaseModel):
    text: str


@app.post("/shout")
async def shout(body: Shout) -> dict[str, str]:
    """A handler of your own: a one-shot run on the app's node."""
    text = await condukt.asyncio.run(f"Repeat in capitals: {body.text}", model=MODEL)
    return {"text": text}


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
