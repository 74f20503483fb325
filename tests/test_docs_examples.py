"""The guides' complete programs run: every ```python block with ``trio.run(`` exits 0.

Each example runs in a fresh interpreter (as a reader would run it, saved to
a file), in an empty directory, without provider API keys in the
environment: the examples are meant to run offline on
``condukt.testing.ScriptedModel``. When the guide shows the program's output
(a paragraph starting "Output" and then a ```text block, right after the
program), the program must print exactly that. The examples run
concurrently, a few at a time, so the whole file stays fast.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = ["docs/agents.md", "docs/capabilities.md", "docs/mcp.md", "docs/approvals.md", "docs/guardrails.md",
          "docs/observer.md"]
TIMEOUT = 30.0

_FENCE = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
#: What may follow a program: "Output...:" then a text block holding what it prints.
_OUTPUT = re.compile(r"\n*Output[^\n]*:\n\n```text\n(.*?)^```$", re.S | re.M)


def _examples() -> list[tuple[str, str, str | None]]:
    """``(id, source, output)`` of every complete program in the guides.

    The id names the guide and line; ``output`` is the text the guide says
    it prints, or None when the guide does not show it.
    """
    found = []
    for guide in GUIDES:
        text = (ROOT / guide).read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            source = match.group(1)
            if "trio.run(" in source:
                line = text.count("\n", 0, match.start()) + 1
                shown = _OUTPUT.match(text, match.end())
                found.append((f"{guide}:{line}", source, shown.group(1) if shown else None))
    return found


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


EXAMPLES = _examples()


def _environment() -> dict[str, str]:
    """This environment without provider keys, with ``src`` importable."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not (name.endswith("_API_KEY") or name.startswith(("ANTHROPIC_", "OPENAI_")))
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


def _run(source: str) -> subprocess.CompletedProcess[str] | str:
    """Run ``source`` as a script in an empty directory; the failure text on a timeout."""
    with tempfile.TemporaryDirectory() as cwd:
        script = Path(cwd, "example.py")
        script.write_text(source, encoding="utf-8")
        try:
            return subprocess.run(
                [sys.executable, str(script)],
                cwd=cwd,
                env=_environment(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return f"did not finish within {TIMEOUT:g}s"


@pytest.fixture(scope="module")
def outcomes() -> dict[str, subprocess.CompletedProcess[str] | str]:
    """Every example's outcome, by id (run concurrently: each is mostly interpreter start-up)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {name: pool.submit(_run, source) for name, source, _ in EXAMPLES}
        return {name: future.result() for name, future in futures.items()}


def test_the_guides_have_complete_programs() -> None:
    for guide in GUIDES:
        assert any(name.startswith(f"{guide}:") for name, _, _ in EXAMPLES), f"no complete program in {guide}"


@pytest.mark.parametrize(("name", "output"), [(name, output) for name, _, output in EXAMPLES])
def test_example_runs(
    name: str, output: str | None, outcomes: dict[str, subprocess.CompletedProcess[str] | str]
) -> None:
    result = outcomes[name]
    if isinstance(result, str):
        pytest.fail(f"{name}: {result}")
    assert result.returncode == 0, f"{name} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    if output is not None:
        assert _lines(result.stdout) == _lines(output), f"{name} printed something else than the guide shows"
