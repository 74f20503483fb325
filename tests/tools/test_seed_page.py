"""Python twins of every example on the original Elixir "Tools" page (seed-tools.md).

Each section of the page has a test below, in the page's order: the built-in
tool sets, mixing them with extras, scoped command grants (the ReviewAgent),
the Command arguments, a custom tool (Weather), parameterized tools
(Database), the tool context and returning results.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from waiting import WallBound

import condukt
from condukt.messages import ToolResultMessage
from condukt.testing import ScriptedModel, call, reply
from condukt.tools import Bash, Command, Edit, Read, Write

# ---------------------------------------------------------------- "Built-in tool sets"


class CodingAgent(condukt.Agent):
    def tools(self) -> list[Any]:
        return condukt.tools.coding_tools()  # Read, Bash, Edit, Write


class ReadOnlyAgent(condukt.Agent):
    def tools(self) -> list[Any]:
        return condukt.tools.read_only_tools()  # Read, Bash


# ---------------------------------------------------------------- "Defining a custom tool"


class WeatherAPI:
    """Stands in for the page's external weather service."""

    temperatures = {"Paris": 70, "Oslo": 41}

    @classmethod
    async def get(cls, location: str) -> dict[str, Any]:
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

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        try:
            data = await WeatherAPI.get(args["location"])
        except LookupError as reason:
            raise condukt.ToolError(str(reason)) from None
        return f"Temperature: {data['temp']}F"


# ---------------------------------------------------------------- "You can mix the helpers with extras"


class WeatherReader(condukt.Agent):
    def tools(self) -> list[Any]:
        return condukt.tools.read_only_tools() + [Weather]


# ---------------------------------------------------------------- "Scoped command grants"


class ReviewAgent(condukt.Agent):
    def tools(self) -> list[Any]:
        return [
            condukt.tools.Read,
            condukt.tools.Command(command="git"),
            condukt.tools.Command(command="gh", env={"GH_TOKEN": os.environ["GH_TOKEN"]}),
        ]


# ---------------------------------------------------------------- "Parameterized tools"


class Repo:
    """Stands in for the page's ``MyApp.Repo``."""

    tables: Mapping[str, list[dict[str, Any]]] = {
        "users": [{"id": 1, "name": "ada"}, {"id": 2, "name": "grace"}],
        "orders": [{"id": 10, "item": "lamp"}, {"id": 11, "item": "desk"}],
    }

    @classmethod
    def query(cls, table: str, q: str) -> list[dict[str, Any]]:
        return [row for row in cls.tables[table] if q in json.dumps(row)]


