"""Redactors end to end: patterns removed from prompts, steers, follow-ups and tool results."""

from __future__ import annotations

from typing import Any

import pytest

import condukt
from condukt import serialization
from condukt.events import AgentEvent, Done, SubagentEvent, ToolCallEnd
from condukt.redaction import DEFAULT_PATTERNS, Redactor, RegexRedactor
from condukt.testing import ScriptedModel, call, reply

from .helpers import Echo, Logged, result_texts, user_texts

PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA1c8Z7v4Qm2Yp0vHfX3bq9Lk2JtW8sNdUe5rGhTiKoPlMnBv\n"
    "Qw7xYz0aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2yZ3==\n"
    "-----END RSA PRIVATE KEY-----"
)

#: One realistic sample per default pattern.
SAMPLES = {
    "private_key": PRIVATE_KEY,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "anthropic_key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCd",
    "openai_key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github_token": "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "slack_token": "xoxb-1234567890-0987654321-AbCdEfGhIjKl",
    "google_api_key": "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "email": "jane.doe@example.com",
}

#: Further shapes of the same patterns.
VARIANTS = [
    ("private_key", PRIVATE_KEY.replace("RSA ", "OPENSSH ")),
    ("private_key", PRIVATE_KEY.replace("RSA ", "")),
    ("openai_key", "sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGh"),
    (
        "github_token",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
    ),
    ("github_token", "ghs_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    ("aws_access_key", "ASIAY34FZKBOKMUTVV7A"),
    ("email", "ops+alerts@mail.example.co.uk"),
]


class Steer(condukt.Tool):
    """``steer``: steers its own agent with the ``text`` option (as a user would, mid-run)."""

    name = "steer"
    description = "Interrupt."
    parameters = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        await context.agent.steer(self.opts["text"])
        return "steered"


async def run_every_way(sample: str, redactor: Any) -> ScriptedModel:
    """A prompt, a steer, a tool result and a follow-up, each carrying ``sample``; returns the model."""
    model = ScriptedModel([[call("steer"), call("echo")], reply("ok"), reply("after the follow-up")])
    tools = [Steer(text=f"steer {sample}"), Echo(text=f"result {sample}")]
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=tools, redactor=redactor)
        assert await agent.run(f"prompt {sample} end") == "ok"
        async with node.subscribe(agent.session_id) as events:
            await agent.follow_up(f"follow {sample}")
            async for published in events:
                if type(published.event) is Done:
                    break
    assert len(model.requests) == 3
    return model


@pytest.mark.parametrize(("name", "sample"), [*SAMPLES.items(), *VARIANTS], ids=lambda x: x[:16])
async def test_each_default_pattern_is_redacted_in_everything_sent_to_the_model(
    name: str, sample: str
) -> None:
    model = await run_every_way(sample, RegexRedactor())
    last = model.requests[-1]
    tag = f"[REDACTED:{name}]"
    assert user_texts(last) == [f"prompt {tag} end", f"steer {tag}", f"follow {tag}"]
    assert result_texts(last.messages) == ["steered", f"result {tag}"]
    for request in model.requests:
        assert sample not in serialization.dumps(request) and sample not in repr(request)


def test_the_default_patterns_are_the_documented_ones() -> None:
    assert set(DEFAULT_PATTERNS) == set(SAMPLES)
    assert RegexRedactor().patterns == DEFAULT_PATTERNS


def test_ordinary_text_is_left_alone() -> None:
    text = (
        "Deploy v1.2.3 to eu-west-1 at 10:00; risk-ant-colony ask-a-question AKIA short, see docs/README.md"
    )
    assert RegexRedactor().redact(text) == text


def test_samples_embedded_in_text_are_cut_out_exactly() -> None:
    redactor = RegexRedactor()
    text = f"export KEY={SAMPLES['anthropic_key']}\nmail {SAMPLES['email']}, aws={SAMPLES['aws_access_key']}."
    assert redactor.redact(text) == (
        "export KEY=[REDACTED:anthropic_key]\nmail [REDACTED:email], aws=[REDACTED:aws_access_key]."
    )


@pytest.mark.parametrize(
    ("extra", "tag"),
    [({"ticket": r"TICKET-\d{4}"}, "ticket"), ([r"TICKET-\d{4}"], "custom")],
    ids=["mapping", "list"],
)
async def test_extra_patterns_add_to_the_defaults(extra: Any, tag: str) -> None:
    model = await run_every_way(f"TICKET-1234 {SAMPLES['email']}", RegexRedactor(extra_patterns=extra))
    both = f"[REDACTED:{tag}] [REDACTED:email]"
    assert user_texts(model.requests[-1]) == [f"prompt {both} end", f"steer {both}", f"follow {both}"]
    assert result_texts(model.requests[-1].messages) == ["steered", f"result {both}"]


def test_several_listed_patterns_get_distinct_names() -> None:
    redactor = RegexRedactor(extra_patterns=[r"TICKET-\d+", r"PROJ-\d+"])
    assert redactor.redact("TICKET-1 PROJ-2") == "[REDACTED:custom] [REDACTED:custom_2]"
    assert set(redactor.patterns) == {*DEFAULT_PATTERNS, "custom", "custom_2"}


async def test_patterns_replace_the_defaults() -> None:
    sample = f"TICKET-1234 {SAMPLES['email']}"
    model = await run_every_way(sample, RegexRedactor(patterns={"ticket": r"TICKET-\d{4}"}))
    kept = f"[REDACTED:ticket] {SAMPLES['email']}"
    assert user_texts(model.requests[-1]) == [f"prompt {kept} end", f"steer {kept}", f"follow {kept}"]
    assert RegexRedactor(patterns=[]).redact(sample) == sample


