"""Every ```python block of the docs and the README runs, or says it is an excerpt.

A block is a complete program when it calls ``trio.run(`` or
``asyncio.run(``; every such program must exit without error. A block
starting with ``# test module`` is a pytest file: its tests must pass
(with pytest-trio's ``trio_mode``). Any other block must start with a
comment ``# excerpt`` (a fragment of a larger
program, or one that needs a provider key), so a reader knows it does not
run as written. When the guide shows a program's output (a paragraph
starting "Output" and then a ```text block, right after the program), the
program must print exactly that.

The programs run offline: in an empty directory, without provider API keys
in the environment, on ``condukt.testing.ScriptedModel``. To keep the file
fast, the programs of one guide run in one interpreter, each in a fresh
namespace and a fresh directory, with its output captured at the file
descriptor level (so subprocesses' output counts too); a program that fails
there is run again alone in a fresh interpreter, as a reader would run it,
and that result is the one checked. Guides run concurrently, a few at a time.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [*sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md")), "README.md"]
TIMEOUT = 60.0

_FENCE = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
#: What may follow a program: "Output...:" then a text block holding what it prints.
_OUTPUT = re.compile(r"\n*Output[^\n]*:\n\n```text\n(.*?)^```$", re.S | re.M)
_PROGRAM = re.compile(r"\b(trio|asyncio)\.run\(")


def _blocks() -> list[tuple[str, str, str | None]]:
    """``(id, source, output)`` of every python block; the id names the guide and line."""
    found = []
    for guide in GUIDES:
        text = (ROOT / guide).read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            shown = _OUTPUT.match(text, match.end())
            found.append((f"{guide}:{line}", match.group(1), shown.group(1) if shown else None))
    return found


def _is_excerpt(source: str) -> bool:
    return source.lstrip().lower().startswith("# excerpt")


def _is_test_module(source: str) -> bool:
    return source.lstrip().lower().startswith("# test module")


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


BLOCKS = _blocks()
EXAMPLES = [
    block for block in BLOCKS if _PROGRAM.search(block[1]) and not _is_excerpt(block[1]) and not _is_test_module(block[1])
]
TEST_MODULES = [(name, source) for name, source, _ in BLOCKS if _is_test_module(source)]


def _environment() -> dict[str, str]:
    """This environment without provider keys, with ``src`` importable."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not (name.endswith("_API_KEY") or name.startswith(("ANTHROPIC_", "OPENAI_", "CONDUKT_")))
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


#: Runs the programs given as JSON on stdin, one after the other, and prints their outcomes as JSON.
_RUNNER = r"""
import json, os, sys, tempfile, traceback

sources = json.load(sys.stdin)
results = []
out = os.dup(1)
for source in sources:
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        os.chdir(cwd)
        sys.stdout.flush(); sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(stdout.fileno(), 1); os.dup2(stderr.fileno(), 2)
        code = 0
        try:
            exec(compile(source, os.path.join(cwd, "example.py"), "exec"), {"__name__": "__main__"})
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        os.close(saved[0]); os.close(saved[1])
        os.chdir("/")
        stdout.seek(0); stderr.seek(0)
        results.append([code, stdout.read().decode("utf-8", "replace"), stderr.read().decode("utf-8", "replace")])
os.write(out, json.dumps(results).encode())
"""


def _run_alone(source: str) -> tuple[int, str, str]:
    """Run ``source`` as a script in an empty directory: (exit code, stdout, stderr); code -1 on a timeout."""
    with tempfile.TemporaryDirectory() as cwd:
        script = Path(cwd, "example.py")
        script.write_text(source, encoding="utf-8")
        try:
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=cwd,
                env=_environment(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return -1, "", f"did not finish within {TIMEOUT:g}s"
    return done.returncode, done.stdout, done.stderr


def _run_guide(programs: list[tuple[str, str | None]]) -> list[tuple[int, str, str]]:
    """Run a guide's ``(source, output)`` programs in one interpreter; those that fail there, again alone.

    Failing includes printing something else than the guide shows: a
    program may see the runner (its threads, open files, processes).
    """
    sources = [source for source, _ in programs]
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RUNNER],
            env=_environment(),
            input=json.dumps(sources),
            capture_output=True,
            text=True,
            timeout=TIMEOUT * 2,
        )
        results = [(code, out, err) for code, out, err in json.loads(done.stdout)]
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        results = []
    # A runner that died part way: the programs it did not report run alone.
    results += [(1, "", "")] * (len(sources) - len(results))
    return [
        result if result[0] == 0 and (output is None or _lines(result[1]) == _lines(output)) else _run_alone(source)
        for (source, output), result in zip(programs, results, strict=True)
    ]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[int, str, str]]:
    """Every program's (exit code, stdout, stderr), by id."""
    by_guide: dict[str, list[tuple[str, str, str | None]]] = {}
    for name, source, output in EXAMPLES:
        by_guide.setdefault(name.rsplit(":", 1)[0], []).append((name, source, output))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {
            guide: pool.submit(_run_guide, [(source, output) for _, source, output in programs])
            for guide, programs in by_guide.items()
        }
        found = {}
        for guide, programs in by_guide.items():
            for (name, _, _), result in zip(programs, futures[guide].result(), strict=True):
                found[name] = result
        return found


def test_the_guides_have_complete_programs() -> None:
    for guide in ["docs/agents.md", "docs/capabilities.md", "docs/getting-started.md", "README.md"]:
        assert any(name.startswith(f"{guide}:") for name, _, _ in EXAMPLES), f"no complete program in {guide}"


def test_every_python_block_is_a_program_or_marked_an_excerpt() -> None:
    unmarked = [
        name
        for name, source, _ in BLOCKS
        if not _PROGRAM.search(source) and not _is_excerpt(source) and not _is_test_module(source)
    ]
    assert unmarked == [], "start these blocks with '# excerpt' or '# test module', or make them complete programs"


@pytest.mark.parametrize(("name", "output"), [(name, output) for name, _, output in EXAMPLES])
def test_example_runs(name: str, output: str | None, outcomes: dict[str, tuple[int, str, str]]) -> None:
    code, printed, errors = outcomes[name]
    assert code == 0, f"{name} exited {code}\n{printed}\n{errors}"
    if output is not None:
        assert _lines(printed) == _lines(output), f"{name} printed something else than the guide shows"


@pytest.mark.parametrize(("name", "source"), TEST_MODULES)
def test_test_module_passes(name: str, source: str, tmp_path: Path) -> None:
    (tmp_path / "test_example.py").write_text(source, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "trio_mode=true", "test_example.py"],
        cwd=tmp_path,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"{name}\n{done.stdout}\n{done.stderr}"
    assert " passed" in done.stdout and " failed" not in done.stdout
