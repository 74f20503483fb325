"""A griffe extension for the API reference: Sphinx roles in docstrings read as code.

condukt's docstrings cross-reference with reStructuredText roles
(``:class:`~condukt.events.Done```, ``:meth:`stream```), which the Markdown
renderer would print literally. This rewrites each role to a code span of
its target (the last dotted part when written with ``~``). No package on
PyPI does this one rewrite for griffe; it is a regular expression.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|exc|data|obj|const):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    target = match.group(2)
    if match.group(1):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


class RstRoles(griffe.Extension):
    """Rewrites Sphinx roles in every docstring to Markdown code spans."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring, if it has one."""
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
