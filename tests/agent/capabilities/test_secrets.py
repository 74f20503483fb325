"""Secrets end to end: resolved at start, given to subprocesses, never seen anywhere else.

"Anywhere" is every byte a user can capture: model requests, streamed
events, ``handle_event``, node subscribers, history, telemetry events,
OpenTelemetry spans and logs. A ``Command``'s own ``env`` values are
treated the same way (the last section).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

import condukt
from condukt import secrets, serialization
from condukt.events import Error, Event, SubagentEvent, ToolCallEnd
from condukt.messages import DocumentBlock, Message, ToolResultMessage
from condukt.secrets import SecretError
from condukt.testing import ScriptedModel, call, reply

from ..helpers import Recorder, of_type
from .helpers import Echo, Logged, capture_telemetry, leaks, result_texts

SECRET = "s3cr3t-value-7f3a9c"
API_KEY = "agent-api-key-0d1e2f"
PRINT_SECRET = [sys.executable, "-c", f"print('{SECRET}')"]


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Spy(condukt.Tool):
    """``spy``: records the secrets its context exposes (what Bash/Command would get)."""

    name = "spy"
    description = "Look at the environment."
    parameters = {"type": "object", "properties": {}}

    def __init__(self, **opts: Any) -> None:
        super().__init__(**opts)
        self.seen: list[dict[str, str]] = []

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        self.seen.append(dict(context.secrets))
        return "looked"


@condukt.tool
async def reveal(context: condukt.ToolContext) -> str:
    """Return the secret straight from the tool context."""
    return f"the token is {context.secrets['SVC_TOKEN']}!"


@condukt.tool
async def show_key() -> str:
    """Return the agent's own API key (as a buggy tool might)."""
    return f"key={API_KEY}"


async def spy_secrets(
    node: condukt.Node, agent_class: type[condukt.Agent] = condukt.Agent, **options: Any
) -> dict[str, str]:
    """Spawn an agent with ``options``, let the model call ``spy`` once, return what it saw."""
    spy = Spy()
    agent = await node.spawn(
        agent_class, model=ScriptedModel([call("spy"), reply("ok")]), tools=[spy], **options
    )
    assert await agent.run("look") == "ok"
    await agent.stop()
    (seen,) = spy.seen
    return seen


# --------------------------------------------------------------------------- never anywhere


