"""The npm packages of the tests (``ai``, ``@ag-ui/client``, MCP server-everything), installed once in a cache.

Installed with npm into ``$CONDUKT_TEST_CACHE`` (default ``~/.cache/condukt-tests``), one directory per
set of pinned versions, so the suite installs them once per machine. Without Node.js or npm, or when npm
cannot fetch them (offline), the tests that need them are skipped, saying why.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

#: The packages and versions the tests run (``ai`` 7 speaks the UI message stream v1; server-everything is
#: the MCP reference server the MCP tests read prompts and resources from).
PACKAGES = {"ai": "7.0.173", "@ag-ui/client": "1.0.0", "@modelcontextprotocol/server-everything": "2026.8.31"}
SCRIPTS = Path(__file__).parent / "node"


def node_modules() -> Path:
    """A directory whose ``node_modules`` holds :data:`PACKAGES` (installed on first use); skips without them."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are needed (Debian: apt-get install nodejs npm)")
    key = hashlib.sha256(json.dumps(PACKAGES, sort_keys=True).encode()).hexdigest()[:16]
    root = Path(os.environ.get("CONDUKT_TEST_CACHE", Path.home() / ".cache" / "condukt-tests")) / f"npm-{key}"
    marker = root / "installed"
    if marker.exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text(json.dumps({"name": "condukt-test-clients", "private": True, "type": "module"}))
    specs = [f"{name}@{version}" for name, version in PACKAGES.items()]
    try:
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *specs], cwd=root,
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm could not install {' '.join(specs)} within 600 s")
    if done.returncode != 0:
        pytest.skip(f"npm could not install {' '.join(specs)}: {done.stderr.strip()[-500:]}")
    marker.write_text("ok")
    return root


async def run_script(script: str, *args: str) -> list[Any]:
    """Run ``tests/web/node/<script>`` with node, from the packages' directory; its stdout's JSON lines."""
    root = node_modules()
    target = root / script
    shutil.copyfile(SCRIPTS / script, target)  # resolved against the cache's node_modules
    done = await trio.run_process(["node", str(target), *args], capture_stdout=True, capture_stderr=True,
                                  check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
