"""The public API's static types: ``mypy --strict`` over the programs in ``snippets/``.

Every snippet must type-check cleanly, except the lines marked
``# E: text``, each of which must get an error containing ``text``. The
snippets use ``typing.assert_type``, so a result typed ``Any`` (or too
wide) fails too. They are real programs: the clean ones also run.

mypy runs once for all snippets, in a subprocess, against the installed
``condukt`` as a user's project would see it; its cache (``.mypy_cache``
at the repository root) makes later runs fast.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = Path(__file__).resolve().parent / "snippets"
ALL = sorted(SNIPPETS.glob("*.py"))
EXPECTED = re.compile(r"#\s*E:\s*(?P<text>.+?)\s*$")
REPORTED = re.compile(r"^(?P<path>.+?):(?P<line>\d+): error: (?P<message>.*)$")

Errors = dict[tuple[str, int], list[str]]


def expected_errors(path: Path) -> dict[int, str]:
    """``{line: text}`` for every ``# E: text`` marker in ``path``."""
    found = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECTED.search(line)
        if match:
            found[number] = match["text"]
    return found


@pytest.fixture(scope="module")
def reported() -> Errors:
    """Run mypy --strict once over every snippet; ``{(file name, line): [messages]}``."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--no-pretty", *map(str, ALL)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode in (0, 1), f"mypy failed to run:\n{result.stdout}\n{result.stderr}"
    errors: Errors = defaultdict(list)
    for line in result.stdout.splitlines():
        match = REPORTED.match(line)
        if match:
            errors[(Path(match["path"]).name, int(match["line"]))].append(match["message"])
        elif line.strip() and ": note:" not in line:
            raise AssertionError(f"unexpected mypy output: {line}")
    return errors


@pytest.mark.parametrize("snippet", ALL, ids=lambda path: path.stem)
def test_snippet_type_checks_as_marked(snippet: Path, reported: Errors) -> None:
    expected = expected_errors(snippet)
    got = {line: messages for (name, line), messages in reported.items() if name == snippet.name}
    unexpected = {line: messages for line, messages in got.items() if line not in expected}
    assert not unexpected, f"{snippet.name}: errors on unmarked lines: {unexpected}"
    for line, text in expected.items():
        assert any(text in message for message in got.get(line, [])), (
            f"{snippet.name}:{line}: expected an error containing {text!r}, got {got.get(line)}"
        )


@pytest.mark.parametrize("snippet", [p for p in ALL if not expected_errors(p)], ids=lambda path: path.stem)
async def test_clean_snippet_runs(snippet: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"condukt_typing_snippet_{snippet.stem}", snippet)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    await module.main()