async def test_a_secret_returned_by_tools_never_appears_in_any_captured_byte(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    (tmp_path / "creds.txt").write_text(f"user=deploy\ntoken={SECRET}\n")
    py = condukt.tools.Command(command=sys.executable, name="py", description="Run Python.")
    model = ScriptedModel(
        [
            [
                call("read", {"path": "creds.txt"}),
                call("bash", {"command": 'printenv SVC_TOKEN; printf %s "$SVC_TOKEN" | sha256sum'}),
                call("py", {"args": ["-c", "import os; print('env:', os.environ['SVC_TOKEN'])"]}),
                call("reveal"),
                call("show_key"),
            ],
            call("bash", {"command": "cat creds.txt >&2; exit 3"}),
            reply("done"),
        ]
    )
    log: list[Any] = []
    async with condukt.open_node() as node:
        with capture_telemetry() as everything:
            subscription = node.subscribe("*")
            agent = await node.spawn(
                Logged,
                model=model,
                api_key=API_KEY,
                cwd=tmp_path,
                log=log,
                tools=[condukt.tools.Read, condukt.tools.Bash, py, reveal, show_key],
                secrets={"SVC_TOKEN": secrets.command(PRINT_SECRET)},
            )
            async with agent.stream("check the credentials") as events:
                everything.events += [event async for event in events]
            assert events.result == "done"
            everything.histories.append(await agent.history())
            await agent.stop()
        subscription.close()
        everything.published += [message async for message in subscription]
    # Every channel was captured: the same events three ways.
    assert len(everything.published) == len(log) == len(everything.events) > 10
    everything.events += log
    everything.requests += model.requests

    results = result_texts(model.requests[2].messages)
    # The value reached the subprocesses (bash hashed the real value) ...
    assert any(sha(SECRET) in text for text in results)
    # ... and every way a tool returned it was redacted.
    assert "token=[REDACTED:SVC_TOKEN]" in results[0]
    assert results[1].startswith("[REDACTED:SVC_TOKEN]\n")
    assert "env: [REDACTED:SVC_TOKEN]" in results[2]
    assert results[3] == "the token is [REDACTED:SVC_TOKEN]!"
    assert results[4] == "key=[REDACTED:API_KEY]"
    assert "token=[REDACTED:SVC_TOKEN]" in results[5] and "(exit code: 3)" in results[5]
    assert {e.name[1] for e in everything.telemetry_events} == {"agent", "run", "llm", "tool"}
    assert len(everything.exporter.get_finished_spans()) == 1 + 3 + 6

    captured = everything.dump(caplog)
    assert leaks(captured, SECRET) == []
    assert leaks(captured, API_KEY) == []


async def test_a_tool_exception_carrying_a_secret_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    @condukt.tool
    async def connect(context: condukt.ToolContext) -> str:
        """Connect to the service."""
        raise RuntimeError(f"connection refused for token {context.secrets['SVC_TOKEN']}")

    caplog.set_level(logging.DEBUG)
    model = ScriptedModel([call("connect"), reply("done")])
    async with condukt.open_node() as node:
        with capture_telemetry() as everything:
            agent = await node.spawn(
                condukt.Agent, model=model, tools=[connect], secrets={"SVC_TOKEN": SECRET}
            )
            assert await agent.run("connect") == "done"
            everything.histories.append(await agent.history())
    everything.requests += model.requests
    (result,) = result_texts(model.requests[1].messages)
    assert result == "Error: RuntimeError: connection refused for token [REDACTED:SVC_TOKEN]"
    (tool_exception,) = [e for e in everything.telemetry_events if e.name == ("condukt", "tool", "exception")]
    assert tool_exception.metadata["error"] == "connection refused for token [REDACTED:SVC_TOKEN]"
    # The failure is logged (a tool bug is worth a warning), but without the value.
    assert "connect" in caplog.text
    assert leaks(everything.dump(caplog), SECRET) == []


async def test_a_failed_run_reports_its_error_without_the_secret() -> None:
    # A provider error may quote what it was sent (a key, a token).
    model = ScriptedModel([condukt.ModelError(f"401: invalid credentials {SECRET}")])
    log: list[Any] = []
    async with condukt.open_node() as node:
        with capture_telemetry() as everything:
            agent = await node.spawn(Logged, model=model, log=log, secrets={"SVC_TOKEN": SECRET})
            with pytest.raises(condukt.ModelError):
                await agent.run("go")
    (run_exception,) = [e for e in everything.telemetry_events if e.name == ("condukt", "run", "exception")]
    assert run_exception.metadata["error"] == "401: invalid credentials [REDACTED:SVC_TOKEN]"
    (error,) = [e for e in log if type(e) is Error]
    assert error.message == "401: invalid credentials [REDACTED:SVC_TOKEN]"


async def test_a_value_inside_a_json_result_is_redacted_in_its_escaped_form() -> None:
    password = 'pa"ss\\wörd\t42'  # quotes, a backslash, non-ASCII, a tab: all escaped in JSON

    @condukt.tool
    async def config(context: condukt.ToolContext) -> dict[str, Any]:
        """The service configuration."""
        return {"db": {"password": context.secrets["DB_PASSWORD"]}}

    @condukt.tool
    async def ascii_config(context: condukt.ToolContext) -> str:
        """The configuration as the tool encodes it itself (ASCII-only JSON)."""
        return json.dumps({"password": context.secrets["DB_PASSWORD"]})

    model = ScriptedModel([[call("config"), call("ascii_config")], reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[config, ascii_config], secrets={"DB_PASSWORD": password}
        )
        await agent.run("go")
    assert result_texts(model.requests[1].messages) == [
        '{"db": {"password": "[REDACTED:DB_PASSWORD]"}}',
        '{"password": "[REDACTED:DB_PASSWORD]"}',
    ]


async def test_a_secret_in_a_text_document_is_redacted_and_a_pdf_is_left_as_is() -> None:
    pdf = DocumentBlock.from_bytes(b"%PDF-1.4 " + SECRET.encode(), "application/pdf", "raw.pdf")

    @condukt.tool
    async def export(context: condukt.ToolContext) -> list[DocumentBlock]:
        """Exports the configuration as documents."""
        token = context.secrets["SVC_TOKEN"]
        return [DocumentBlock.from_text(f"token = {token}\n", "text/plain", "config.txt"), pdf]

    model = ScriptedModel([call("export"), reply("ok")])
    pasted = DocumentBlock.from_text(f"the old token was {SECRET}", "text/markdown", "notes.md")
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[export], secrets={"SVC_TOKEN": SECRET})
        await agent.run("go", documents=[pasted, pdf])
        history = await agent.history()
    # The prompt's text documents are scrubbed as its text is.
    [_, prompt_text, prompt_pdf] = model.requests[0].messages[0].content
    assert isinstance(prompt_text, DocumentBlock) and prompt_text.title == "notes.md"
    assert prompt_text.to_bytes() == b"the old token was [REDACTED:SVC_TOKEN]"
    assert prompt_pdf == pdf
    [result] = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    text, binary = result.content
    assert isinstance(text, DocumentBlock) and text.to_bytes() == b"token = [REDACTED:SVC_TOKEN]\n"
    assert text.title == "config.txt" and text.media_type == "text/plain"
    assert binary == pdf  # a PDF's bytes are not text a scrubber can read: sent as they are
    assert history[2] == result


async def test_a_secret_in_a_documents_title_is_redacted_whatever_its_type() -> None:
    """A title reaches the model (Anthropic's ``title``, OpenAI's ``filename``), the history and the store."""

    @condukt.tool
    async def export(context: condukt.ToolContext) -> DocumentBlock:
        """Exports the configuration."""
        return DocumentBlock.from_bytes(b"%PDF-1.4", "application/pdf", f"dump-{context.secrets['SVC_TOKEN']}.pdf")

    model = ScriptedModel([call("export"), reply("ok")])
    pasted = DocumentBlock.from_text("nothing secret", "text/plain", f"notes for {SECRET}.txt")
    pdf = DocumentBlock.from_bytes(b"%PDF-1.4", "application/pdf", f"{SECRET}.pdf")
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[export], secrets={"SVC_TOKEN": SECRET})
        await agent.run("go", documents=[pasted, pdf])
        history = await agent.history()
    assert SECRET not in repr(model.requests) and SECRET not in repr(history)
    [_, text, binary] = history[0].content
    assert isinstance(text, DocumentBlock) and text.title == "notes for [REDACTED:SVC_TOKEN].txt"
    assert text.to_bytes() == b"nothing secret"
    assert isinstance(binary, DocumentBlock) and binary.title == "[REDACTED:SVC_TOKEN].pdf"
    assert binary.to_bytes() == b"%PDF-1.4"  # the bytes of a PDF are still sent as they are
    [result] = history[2].content
    assert isinstance(result, DocumentBlock) and result.title == "dump-[REDACTED:SVC_TOKEN].pdf"


