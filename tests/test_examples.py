"""Every program in examples/ runs offline on the scripted model and prints what it promises.

Each runs in a fresh interpreter, in an empty directory, without provider
keys or ``CONDUKT_MODEL`` in the environment (so the examples take their
scripted models), a few at a time.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TIMEOUT = 30.0

#: Lines each example must print (in any order: concurrent work finishes in any order).
EXPECTED = {
    "supervised_agents.py": [
        "20 agents running under one supervisor",
        "agent-7 crashed (RuntimeError('simulated bug in the agent loop')); its supervisor restarts it",
        "agent-7 (restarted) answered: billing",
        "billing: 10, bug: 5, question: 5",
        "20 agents still running",
    ],
    "coding_agent.py": [
        "<- bash: Traceback (most recent call last):",
        "<- bash: all tests pass",
        "Fixed: `mean([])` now returns 0 instead of dividing by zero. The tests pass.",
        "    return sum(values) / len(values) if values else 0",
    ],
    "subagents.py": [
        "[weather] Lisbon in May: sunny, around 22°C.",
        "[food] Try pastéis de nata and grilled sardines.",
        "[lead] Pack light for Lisbon in May. Lisbon in May: sunny, around 22°C. Try pastéis de nata and grilled sardines.",
    ],
    "structured_output.py": [
        "Invoice(number='INV-2041', vendor='Acme Tools', currency='EUR', due='2026-01-15', lines=[Line(item='cordless drill', quantity=2, unit_price=89.5)])",
        "total: 179.00 EUR",
    ],
    "custom_tool.py": [
        'query_orders: [{"user": 1, "item": "umbrella"}]',
        "get_weather: error: Error: no weather station near Atlantis",
        "get_weather: Temperature: 41F",
        "convert: 5.0C",
        "Oslo is 5.0C (41F) and Atlantis has no station; good thing Ada ordered an umbrella.",
    ],
}
#: Examples tested elsewhere: the FastAPI service needs its server (tests/web); the triage agent is a
#: class for `condukt run --agent`, run with its node MCP server in tests/cli/test_agents.py.
ELSEWHERE = {"fastapi_app.py", "triage_agent.py"}


def _environment() -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not (name.endswith("_API_KEY") or name.startswith(("ANTHROPIC_", "OPENAI_", "CONDUKT_")))
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


def _run(name: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=cwd,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(_run, name, tmp_path_factory.mktemp(name)) for name in EXPECTED}
        return {name: future.result() for name, future in futures.items()}


def test_every_example_is_run_here() -> None:
    present = {path.name for path in EXAMPLES.glob("*.py")}
    assert present - ELSEWHERE == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_offline_and_prints_its_results(
    name: str, outcomes: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    done = outcomes[name]
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    missing = [line for line in EXPECTED[name] if line not in printed]
    assert missing == [], done.stdout
