"""condukt.ModelSettings: checked values, start and run options, each protocol's field names.

Field names per protocol, from the public API references: Anthropic Messages
(``temperature``, ``top_p``, ``stop_sequences``; no seed), OpenAI Chat
Completions (``temperature``, ``top_p``, ``stop``, ``seed``), the OpenAI
Responses API (``temperature``, ``top_p``; no stop, no seed), Gemini
``generationConfig`` (``temperature``, ``topP``, ``stopSequences``, ``seed``),
Mistral's chat completions (``random_seed``), Bedrock Converse
``inferenceConfig`` (``temperature``, ``topP``, ``maxTokens``,
``stopSequences``; no seed).
"""

from __future__ import annotations

from typing import Any

import pytest

import condukt
from condukt.providers import UnsupportedSetting
from condukt.testing import ScriptedModel, reply
from condukt.testing.server import ProtocolServer
from condukt.testing.server import reply as server_reply

from .helpers import spawn

SETTINGS = condukt.ModelSettings(temperature=0.2, top_p=0.9, max_tokens=77, stop=["END"], seed=7)


def test_values_are_checked_when_made() -> None:
    assert condukt.ModelSettings(stop="END").stop == ("END",)
    for bad in ({"temperature": -1}, {"temperature": 2.5}, {"top_p": 0}, {"top_p": 1.5}, {"max_tokens": 0}):
        with pytest.raises(ValueError):
            condukt.ModelSettings(**bad)
    for bad in ({"temperature": "hot"}, {"seed": 1.5}, {"max_tokens": True}, {"stop": 3}):
        with pytest.raises(TypeError):
            condukt.ModelSettings(**bad)
    with pytest.raises(ValueError):
        condukt.ModelSettings(stop=[""])


def test_a_run_overrides_the_agent_field_by_field() -> None:
    agent = condukt.ModelSettings(temperature=0.1, seed=3)
    run = condukt.ModelSettings(temperature=0.5, stop="x")
    assert agent.merged(run) == condukt.ModelSettings(temperature=0.5, seed=3, stop=("x",))
    assert agent.merged(None) is agent


async def test_start_and_run_options_reach_the_request(node: condukt.Node) -> None:
    model = ScriptedModel([reply("one"), reply("two")])
    agent = await node.spawn(condukt.Agent, model=model, model_settings={"temperature": 0.1, "max_tokens": 10})
    await agent.run("a")
    await agent.run("b", model_settings=condukt.ModelSettings(temperature=0.9, seed=1))
    first, second = model.requests
    assert first.settings == condukt.ModelSettings(temperature=0.1, max_tokens=10) and first.max_tokens == 10
    assert second.settings == condukt.ModelSettings(temperature=0.9, max_tokens=10, seed=1)
    assert second.max_tokens == 10


async def test_bad_options_fail_in_the_caller(node: condukt.Node) -> None:
    with pytest.raises(TypeError, match="unknown setting"):
        await node.spawn(condukt.Agent, model=ScriptedModel([]), model_settings={"temprature": 1})
    agent = await node.spawn(condukt.Agent, model=ScriptedModel([]))
    with pytest.raises(ValueError, match="temperature"):
        await agent.run("x", model_settings={"temperature": 9})


#: (protocol, what the body must hold for SETTINGS, settings that protocol refuses)
CASES: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("anthropic", {"temperature": 0.2, "top_p": 0.9, "max_tokens": 77, "stop_sequences": ["END"]}, ("seed",)),
    ("openai", {"temperature": 0.2, "top_p": 0.9, "max_completion_tokens": 77, "stop": ["END"], "seed": 7}, ()),
    ("openai-responses", {"temperature": 0.2, "top_p": 0.9, "max_output_tokens": 77}, ("stop", "seed")),
    ("mistral", {"temperature": 0.2, "top_p": 0.9, "max_tokens": 77, "stop": ["END"], "random_seed": 7}, ()),
    ("xai", {"temperature": 0.2, "top_p": 0.9, "max_tokens": 77, "stop": ["END"], "seed": 7}, ()),
    ("deepseek", {"temperature": 0.2, "top_p": 0.9, "max_tokens": 77, "stop": ["END"]}, ("seed",)),
]


def _subset(body: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    return {key: body.get(key) for key in expected}


@pytest.mark.parametrize(("protocol", "expected", "refused"), CASES, ids=[case[0] for case in CASES])
async def test_settings_reach_each_protocols_body_under_its_field_names(
    node: condukt.Node, server: ProtocolServer, protocol: str, expected: dict[str, Any], refused: tuple[str, ...]
) -> None:
    accepted = condukt.ModelSettings(**{k: v for k, v in SETTINGS.given().items() if k not in refused})
    server.add(server_reply("ok"))
    agent = await spawn(node, server, protocol, stream=False)
    assert await agent.run("hi", model_settings=accepted) == "ok"
    [request] = server.requests
    assert _subset(request.body, expected) == expected
    for name in refused:
        with pytest.raises(UnsupportedSetting, match=name) as caught:
            await agent.run("hi", model_settings={name: SETTINGS.given()[name]})
        assert caught.value.setting == name
    assert len(server.requests) == 1  # nothing was sent for a refused setting


async def test_gemini_puts_them_in_generation_config(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(server_reply("ok"))
    agent = await spawn(node, server, "gemini", stream=False, model_settings=SETTINGS)
    assert await agent.run("hi") == "ok"
    [request] = server.requests
    assert request.body["generationConfig"] == {
        "maxOutputTokens": 77,
        "temperature": 0.2,
        "topP": 0.9,
        "stopSequences": ["END"],
        "seed": 7,
    }


async def test_anthropic_refuses_a_temperature_with_extended_thinking(node: condukt.Node, server: ProtocolServer) -> None:
    agent = await spawn(node, server, "anthropic", thinking_level="low")
    with pytest.raises(UnsupportedSetting, match="Anthropic Messages API.*temperature"):
        await agent.run("hi", model_settings={"temperature": 0.5})
    assert server.requests == []
    server.add(server_reply("ok"))
    assert await agent.run("hi", model_settings={"temperature": 1, "top_p": 0.95}) == "ok"


async def test_the_cloud_protocols_take_them_under_their_own_names(node: condukt.Node, server: ProtocolServer) -> None:
    """Vertex AI (Gemini's generationConfig, Claude's Messages fields), Azure (Chat Completions)."""
    accepted = condukt.ModelSettings(temperature=0.2, top_p=0.9, max_tokens=77, stop=["END"])
    server.add(server_reply("a"), server_reply("b"), server_reply("c"))
    vertex_options = {"project": "p", "location": "us-east5", "token": "t", "stream": False}
    for model, options in [
        ("vertex:gemini-2.5-flash", vertex_options),
        ("vertex-anthropic:claude-sonnet-4-5", vertex_options),
        ("azure:dep", {"stream": False}),
    ]:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            base_url=server.url,
            api_key="k" if model.startswith("azure") else None,
            model_options=options,
            model_settings=accepted,
        )
        await agent.run("hi")
    gemini, claude, azure = (request.body for request in server.requests)
    assert gemini["generationConfig"] == {"maxOutputTokens": 77, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]}
    assert _subset(claude, {"max_tokens": 77, "temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"]}) == {
        "max_tokens": 77, "temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"],
    }
    assert _subset(azure, {"max_completion_tokens": 0, "temperature": 0, "top_p": 0, "stop": 0}) == {
        "max_completion_tokens": 77, "temperature": 0.2, "top_p": 0.9, "stop": ["END"],
    }