class Database(condukt.Tool):
    @property
    def name(self) -> str:  # type: ignore[override]
        return f"query_{self.opts['table']}"

    @property
    def description(self) -> str:  # type: ignore[override]
        return f"Query the {self.opts['table']} table"

    @property
    def parameters(self) -> dict[str, Any]:  # type: ignore[override]
        return {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        table = context.opts["table"]
        return Repo.query(table, args["q"])


class DataAgent(condukt.Agent):
    def tools(self) -> list[Any]:
        return [Database(table="users"), Database(table="orders")]


# ---------------------------------------------------------------- helpers


async def run_turns(agent_class: type[condukt.Agent], steps: list[Any], **options: Any) -> ScriptedModel:
    """Run ``agent_class`` on a script ending in a reply; returns the model (its requests)."""
    model = ScriptedModel([*steps, reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(agent_class, model=model, **options)
        assert await agent.run("go") == "done"
    return model


def results_of(model: ScriptedModel) -> list[ToolResultMessage]:
    """Every tool result the model was sent, in order."""
    return [m for m in model.requests[-1].messages if isinstance(m, ToolResultMessage)]


# ---------------------------------------------------------------- tests


async def test_built_in_tool_sets(tmp_path: Path) -> None:
    assert condukt.tools.coding_tools() == [Read, Bash, Edit, Write]
    assert condukt.tools.read_only_tools() == [Read, Bash]
    (tmp_path / "a.txt").write_text("one\n")
    model = await run_turns(
        CodingAgent,
        [
            [
                call("write", {"path": "b.txt", "content": "two\n"}),
                call("edit", {"path": "a.txt", "old_text": "one", "new_text": "1"}),
            ],
            [call("read", {"path": "b.txt"}), call("bash", {"command": "cat a.txt"})],
        ],
        cwd=tmp_path,
    )
    assert [t.name for t in model.requests[0].tools] == ["read", "bash", "edit", "write"]
    assert [r.is_error for r in results_of(model)] == [False] * 4
    assert [r.text for r in results_of(model)[2:]] == ["two", "1"]
    model = await run_turns(ReadOnlyAgent, [call("read", {"path": "a.txt"})], cwd=tmp_path)
    assert [t.name for t in model.requests[0].tools] == ["read", "bash"]


async def test_mixing_helpers_with_extras(tmp_path: Path) -> None:
    model = await run_turns(WeatherReader, [call("get_weather", {"location": "Paris"})], cwd=tmp_path)
    assert [t.name for t in model.requests[0].tools] == ["read", "bash", "get_weather"]
    assert results_of(model)[0].text == "Temperature: 70F"


@pytest.fixture
def review_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with one commit, a fake ``gh`` on PATH and ``GH_TOKEN`` set."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "core.py").write_text("print('hello')\n")
    git = [
        "git",
        "-c",
        "user.name=Test",
        "-c",
        "user.email=test@example.com",
        "-c",
        "init.defaultBranch=main",
    ]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Add the core module"], cwd=repo, check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text('#!/bin/sh\necho "gh $* (authenticated with $GH_TOKEN)"\n')
    gh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GH_TOKEN", "ghp_seedPageToken123456")
    return repo


async def test_review_agent_with_scoped_command_grants(review_repo: Path) -> None:
    model = await run_turns(
        ReviewAgent,
        [
            [
                call("git", {"args": ["log", "--format=%s"]}),
                call("git", {"args": ["show", "--stat", "HEAD"]}),
                call("gh", {"args": ["pr", "view", "42"]}),
                call("read", {"path": "pkg/core.py"}),
            ]
        ],
        cwd=review_repo,
    )
    assert [t.name for t in model.requests[0].tools] == ["read", "git", "gh"]
    log, show, gh, read = results_of(model)
    assert log.text == "Add the core module"
    assert "pkg/core.py | 1 +" in show.text  # no pager: GIT_PAGER=cat, TERM=dumb
    assert gh.text == "gh pr view 42 (authenticated with [REDACTED:GH_TOKEN])"
    assert read.text == "print('hello')"
    assert "ghp_seedPageToken123456" not in repr(model.requests)


class PatientReviewAgent(ReviewAgent):
    def tools(self) -> list[Any]:
        return [*super().tools(), Command(command="sleep")]


@pytest.mark.slow
async def test_command_args_cwd_and_timeout(review_repo: Path, wall_bound: WallBound) -> None:
    with wall_bound(5.0, "three git commands and a sleep killed by a 0.3 s timeout"):
        model = await run_turns(
            PatientReviewAgent,
            [
                [
                    # args: passed directly to the executable (no shell: the space stays in one argument)
                    call("git", {"args": ["log", "--format=subject: %s"]}),
                    # cwd: overrides the agent's working directory for this call
                    call("git", {"args": ["rev-parse", "--show-prefix"], "cwd": "pkg"}),
                    # timeout: caps execution time in seconds
                    call("git", {"args": ["status", "--short"], "timeout": 10}),
                    call("sleep", {"args": ["600"], "timeout": 0.3}),
                ]
            ],
            cwd=review_repo,
        )
    subject, prefix, status, slept = results_of(model)
    assert subject.text == "subject: Add the core module"
    assert prefix.text == "pkg/"
    assert status.text == "(no output)" and not status.is_error
    assert slept.is_error and slept.text == "Error: Command timed out after 0.3 seconds"


async def test_custom_tool_value_and_error(tmp_path: Path) -> None:
    model = await run_turns(
        WeatherReader,
        [call("get_weather", {"location": "Oslo"}), call("get_weather", {"location": "Atlantis"})],
        cwd=tmp_path,
    )
    oslo, atlantis = results_of(model)
    assert (oslo.text, oslo.is_error) == ("Temperature: 41F", False)
    # {:error, reason} -> raise ToolError(reason): the model sees it and the run goes on.
    assert (atlantis.text, atlantis.is_error) == ("Error: no weather station near Atlantis", True)
    assert len(model.requests) == 3


async def test_parameterized_tools(tmp_path: Path) -> None:
    model = await run_turns(
        DataAgent, [[call("query_users", {"q": "ada"}), call("query_orders", {"q": "desk"})]], cwd=tmp_path
    )
    definitions = {t.name: t for t in model.requests[0].tools}
    assert list(definitions) == ["query_users", "query_orders"]
    assert definitions["query_users"].description == "Query the users table"
    assert definitions["query_orders"].description == "Query the orders table"
    assert definitions["query_orders"].parameters["required"] == ["q"]
    users, orders = results_of(model)
    assert json.loads(users.text) == [{"id": 1, "name": "ada"}]
    assert json.loads(orders.text) == [{"id": 11, "item": "desk"}]


class Inspect(condukt.Tool):
    """Records its context; returns a value of the kind given in its options."""

    name = "inspect"
    description = "Looks at the context."
    parameters = {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}

    def __init__(self, **opts: Any) -> None:
        super().__init__(**opts)
        self.contexts: list[condukt.ToolContext] = []

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        self.contexts.append(context)
        return context.opts["values"][args["kind"]]


async def test_context_agent_cwd_and_opts(tmp_path: Path) -> None:
    values = {"str": "plain"}
    inspect = Inspect(values=values, flavour="mint")
    model = ScriptedModel([call("inspect", {"kind": "str"}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[inspect], cwd=tmp_path)
        await agent.run("look")
        [context] = inspect.contexts
        assert isinstance(context.agent, condukt.AgentHandle)
        assert context.agent.id == agent.id and context.agent.session_id == agent.session_id
        assert context.session_id == agent.session_id
    assert context.cwd == tmp_path.resolve()
    assert context.opts == {"values": values, "flavour": "mint"}


async def test_returning_results(tmp_path: Path) -> None:
    values: dict[str, Any] = {
        "str": 'a "string" stays as is',
        "dict": {"temperature": 70, "unit": "F", "nested": {"ok": True}},
        "list": [1, "two", {"three": 3.0}, None],
        "empty": "",
    }
    model = await run_turns(
        condukt.Agent,
        [[call("inspect", {"kind": kind}) for kind in values]],
        tools=[Inspect(values=values)],
        cwd=tmp_path,
    )
    text, mapping, sequence, empty = results_of(model)
    assert text.text == 'a "string" stays as is'
    assert json.loads(mapping.text) == values["dict"]
    assert json.loads(sequence.text) == values["list"]
    assert empty.text == ""
    assert not any(r.is_error for r in results_of(model))
