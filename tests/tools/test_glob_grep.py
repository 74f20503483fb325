"""The glob and grep tools on a real directory tree."""

from __future__ import annotations

from pathlib import Path

import pytest

import condukt
from condukt.tools import Glob, Grep

from .helpers import invoke


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {
        "README.md": "# Project\nTODO: write docs\n",
        "src/app.py": "import os\n\ndef main():\n    # TODO fix\n    return os.getcwd()\n",
        "src/util/helpers.py": "def helper():\n    return 'Todo item'\n",
        "src/util/data.json": '{"todo": true}\n',
        "tests/test_app.py": "def test_main():\n    assert True\n",
        ".git/config": "TODO in git internals\n",
        "node_modules/pkg/index.js": "// TODO in dependencies\n",
    }
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    (tmp_path / "logo.bin").write_bytes(b"\x00\x01TODO\x00")
    return tmp_path


async def test_glob_finds_files_recursively_sorted_and_relative(tree: Path) -> None:
    text = await invoke(Glob(), {"pattern": "**/*.py"}, tree)
    assert text == "3 match(es) for **/*.py:\nsrc/app.py\nsrc/util/helpers.py\ntests/test_app.py"


async def test_glob_in_a_sub_directory_and_with_a_limit(tree: Path) -> None:
    assert await invoke(Glob(), {"pattern": "*.py", "cwd": "src"}, tree) == "1 match(es) for *.py:\napp.py"
    limited = await invoke(Glob(), {"pattern": "**/*", "limit": 2, "cwd": "src"}, tree)
    assert limited.splitlines() == [
        "3 match(es) for **/*:",
        "app.py",
        "util/data.json",
        "(1 more not shown; narrow the pattern)",
    ]


async def test_glob_without_matches_and_bad_patterns(tree: Path) -> None:
    assert await invoke(Glob(), {"pattern": "**/*.rs"}, tree) == "No files matched **/*.rs"
    with pytest.raises(condukt.ToolError, match="must not contain '..'"):
        await invoke(Glob(), {"pattern": "../*"}, tree)
    with pytest.raises(condukt.ToolError, match="relative"):
        await invoke(Glob(), {"pattern": "/etc/*"}, tree)
    with pytest.raises(condukt.ToolError, match="directory not found"):
        await invoke(Glob(), {"pattern": "*", "cwd": "missing"}, tree)


async def test_grep_finds_regex_matches_with_path_and_line(tree: Path) -> None:
    text = await invoke(Grep(), {"pattern": r"TODO\b"}, tree)
    assert text.splitlines() == ["README.md:2: TODO: write docs", "src/app.py:4:     # TODO fix"]


async def test_grep_skips_vcs_dependency_and_binary_files(tree: Path) -> None:
    text = await invoke(Grep(), {"pattern": "TODO"}, tree)
    assert ".git" not in text and "node_modules" not in text and "logo.bin" not in text


async def test_grep_case_insensitive(tree: Path) -> None:
    text = await invoke(Grep(), {"pattern": "todo", "case_sensitive": False}, tree)
    assert text.splitlines() == [
        "README.md:2: TODO: write docs",
        "src/app.py:4:     # TODO fix",
        'src/util/data.json:1: {"todo": true}',
        "src/util/helpers.py:2:     return 'Todo item'",
    ]


async def test_grep_glob_filter_and_path(tree: Path) -> None:
    text = await invoke(Grep(), {"pattern": "todo", "case_sensitive": False, "glob": "*.py"}, tree)
    assert text.splitlines() == [
        "src/app.py:4:     # TODO fix",
        "src/util/helpers.py:2:     return 'Todo item'",
    ]
    text = await invoke(Grep(), {"pattern": "def", "path": "src/util"}, tree)
    assert text == "helpers.py:1: def helper():"
    text = await invoke(Grep(), {"pattern": "def", "path": "tests/test_app.py"}, tree)
    assert text == "test_app.py:1: def test_main():"


async def test_grep_limit(tree: Path) -> None:
    text = await invoke(Grep(), {"pattern": ".", "limit": 2}, tree)
    assert text.splitlines() == [
        "README.md:1: # Project",
        "README.md:2: TODO: write docs",
        "(stopped at 2 matches; narrow the search)",
    ]


async def test_grep_no_matches_invalid_regex_missing_path(tree: Path) -> None:
    assert await invoke(Grep(), {"pattern": "zzz+"}, tree) == "No matches for zzz+"
    with pytest.raises(condukt.ToolError, match="Invalid regex"):
        await invoke(Grep(), {"pattern": "([unclosed"}, tree)
    with pytest.raises(condukt.ToolError, match="path not found: nowhere"):
        await invoke(Grep(), {"pattern": "x", "path": "nowhere"}, tree)
