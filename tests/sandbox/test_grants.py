"""Command grants: a git grant is not a shell; grants can pin subcommands and arguments."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply

GIT = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed (Debian: apt-get install git)")


async def grant_call(tmp_path: Path, tool: condukt.tools.Command, args: list[str], **options: Any) -> str:
    model = ScriptedModel([call(tool.name, {"args": args}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[tool], cwd=tmp_path, **options)
        await agent.run("go")
        return (await agent.history())[2].text


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git = ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], cwd=tmp_path, check=True)
    return tmp_path


@GIT
@pytest.mark.parametrize("args", [
    ["-c", "alias.x=!touch pwned", "x"],
    ["-calias.x=!touch pwned", "x"],
    ["--config-env=core.pager=HOME", "log"],
    ["--exec-path=.", "log"],
    ["-C", "/", "status"],
    ["clone", "--upload-pack=touch pwned", "src", "dst"],
    ["clone", "-u", "touch pwned", "src", "dst"],
    ["fetch", "--upload-pack", "touch pwned", "origin"],
    ["clone", "--template=t", "src", "dst"],
    ["clone", "--config", "core.sshCommand=touch pwned", "src", "dst"],
    ["archive", "--exec=touch pwned", "--remote=x", "HEAD"],
])  # fmt: skip
async def test_a_git_grant_refuses_arguments_that_run_programs(repo: Path, args: list[str]) -> None:
    text = await grant_call(repo, condukt.tools.Command(command="git"), args)
    assert text.startswith("Error: git: ") and "is refused" in text
    assert not (repo / "pwned").exists()


@GIT
async def test_a_git_grant_still_does_git(repo: Path) -> None:
    git = condukt.tools.Command(command="git")
    assert await grant_call(repo, git, ["log", "--format=%s"]) == "first"
    assert "a.txt" in await grant_call(repo, git, ["log", "-c", "--stat", "--format=%s"])  # -c of log: a diff option
    assert await grant_call(repo, git, ["add", "-u"]) == "(no output)"  # -u of add: tracked files


@GIT
async def test_a_git_grant_ignores_global_configuration_and_hooks(repo: Path) -> None:
    home = repo / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[alias]\n    who = !touch pwned-by-alias\n[user]\n    name = FromGlobal\n")
    (repo / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch pwned-by-hook\n")
    (repo / ".git" / "hooks" / "pre-commit").chmod(0o755)
    sandbox = condukt.sandbox.Local(env={"HOME": str(home)})
    hardened = condukt.tools.Command(command="git")
    assert "(exit code: 1)" in await grant_call(repo, hardened, ["config", "user.name"], sandbox=sandbox)
    assert "is not a git command" in await grant_call(repo, hardened, ["who"], sandbox=sandbox)
    args = ["-c", "user.email=a@b", "commit", "--allow-empty", "-q", "-m", "x"]
    await grant_call(repo, condukt.tools.Command(command="git", allow_git_config=True), args, sandbox=sandbox)
    assert (repo / "pwned-by-hook").exists()  # the hooks run when allowed...
    (repo / "pwned-by-hook").unlink()
    await grant_call(repo, hardened, ["commit", "--allow-empty", "-q", "-m", "y"], sandbox=sandbox)
    assert not (repo / "pwned-by-hook").exists()  # ...and not by default
    assert not (repo / "pwned-by-alias").exists()
    open_git = condukt.tools.Command(command="git", allow_git_config=True)
    assert await grant_call(repo, open_git, ["config", "user.name"], sandbox=sandbox) == "FromGlobal"


async def test_a_grant_can_pin_subcommands_and_argument_patterns(tmp_path: Path) -> None:
    echo = condukt.tools.Command(command="echo", subcommands=["hello", "bye"], arguments=[r"[a-z]+"])
    assert await grant_call(tmp_path, echo, ["hello", "world"]) == "hello world"
    assert await grant_call(tmp_path, echo, ["rm", "x"]) == "Error: echo: allowed subcommands are hello, bye; got 'rm'"
    assert await grant_call(tmp_path, echo, ["hello", "W0rld"]) == (
        "Error: echo: argument 'W0rld' is not allowed by this grant"
    )


def test_grant_options_are_checked_at_construction() -> None:
    with pytest.raises(TypeError, match="subcommands must be a list"):
        condukt.tools.Command(command="git", subcommands="status")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="arguments: invalid regular expression"):
        condukt.tools.Command(command="git", arguments=["("])
