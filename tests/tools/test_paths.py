"""Relative paths resolve against the agent's cwd; confine_to_cwd keeps file tools inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

import condukt
from condukt.testing import call
from condukt.tools import Bash, Edit, Glob, Grep, Read, Write

from .helpers import through_agent

ALL = [Read, Write, Edit, Glob, Grep, Bash]


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """``(work, outside)``: the agent's cwd and a sibling directory it must not reach."""
    work = tmp_path / "work"
    outside = tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    (work / "inside.txt").write_text("inside\n")
    (work / "sub" / "deep.txt").write_text("deep\n")
    (outside / "secret.txt").write_text("outside secret\n")
    (work / "escape").symlink_to(outside)
    (work / "leak.txt").symlink_to(outside / "secret.txt")
    (work / "alias.txt").symlink_to(work / "inside.txt")
    return work, outside


async def test_relative_paths_resolve_against_the_agent_cwd(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    work, outside = layout
    monkeypatch.chdir(outside)  # the test process is elsewhere
    calls = [
        call("read", {"path": "inside.txt"}),
        call("read", {"path": "sub/../sub/deep.txt"}),
        call("write", {"path": "new/file.txt", "content": "x"}),
        call("glob", {"pattern": "sub/*.txt"}),
        call("grep", {"pattern": "deep", "path": "sub"}),
        call("bash", {"command": "pwd"}),
    ]
    results, _ = await through_agent(ALL, calls, work)
    assert [r.is_error for r in results] == [False] * 6, [r.text for r in results]
    assert [r.text for r in results] == [
        "inside",
        "deep",
        "Wrote 1 bytes to new/file.txt",
        "1 match(es) for sub/*.txt:\nsub/deep.txt",
        "deep.txt:1: deep",
        str(work),
    ]
    assert (work / "new" / "file.txt").read_text() == "x"


async def test_without_confinement_paths_outside_cwd_work(layout: tuple[Path, Path]) -> None:
    work, _ = layout
    calls = [call("read", {"path": "../outside/secret.txt"}), call("read", {"path": "leak.txt"})]
    results, _ = await through_agent(ALL, calls, work)
    assert [r.text for r in results] == ["outside secret", "outside secret"]


@pytest.mark.parametrize(
    "tool_call",
    [
        call("read", {"path": "../outside/secret.txt"}),
        call("read", {"path": "leak.txt"}),
        call("read", {"path": "escape/secret.txt"}),
        call("read", {"path": "/etc/hostname"}),
        call("write", {"path": "../outside/new.txt", "content": "x"}),
        call("write", {"path": "escape/new.txt", "content": "x"}),
        call("edit", {"path": "leak.txt", "old_text": "outside", "new_text": "pwned"}),
        call("glob", {"pattern": "*", "cwd": "escape"}),
        call("grep", {"pattern": "secret", "path": ".."}),
        call("bash", {"command": "pwd", "cwd": "../outside"}),
    ],
    ids=lambda c: f"{c.name}:{next(iter(c.arguments.values()))}",
)
async def test_confinement_rejects_paths_outside_cwd(layout: tuple[Path, Path], tool_call: object) -> None:
    work, outside = layout
    results, _ = await through_agent(ALL, [tool_call], work, confine_to_cwd=True)
    [result] = results
    assert result.is_error
    assert "is outside the working directory" in result.text
    assert "outside secret" not in result.text
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "outside secret\n"


async def test_confined_grep_and_glob_do_not_follow_symlinks_out(layout: tuple[Path, Path]) -> None:
    work, _ = layout
    calls = [
        call("grep", {"pattern": "secret|inside"}),
        call("glob", {"pattern": "**/*.txt"}),
        call("glob", {"pattern": "escape/*"}),
    ]
    results, _ = await through_agent(ALL, calls, work, confine_to_cwd=True)
    grep, glob_all, glob_escape = (r.text for r in results)
    assert grep.splitlines() == ["alias.txt:1: inside", "inside.txt:1: inside"]
    assert glob_all.splitlines()[1:] == ["alias.txt", "inside.txt", "sub/deep.txt"]
    assert glob_escape == "No files matched escape/*"
    # Unconfined, the same searches follow the links.
    results, _ = await through_agent(ALL, calls[:1], work)
    assert "leak.txt:1: outside secret" in results[0].text


async def test_confinement_allows_paths_inside_cwd(layout: tuple[Path, Path]) -> None:
    work, _ = layout
    calls = [
        call("read", {"path": "inside.txt"}),
        call("read", {"path": str(work / "sub" / "deep.txt")}),
        call("read", {"path": "alias.txt"}),  # a symlink that stays inside
        call("write", {"path": "sub/new.txt", "content": "ok"}),
        call("grep", {"pattern": "inside", "path": "."}),
    ]
    results, _ = await through_agent(ALL, calls, work, confine_to_cwd=True)
    assert [r.is_error for r in results] == [False] * 5, [r.text for r in results]
    assert [r.text for r in results[:3]] == ["inside", "deep", "inside"]


def test_context_resolve_path(tmp_path: Path) -> None:
    context = condukt.ToolContext(None, tmp_path, confine=True)
    assert context.resolve_path("a/../b.txt") == tmp_path / "b.txt"
    assert context.resolve_path(tmp_path) == tmp_path
    with pytest.raises(condukt.ToolError, match="outside the working directory"):
        context.resolve_path("..")
    # A sibling whose name starts with cwd's name is still outside.
    with pytest.raises(condukt.ToolError):
        context.resolve_path(str(tmp_path) + "-evil/x")
    assert condukt.ToolContext(None, tmp_path).resolve_path("../x") == tmp_path.parent / "x"
