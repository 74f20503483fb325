"""Project instructions: ``AGENTS.md``, ``CLAUDE.md`` and skills from the working directory.

They live with the capability that loads them, in
:mod:`condukt.agent.capabilities.instructions`; this module is their public
path. See ``docs/project-instructions.md``.
"""

from .agent.capabilities.instructions import INSTRUCTION_FILES, Skill, load_project_instructions, read_skills

__all__ = ["INSTRUCTION_FILES", "Skill", "load_project_instructions", "read_skills"]
