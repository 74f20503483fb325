"""Project instructions: ``AGENTS.md``, ``CLAUDE.md`` and skills from the working directory.

A long-lived agent appends them to its system prompt at start (turn it off
with ``load_project_instructions=False``; one-shot runs and sub-agents do not
load them unless asked). Files are read in order ``AGENTS.md`` then
``CLAUDE.md``; a file whose content was already included (e.g. ``CLAUDE.md``
as a symlink to ``AGENTS.md``) is included once. Skills are folders under
``.agents/skills/`` holding a ``SKILL.md`` whose front matter gives a
``name`` and ``description``; they are listed (not inlined) with their path,
so the model can read the one it needs. The :class:`ProjectInstructions`
capability does the appending (built in unless turned off).
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import trio

from .._capability import Builtin, Capability
from .._context import AgentContext

__all__ = ["INSTRUCTION_FILES", "ProjectInstructions", "Skill", "load_project_instructions", "read_skills"]

#: Instruction files, in the order they are included.
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
_MAX_BYTES = 256 * 1024
# UTF-8 that drops a leading byte-order mark (as Windows editors save files), so it
# neither hides front matter nor defeats de-duplication.
_ENCODING = "utf-8-sig"


@attrs.frozen
class Skill:
    """A skill found under ``.agents/skills/<dir>/SKILL.md``."""

    name: str
    description: str
    path: str


def _front_matter(text: str) -> dict[str, str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return fields
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.startswith((" ", "\t")):
            fields[key.strip()] = value.strip().strip("\"'")
    return {}  # unterminated front matter: not front matter


def read_skills(cwd: Path) -> list[Skill]:
    """The skills under ``cwd/.agents/skills``, sorted by directory name."""
    root = cwd / ".agents" / "skills"
    if not root.is_dir():
        return []
    skills = []
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        path = directory / "SKILL.md"
        try:
            text = path.read_text(encoding=_ENCODING, errors="replace")[:_MAX_BYTES]
        except OSError:
            continue
        meta = _front_matter(text)
        skills.append(
            Skill(
                meta.get("name") or directory.name,
                meta.get("description", ""),
                os.path.relpath(path, cwd),
            )
        )
    return skills


def load_project_instructions(cwd: Path) -> str | None:
    """The text to append to the system prompt, or ``None`` if there is nothing."""
    sections: list[str] = []
    seen: set[str] = set()
    for name in INSTRUCTION_FILES:
        path = cwd / name
        try:
            text = path.read_text(encoding=_ENCODING, errors="replace")[:_MAX_BYTES].strip()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
        except OSError:
            continue
        if not text or text in seen:
            continue
        seen.add(text)
        sections.append(f"## {name}\n\n{text}")
    skills = read_skills(cwd)
    if skills:
        listed = "\n".join(
            f"- {s.name}: {s.description} ({s.path})" if s.description else f"- {s.name} ({s.path})" for s in skills
        )
        sections.append(
            "## Skills\n\nRead a skill's SKILL.md with the read tool when the task calls for it.\n\n" + listed
        )
    if not sections:
        return None
    return "# Project instructions\n\n" + "\n\n".join(sections)


class ProjectInstructions(Builtin):
    """Appends the working directory's instructions to the system prompt at start (not to what is saved).

    Built in when ``load_project_instructions`` is true (the default).
    """

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """One unless ``load_project_instructions=False``."""
        return cls() if ctx.config.load_project_instructions else None

    async def setup(self, ctx: AgentContext) -> None:
        """Read the files (in a worker thread) and extend ``ctx.system_prompt``.

        A cancelled start takes effect once the read (quick: small files) is done.
        """
        extra = await trio.to_thread.run_sync(load_project_instructions, ctx.cwd)
        if extra:
            base = ctx.system_prompt
            ctx.system_prompt = f"{base}\n\n{extra}" if base else extra
