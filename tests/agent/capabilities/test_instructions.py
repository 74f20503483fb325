"""Project instructions end to end: AGENTS.md, CLAUDE.md and skills in the system prompt the model gets."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import condukt
from condukt.instructions import Skill, read_skills
from condukt.testing import ScriptedModel, call, reply

AGENTS = "Run `make test` before committing.\nNever edit generated files."
CLAUDE = "Prefer small commits."


async def system_prompt(
    cwd: Path, agent_class: type[condukt.Agent] = condukt.Agent, **options: Any
) -> str | None:
    """The system prompt of the first model request of an agent started in ``cwd``."""
    model = ScriptedModel([reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(agent_class, model=model, cwd=cwd, **options)
        await agent.run("hi")
    return model.requests[0].system_prompt


def skill(root: Path, directory: str, text: str) -> None:
    folder = root / ".agents" / "skills" / directory
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text)


async def test_agents_md_with_claude_md_symlinked_to_it_is_included_once(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(AGENTS + "\n")
    os.symlink("AGENTS.md", tmp_path / "CLAUDE.md")
    prompt = await system_prompt(tmp_path, system_prompt="You are a careful engineer.")
    assert prompt == f"You are a careful engineer.\n\n# Project instructions\n\n## AGENTS.md\n\n{AGENTS}"


async def test_a_copy_with_the_same_content_is_included_once(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(AGENTS + "\n")
    (tmp_path / "CLAUDE.md").write_text("\n" + AGENTS + "\n\n")
    prompt = await system_prompt(tmp_path)
    assert prompt is not None and prompt.count("make test") == 1 and "CLAUDE.md" not in prompt


async def test_distinct_files_are_both_included_agents_md_first(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text(CLAUDE)
    (tmp_path / "AGENTS.md").write_text(AGENTS)
    prompt = await system_prompt(tmp_path, system_prompt="Base.")
    assert prompt == (
        f"Base.\n\n# Project instructions\n\n## AGENTS.md\n\n{AGENTS}\n\n## CLAUDE.md\n\n{CLAUDE}"
    )


async def test_claude_md_alone_is_included(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text(CLAUDE)
    assert await system_prompt(tmp_path) == f"# Project instructions\n\n## CLAUDE.md\n\n{CLAUDE}"


async def test_without_project_files_the_system_prompt_is_unchanged(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("   \n")  # empty after stripping: nothing to add
    (tmp_path / "README.md").write_text("not an instruction file")
    assert await system_prompt(tmp_path, system_prompt="Base.") == "Base."
    assert await system_prompt(tmp_path) is None


async def test_files_saved_with_a_byte_order_mark_or_crlf_read_the_same(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"\xef\xbb\xbf" + AGENTS.encode())
    (tmp_path / "CLAUDE.md").write_bytes(AGENTS.replace("\n", "\r\n").encode())  # the same text
    skill(tmp_path, "review", "\ufeff---\r\nname: code-review\r\ndescription: Review a diff\r\n---\r\n")
    prompt = await system_prompt(tmp_path)
    assert prompt == (
        f"# Project instructions\n\n## AGENTS.md\n\n{AGENTS}\n\n## Skills\n\n"
        "Read a skill's SKILL.md with the read tool when the task calls for it.\n\n"
        "- code-review: Review a diff (.agents/skills/review/SKILL.md)"
    )


async def test_skills_are_listed_with_name_description_and_path(tmp_path: Path) -> None:
    skill(
        tmp_path,
        "review",
        '---\nname: code-review\ndescription: "Review a diff: style, tests, risks"\n---\n\n# Steps\n1. Read the diff\n',
    )
    skill(tmp_path, "deploy-helper", "# Deploying\nNo front matter here.\n")
    skill(tmp_path, "changelog", "---\ndescription: Write the changelog entry\n---\nbody\n")
    (tmp_path / ".agents" / "skills" / "empty").mkdir()  # no SKILL.md: skipped
    (tmp_path / ".agents" / "skills" / "NOTES.md").write_text("a file, not a skill")
    prompt = await system_prompt(tmp_path, system_prompt="Base.")
    assert prompt == (
        "Base.\n\n# Project instructions\n\n## Skills\n\n"
        "Read a skill's SKILL.md with the read tool when the task calls for it.\n\n"
        "- changelog: Write the changelog entry (.agents/skills/changelog/SKILL.md)\n"
        "- deploy-helper (.agents/skills/deploy-helper/SKILL.md)\n"
        "- code-review: Review a diff: style, tests, risks (.agents/skills/review/SKILL.md)"
    )
    assert "Read the diff" not in prompt  # listed, not inlined
    assert read_skills(tmp_path) == [
        Skill("changelog", "Write the changelog entry", ".agents/skills/changelog/SKILL.md"),
        Skill("deploy-helper", "", ".agents/skills/deploy-helper/SKILL.md"),
        Skill("code-review", "Review a diff: style, tests, risks", ".agents/skills/review/SKILL.md"),
    ]


async def test_the_model_can_read_a_listed_skill(tmp_path: Path) -> None:
    skill(tmp_path, "review", "---\nname: review\ndescription: Review a diff\n---\n1. Read the diff\n")
    model = ScriptedModel([call("read", {"path": ".agents/skills/review/SKILL.md"}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, cwd=tmp_path, tools=[condukt.tools.Read])
        await agent.run("review")
    assert "1. Read the diff" in model.requests[1].messages[-1].text


async def test_instructions_and_skills_together_in_order(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(AGENTS)
    (tmp_path / "CLAUDE.md").write_text(CLAUDE)
    skill(tmp_path, "review", "---\nname: review\ndescription: Review a diff\n---\n")
    prompt = await system_prompt(tmp_path, system_prompt="Base.")
    assert prompt is not None
    positions = [
        prompt.index(part) for part in ["Base.", "## AGENTS.md", "## CLAUDE.md", "## Skills", "- review"]
    ]
    assert positions == sorted(positions)


async def test_they_are_read_once_at_start(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(AGENTS)
    model = ScriptedModel([reply("1"), reply("2")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, cwd=tmp_path)
        await agent.run("one")
        (tmp_path / "AGENTS.md").write_text("Changed while running.")
        await agent.run("two")
    assert [r.system_prompt for r in model.requests] == [
        f"# Project instructions\n\n## AGENTS.md\n\n{AGENTS}"
    ] * 2


class Isolated(condukt.Agent):
    load_project_instructions = False


async def test_the_opt_out(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(AGENTS)
    skill(tmp_path, "review", "---\nname: review\n---\n")
    assert await system_prompt(tmp_path, system_prompt="Base.", load_project_instructions=False) == "Base."
    assert await system_prompt(tmp_path, Isolated, system_prompt="Base.") == "Base."
    assert await system_prompt(tmp_path, Isolated, load_project_instructions=True) is not None


async def test_one_shot_runs_do_not_load_them_unless_asked(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(AGENTS)
    plain, asked = ScriptedModel([reply("ok")]), ScriptedModel([reply("ok")])
    assert await condukt.run("hi", model=plain, cwd=tmp_path, system_prompt="Base.") == "ok"
    assert await condukt.run("hi", model=asked, cwd=tmp_path, load_project_instructions=True) == "ok"
    assert plain.requests[0].system_prompt == "Base."
    assert asked.requests[0].system_prompt == f"# Project instructions\n\n## AGENTS.md\n\n{AGENTS}"


async def test_sub_agents_do_not_load_them(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(AGENTS)
    child = ScriptedModel([reply("child done")])
    parent = ScriptedModel([call("subagent", {"role": "helper", "task": "help"}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=parent,
            cwd=tmp_path,
            subagents={"helper": (condukt.Agent, {"model": child, "system_prompt": "Helper."})},
        )
        assert await agent.run("delegate") == "done"
    assert parent.requests[0].system_prompt == f"# Project instructions\n\n## AGENTS.md\n\n{AGENTS}"
    assert child.requests[0].system_prompt == "Helper."