async def test_a_secret_in_a_text_document_that_is_not_utf8_is_redacted() -> None:
    """A Latin-1 text file is still text: the secret is replaced, every other byte kept."""
    model = ScriptedModel([reply("ok")])
    latin1 = DocumentBlock.from_bytes(f"caf\xe9 token={SECRET}\n".encode("latin-1"), "text/plain", "cafe.txt")
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, secrets={"SVC_TOKEN": SECRET})
        await agent.run("go", documents=[latin1])
    [_, sent] = model.requests[0].messages[0].content
    assert isinstance(sent, DocumentBlock)
    assert sent.to_bytes() == b"caf\xe9 token=[REDACTED:SVC_TOKEN]\n"


async def test_values_shorter_than_four_bytes_are_not_redacted() -> None:
    # "éé" is two characters but four UTF-8 bytes: long enough.
    model = ScriptedModel([call("echo", {"text": "pin 123, word éé, abc"}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[Echo], secrets={"PIN": "123", "WORD": "éé", "AB": "abc"}
        )
        await agent.run("go")
    assert secrets.MIN_REDACT_BYTES == 4
    assert result_texts(model.requests[1].messages) == ["pin 123, word [REDACTED:WORD], abc"]


async def test_the_longest_value_wins_when_secrets_overlap() -> None:
    model = ScriptedModel([call("echo", {"text": "tok-abcd-efgh and tok-abcd"}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[Echo], secrets={"SHORT": "tok-abcd", "LONG": "tok-abcd-efgh"}
        )
        await agent.run("go")
    assert result_texts(model.requests[1].messages) == ["[REDACTED:LONG] and [REDACTED:SHORT]"]


# --------------------------------------------------------------------------- providers


async def test_every_kind_of_provider_resolves_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUKT_TEST_GH", "gh-from-env")
    calls: list[str] = []

    def sync_fetch() -> str:
        calls.append("sync")
        return "from-sync-callable"

    async def async_fetch() -> str:
        calls.append("async")
        await trio.lowlevel.checkpoint()
        return "from-async-callable"

    async with condukt.open_node() as node:
        seen = await spy_secrets(
            node,
            secrets={
                "GH_TOKEN": secrets.env("CONDUKT_TEST_GH"),
                "FALLBACK": secrets.env("CONDUKT_TEST_UNSET_VAR", default="the-default"),
                "STATIC": secrets.static("static-value"),
                "PLAIN": "plain-string",
                "CMD": secrets.command(PRINT_SECRET),
                "CMD_STR": secrets.command(f"{sys.executable} -c \"print('from shlex')\""),
                "SYNC": sync_fetch,
                "ASYNC": async_fetch,
            },
        )
    assert seen == {
        "GH_TOKEN": "gh-from-env",
        "FALLBACK": "the-default",
        "STATIC": "static-value",
        "PLAIN": "plain-string",
        "CMD": SECRET,  # the trailing newline is stripped
        "CMD_STR": "from shlex",
        "SYNC": "from-sync-callable",
        "ASYNC": "from-async-callable",
    }
    assert sorted(calls) == ["async", "sync"]  # once each, at start


async def test_a_missing_environment_variable_fails_the_spawn_naming_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CONDUKT_TEST_MISSING", raising=False)
    async with condukt.open_node() as node:
        with pytest.raises(SecretError) as failure:
            await node.spawn(
                condukt.Agent,
                model=ScriptedModel([]),
                secrets={"OTHER": SECRET, "DEPLOY_KEY": secrets.env("CONDUKT_TEST_MISSING")},
            )
    message = str(failure.value)
    assert "DEPLOY_KEY" in message and "CONDUKT_TEST_MISSING" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    ("argv", "timeout", "expected"),
    [
        ([sys.executable, "-c", f"print('{SECRET}'); raise SystemExit(2)"], 10.0, "exited with status 2"),
        ([sys.executable, "-c", "import time; time.sleep(30)"], 0.3, "took longer than 0.3s"),
        (["/nonexistent/condukt-vault-cli", "read"], 10.0, "cannot run"),
    ],
    ids=["non-zero-exit", "timeout", "missing-executable"],
)
async def test_a_failing_command_fails_the_spawn(argv: list[str], timeout: float, expected: str) -> None:
    async with condukt.open_node() as node:
        with trio.fail_after(5):
            with pytest.raises(SecretError) as failure:
                await node.spawn(
                    condukt.Agent,
                    model=ScriptedModel([]),
                    secrets={"DB_PASSWORD": secrets.command(argv, timeout=timeout)},
                )
    message = str(failure.value)
    assert message.startswith("secret DB_PASSWORD: ") and expected in message
    assert SECRET not in message  # stdout of a failed command is not quoted


async def test_a_failing_callable_fails_the_spawn_with_its_cause() -> None:
    def broken() -> str:
        raise KeyError("vault/item")

    async def not_text() -> Any:
        return 42

    async with condukt.open_node() as node:
        with pytest.raises(SecretError, match="secret BROKEN: provider raised KeyError") as failure:
            await node.spawn(condukt.Agent, model=ScriptedModel([]), secrets={"BROKEN": broken})
        assert isinstance(failure.value.__cause__, KeyError)
        with pytest.raises(SecretError, match="secret NUMBER: provider returned int, not str"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), secrets={"NUMBER": not_text})


async def test_one_failing_provider_cancels_the_others() -> None:
    slow = secrets.command([sys.executable, "-c", "import time; time.sleep(30)"], timeout=20)
    async with condukt.open_node() as node:
        with trio.fail_after(5):
            with pytest.raises(SecretError, match="FAST"):
                await node.spawn(
                    condukt.Agent,
                    model=ScriptedModel([]),
                    secrets={"SLOW": slow, "FAST": secrets.env("CONDUKT_NO_SUCH_VAR")},
                )


@pytest.mark.parametrize("name", ["1TOKEN", "MY-TOKEN", "MY TOKEN", "", "TOKEN\n", "tök"])
async def test_invalid_names_are_rejected_at_spawn(name: str) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(SecretError, match="not a valid environment variable name"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), secrets={name: "some-value"})


async def test_something_that_is_no_provider_is_rejected_at_spawn() -> None:
    async with condukt.open_node() as node:
        with pytest.raises(SecretError, match="secret PORT: not a provider"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), secrets={"PORT": 8080})


