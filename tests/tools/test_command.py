"""The Command tool: one executable, no shell, a minimal trusted environment (real subprocesses)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from waiting import WallBound

import condukt
from condukt.testing import call
from condukt.tools import Command

from .helpers import invoke, through_agent

PY = sys.executable
SAFE = {"PATH", "HOME", "USER", "LOGNAME", "HOSTNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
        "TMPDIR", "TMP", "TEMP"}  # fmt: skip


def python(**opts: object) -> Command:
    return Command(command=PY, name="py", **opts)  # type: ignore[arg-type]


async def test_arguments_are_passed_literally_without_a_shell(tmp_path: Path) -> None:
    tricky = ["a b", "x; touch pwned", "$HOME", "`id`", "*", "'quoted'", "|", "&&", ""]
    code = "import sys, json; print(json.dumps(sys.argv[1:]))"
    text = await invoke(python(), {"args": ["-c", code, *tricky]}, tmp_path)
    assert json.loads(text) == tricky
    assert not (tmp_path / "pwned").exists()


async def test_name_and_description_derive_from_the_command() -> None:
    git = Command(command="git")
    assert git.name == "git" and "`git`" in git.description
    assert Command(command="/usr/local/bin/my-tool.sh").name == "my-tool_sh"
    custom = Command(command="git", name="vcs", description="Version control.")
    assert (custom.name, custom.description) == ("vcs", "Version control.")
    assert git.parameters["properties"]["args"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Arguments to pass to the command",
    }
    assert git.validate({"args": ["status", 1]}) is not None
    assert git.validate({"args": "status"}) is not None
    with pytest.raises(ValueError, match="command"):
        Command(command="")


async def test_environment_is_minimal_plus_terminal_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUKT_HOST_SECRET", "should-not-leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    env = json.loads(await invoke(python(env={"EXTRA": "given"}), {"args": ["-c", code]}, tmp_path))
    assert "CONDUKT_HOST_SECRET" not in env
    assert env["TERM"] == "dumb" and env["PAGER"] == "cat" and env["GIT_PAGER"] == "cat"
    assert env["LANG"] == "C.UTF-8"
    assert set(env) <= SAFE | {"TERM", "PAGER", "GIT_PAGER", "EXTRA"}
    assert "PATH" in env


async def test_env_values_reach_the_process_but_are_redacted_from_output(tmp_path: Path) -> None:
    secret = "ghp_abcdef0123456789"
    code = "import os; v = os.environ['GH_TOKEN']; print('token', v); print('reversed', v[::-1])"
    text = await invoke(python(env={"GH_TOKEN": secret}), {"args": ["-c", code]}, tmp_path)
    assert text == f"token [REDACTED:GH_TOKEN]\nreversed {secret[::-1]}"


async def test_env_values_never_show_in_the_tool_repr_or_definition() -> None:
    secret = "ghp_abcdef0123456789"
    tool = Command(command="gh", env={"GH_TOKEN": secret})
    assert secret not in repr(tool)
    assert secret not in repr(tool.definition())


async def test_exit_code_and_stderr_are_reported(tmp_path: Path) -> None:
    code = "import sys; print('out', flush=True); sys.stderr.write('err\\n'); sys.exit(4)"
    assert await invoke(python(), {"args": ["-c", code]}, tmp_path) == "out\nerr\n\n(exit code: 4)"


async def test_missing_executable(tmp_path: Path) -> None:
    with pytest.raises(condukt.ToolError, match="executable not found: no-such-tool-xyz"):
        await invoke(Command(command="no-such-tool-xyz"), {"args": []}, tmp_path)
    with pytest.raises(condukt.ToolError, match="executable not found"):
        await invoke(Command(command=str(tmp_path / "missing")), {"args": []}, tmp_path)


async def test_missing_executable_reaches_the_model(tmp_path: Path) -> None:
    results, _ = await through_agent(
        [Command(command="no-such-tool-xyz")], call("no-such-tool-xyz", {"args": ["--help"]}), tmp_path
    )
    assert results[0].is_error
    assert results[0].text == "Error: executable not found: no-such-tool-xyz"


async def test_cwd_argument_and_default(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    code = "import os; print(os.getcwd())"
    assert await invoke(python(), {"args": ["-c", code]}, tmp_path) == str(tmp_path)
    assert await invoke(python(), {"args": ["-c", code], "cwd": "sub"}, tmp_path) == str(tmp_path / "sub")
    with pytest.raises(condukt.ToolError, match="directory not found"):
        await invoke(python(), {"args": ["-c", code], "cwd": "nowhere"}, tmp_path)


@pytest.mark.slow
async def test_timeout_argument_and_option_kill_the_command(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: WallBound
) -> None:
    code = (
        "import os, time; open('pid', 'w').write(str(os.getpid())); "
        "print('waiting', flush=True); time.sleep(600)"
    )
    with wall_bound(4.0, "two commands killed by 0.5 s and 0.3 s timeouts"):
        with pytest.raises(condukt.ToolError) as info:
            await invoke(python(), {"args": ["-c", code], "timeout": 0.5}, tmp_path)
        assert str(info.value) == "Command timed out after 0.5 seconds\n\nOutput before the timeout:\nwaiting"
        assert process_gone(int((tmp_path / "pid").read_text()))
        with pytest.raises(condukt.ToolError, match="timed out after 0.3 seconds"):
            await invoke(Command(command="sleep", timeout=0.3), {"args": ["600"]}, tmp_path)


async def test_no_args_runs_the_bare_command(tmp_path: Path) -> None:
    assert await invoke(Command(command="pwd"), {}, tmp_path) == str(tmp_path)