def test_an_invalid_pattern_is_refused_at_construction_by_name() -> None:
    with pytest.raises(ValueError, match="invalid redaction pattern 'broken'"):
        RegexRedactor(extra_patterns={"broken": r"(unclosed"})


def test_extra_patterns_work_as_written_flags_groups_and_backreferences() -> None:
    redactor = RegexRedactor(
        extra_patterns={
            "password": r"(?i)password=\S+",  # a global inline flag
            "repeated": r"\b(\w{3,})-\1\b",  # a backreference to its own group
            "ticket": r"TICKET-(?P<number>\d+)",  # a named group
        }
    )
    text = "PassWord=hunter2 abc-abc abc-abd TICKET-7 jane@example.com"
    assert redactor.redact(text) == (
        "[REDACTED:password] [REDACTED:repeated] abc-abd [REDACTED:ticket] [REDACTED:email]"
    )


def test_the_pattern_listed_first_wins_at_the_same_position_and_empty_matches_are_ignored() -> None:
    redactor = RegexRedactor(patterns={"short": r"ab", "long": r"abcd", "maybe": r"x*"})
    assert redactor.redact("abcd xx abcd") == "[REDACTED:short]cd [REDACTED:maybe] [REDACTED:short]cd"
    # An Anthropic key also looks like an OpenAI key: the earlier pattern names it.
    assert RegexRedactor().redact(SAMPLES["anthropic_key"]) == "[REDACTED:anthropic_key]"


class Codenames:
    """A custom redactor: any object with ``redact(text) -> str``."""

    def redact(self, text: str) -> str:
        return text.replace("Project Nightingale", "[codename]")


async def test_a_custom_redactor_object_works() -> None:
    assert isinstance(Codenames(), Redactor)
    model = await run_every_way("Project Nightingale", Codenames())
    assert user_texts(model.requests[-1]) == [
        "prompt [codename] end",
        "steer [codename]",
        "follow [codename]",
    ]
    assert result_texts(model.requests[-1].messages) == ["steered", "result [codename]"]


async def test_a_redactor_as_class_attribute() -> None:
    class Careful(condukt.Agent):
        redactor = RegexRedactor()

    model = ScriptedModel([reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Careful, model=model)
        await agent.run(f"mail {SAMPLES['email']}")
    assert user_texts(model.requests[0]) == ["mail [REDACTED:email]"]


@pytest.mark.parametrize(
    "bad",
    [object(), "email", lambda text: text, RegexRedactor],
    ids=["object", "str", "function", "class-not-instance"],
)
async def test_something_that_is_not_a_redactor_is_refused_at_spawn(bad: Any) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(TypeError, match="redactor must have a redact"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), redactor=bad)


async def test_secrets_and_a_redactor_apply_together() -> None:
    text = f"token hunter2-token and {SAMPLES['github_token']}"
    model = ScriptedModel([call("echo", {}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            tools=[Echo(text=text)],
            secrets={"TOKEN": "hunter2-token"},
            redactor=RegexRedactor(),
        )
        await agent.run("go")
    assert result_texts(model.requests[1].messages) == ["token [REDACTED:TOKEN] and [REDACTED:github_token]"]


async def test_a_redacted_prompt_does_not_reach_events_or_history_either() -> None:
    # The redactor's contract: outbound messages are rewritten before they
    # enter the history, events, stores, telemetry and model requests.
    sample = SAMPLES["anthropic_key"]
    model = ScriptedModel([reply("ok")])
    log: list[Any] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(Logged, model=model, log=log, redactor=RegexRedactor())
        async with node.subscribe("*") as published:
            async with agent.stream(f"use {sample}") as events:
                streamed = [event async for event in events]
            published.close()
            received: list[AgentEvent] = [message async for message in published]
        history = await agent.history()
    captured = [repr(x) for x in [*streamed, *log, *received, *history]]
    assert [text for text in captured if sample in text] == []


async def test_sub_agents_inherit_a_redactor_set_as_a_class_attribute() -> None:
    # A class attribute and a start option are two ways to set the same thing.
    class Careful(condukt.Agent):
        redactor = RegexRedactor()

    child = ScriptedModel([call("echo", {}), reply("child done")])
    parent = ScriptedModel([call("subagent", {"role": "helper", "task": "look"}), reply("done")])
    role = (condukt.Agent, {"model": child, "tools": [Echo(text=f"mail {SAMPLES['email']}")]})
    async with condukt.open_node() as node:
        agent = await node.spawn(Careful, model=parent, subagents={"helper": role})
        async with agent.stream("delegate") as events:
            forwarded = [e.event for e in [event async for event in events] if type(e) is SubagentEvent]
    assert result_texts(child.requests[1].messages) == ["mail [REDACTED:email]"]
    assert [e.result for e in forwarded if type(e) is ToolCallEnd] == ["mail [REDACTED:email]"]


async def test_a_capability_answering_a_tool_call_is_scrubbed_too() -> None:
    from condukt.messages import ToolResultMessage

    class Answers(condukt.Capability):
        def intercept_tool_call(self, run: Any, call: Any) -> Any:
            return ToolResultMessage(call.id, call.name, (condukt.messages.TextBlock("token s3cr3t-value-99"),))

    model = ScriptedModel([call("anything"), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, capabilities=[Answers()], secrets={"TOKEN": "s3cr3t-value-99"}
        )
        assert await agent.run("go") == "ok"
        history = await agent.history()
    assert history[2].text == "token [REDACTED:TOKEN]"
    assert model.requests[1].messages[-1].text == "token [REDACTED:TOKEN]"