# --------------------------------------------------------------------------- where values go


async def test_secrets_reach_bash_and_command_as_environment_variables(tmp_path: Path) -> None:
    script = "import hashlib, os; print('py', hashlib.sha256(os.environ['SVC_TOKEN'].encode()).hexdigest())"
    model = ScriptedModel(
        [
            [
                call("bash", {"command": 'printf "bash %s" "$(printf %s "$SVC_TOKEN" | sha256sum)"'}),
                call("py", {"args": ["-c", script]}),
            ],
            reply("ok"),
        ]
    )
    py = condukt.tools.Command(command=sys.executable, name="py")
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            cwd=tmp_path,
            tools=[condukt.tools.Bash, py],
            secrets={"SVC_TOKEN": SECRET},
        )
        await agent.run("hash it")
    bash_out, py_out = result_texts(model.requests[1].messages)
    assert bash_out.startswith(f"bash {sha(SECRET)}")
    assert py_out == f"py {sha(SECRET)}"


async def test_bash_passes_only_allowlisted_host_variables_and_declared_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUKT_HOST_API_TOKEN", "host-token-value")
    monkeypatch.setenv("CONDUKT_HOST_COLOUR", "teal")
    command = 'echo "token=${CONDUKT_HOST_API_TOKEN:-unset} colour=${CONDUKT_HOST_COLOUR:-unset} declared=$DECLARED_TOKEN"'
    model = ScriptedModel([call("bash", {"command": command}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=model,
            cwd=tmp_path,
            tools=[condukt.tools.Bash],
            secrets={"DECLARED_TOKEN": "ab"},
        )
        await agent.run("look")
    assert result_texts(model.requests[1].messages) == ["token=unset colour=unset declared=ab"]


class Vaulted(condukt.Agent):
    """Declares its secrets with the ``secrets()`` method, from a value set in ``init``."""
    extra_options = frozenset({"vault_value"})

    async def init(self, options: Mapping[str, Any]) -> None:
        self.vault_value = options.get("vault_value", "method-value")

    def secrets(self) -> Mapping[str, Any]:
        return {"FROM_METHOD": secrets.static(self.vault_value)}


async def test_the_secrets_method_and_the_option_that_replaces_it() -> None:
    async with condukt.open_node() as node:
        assert await spy_secrets(node, Vaulted) == {"FROM_METHOD": "method-value"}
        assert await spy_secrets(node, Vaulted, vault_value="from-init") == {"FROM_METHOD": "from-init"}
        assert await spy_secrets(node, Vaulted, secrets={"FROM_OPTION": "option-value"}) == {
            "FROM_OPTION": "option-value"
        }
        assert await spy_secrets(node, Vaulted, secrets={}) == {}
        # The API key is redacted but never handed to tools.
        assert await spy_secrets(node, condukt.Agent, api_key=API_KEY) == {}


async def test_sub_agents_inherit_the_resolved_values(tmp_path: Path) -> None:
    fetched: list[int] = []

    def fetch() -> str:
        fetched.append(1)
        return SECRET

    child_model = ScriptedModel(
        [
            call("bash", {"command": 'echo "$SVC_TOKEN"; printf %s "$SVC_TOKEN" | sha256sum'}),
            reply("child done"),
        ]
    )
    parent_model = ScriptedModel(
        [call("subagent", {"role": "ops", "task": "print the token"}), reply("done")]
    )
    role = (condukt.Agent, {"model": child_model, "tools": [condukt.tools.Bash]})
    log: list[Any] = []
    async with condukt.open_node() as node:
        parent = await node.spawn(
            Logged,
            model=parent_model,
            log=log,
            cwd=tmp_path,
            subagents={"ops": role},
            secrets={"SVC_TOKEN": fetch},
        )
        assert await parent.run("delegate") == "done"
        history = await parent.history()
    assert fetched == [1]  # resolved once, by the parent
    (child_result,) = result_texts(child_model.requests[1].messages)
    assert child_result.startswith("[REDACTED:SVC_TOKEN]\n") and sha(SECRET) in child_result
    forwarded = [e.event for e in log if type(e) is SubagentEvent and type(e.event) is ToolCallEnd]
    assert [e.result for e in forwarded] == [child_result]
    assert all(SECRET not in repr(x) for x in [*log, *history, *child_model.requests, *parent_model.requests])
    assert [m.text for m in history if isinstance(m, ToolResultMessage)] == ["child done"]


# --------------------------------------------------------------------------- a Command's own env

#: A value given to one Command through its ``env`` (not an agent secret): redacted all the same.
ENV_SECRET = "tok-5f3a9c1e-very-secret"

ENV_PRINT_TOKEN = "import os; print('token is', os.environ['DEPLOY_TOKEN'])"
ENV_PRINT_REVERSED = "import os; print('reversed', os.environ['DEPLOY_TOKEN'][::-1])"
ENV_PRINT_ENVIRON = "import os, json; print(json.dumps(dict(os.environ)))"
ENV_FAIL_LOUDLY = "import os, sys; sys.exit('failed with ' + os.environ['DEPLOY_TOKEN'])"
ENV_HANG_AFTER_PRINT = "import os, time; print(os.environ['DEPLOY_TOKEN'], flush=True); time.sleep(60)"


def py_call(code: str, **extra: Any) -> Any:
    return call("py", {"args": ["-c", code], **extra})


async def test_command_env_never_appears_anywhere(tmp_path: Path) -> None:
    command = condukt.tools.Command(
        command=sys.executable, name="py", description="Run Python.", env={"DEPLOY_TOKEN": ENV_SECRET}
    )
    model = ScriptedModel(
        [
            [py_call(ENV_PRINT_TOKEN), py_call(ENV_PRINT_REVERSED), py_call(ENV_PRINT_ENVIRON)],
            [py_call(ENV_FAIL_LOUDLY), py_call(ENV_HANG_AFTER_PRINT, timeout=1)],
            call("bash", {"command": 'echo "bash sees ${DEPLOY_TOKEN:-nothing}"'}),
            reply("done"),
        ]
    )
    log: list[Any] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(
            Recorder, model=model, tools=[command, condukt.tools.Bash], cwd=tmp_path, log=log
        )
        async with agent.stream("use the tools") as events:
            streamed = [event async for event in events]
        assert events.result == "done"
        history = await agent.history()
        agent_repr = repr(agent)
    results = {e.id: e for e in of_type(log, ToolCallEnd)}
    texts = [e.result for e in results.values()]
    # The variable reached the subprocesses, and the output is redacted.
    assert any(f"reversed {ENV_SECRET[::-1]}" in t for t in texts)
    assert any("token is [REDACTED:DEPLOY_TOKEN]" in t for t in texts)
    assert any("failed with [REDACTED:DEPLOY_TOKEN]" in t and "(exit code: 1)" in t for t in texts)
    assert any("timed out" in t and "[REDACTED:DEPLOY_TOKEN]" in t for t in texts)
    # Bash in the same agent does not get a Command's env.
    assert any("bash sees nothing" in t for t in texts)

    captured: list[str] = [agent_repr, repr(command), repr(command.definition())]
    for event in [*log, *streamed]:
        captured += [repr(event), serialization.dumps(event, Event)]
    for message in history:
        captured += [repr(message), serialization.dumps(message, Message)]
    for request in model.requests:
        captured += [repr(request), serialization.dumps(request)]
    found = [text for text in captured if ENV_SECRET in text]
    assert found == []
    assert len(model.requests) == 4
