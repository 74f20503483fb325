"""The edit and write tools on real files."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import condukt
from condukt.testing import call
from condukt.tools import Edit, Write

from .helpers import invoke, through_agent

SOURCE = "def greet(name):\n    return 'hello ' + name\n\n\ndef part():\n    return 'bye'\n"


async def test_unique_match_is_replaced_and_a_diff_returned(tmp_path: Path) -> None:
    path = tmp_path / "greet.py"
    path.write_text(SOURCE)
    text = await invoke(
        Edit(), {"path": "greet.py", "old_text": "'hello ' + name", "new_text": "f'hello {name}'"}, tmp_path
    )
    assert path.read_text() == SOURCE.replace("'hello ' + name", "f'hello {name}'")
    assert text.startswith("Successfully edited greet.py\n\n```diff\n")
    assert "--- a/greet.py\n+++ b/greet.py\n" in text
    assert "-    return 'hello ' + name\n+    return f'hello {name}'\n" in text
    assert text.endswith("\n```")


async def test_no_match_gives_a_hint(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(SOURCE)
    with pytest.raises(condukt.ToolError) as info:
        await invoke(Edit(), {"path": "greet.py", "old_text": "goodbye", "new_text": "x"}, tmp_path)
    assert "old_text not found in greet.py" in str(info.value)
    assert "read tool" in str(info.value)
    # A near miss on whitespace says so.
    with pytest.raises(condukt.ToolError, match="whitespace"):
        await invoke(
            Edit(),
            {"path": "greet.py", "old_text": "def greet(name):\n  return", "new_text": "x"},
            tmp_path,
        )
    assert (tmp_path / "greet.py").read_text() == SOURCE


async def test_several_matches_are_refused(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(SOURCE)
    with pytest.raises(condukt.ToolError, match="Found 2 occurrences of old_text in greet.py"):
        await invoke(Edit(), {"path": "greet.py", "old_text": "return", "new_text": "yield"}, tmp_path)
    assert (tmp_path / "greet.py").read_text() == SOURCE


async def test_identical_texts_are_a_no_op_error(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(SOURCE)
    with pytest.raises(condukt.ToolError, match="No changes made to greet.py"):
        await invoke(Edit(), {"path": "greet.py", "old_text": "part", "new_text": "part"}, tmp_path)


async def test_missing_file_and_empty_old_text(tmp_path: Path) -> None:
    with pytest.raises(condukt.ToolError, match="File not found: nope.py"):
        await invoke(Edit(), {"path": "nope.py", "old_text": "a", "new_text": "b"}, tmp_path)
    assert Edit().validate({"path": "a", "old_text": "", "new_text": "b"}) is not None


async def test_file_mode_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/sh\necho one\n")
    path.chmod(0o751)
    await invoke(Edit(), {"path": "run.sh", "old_text": "one", "new_text": "two"}, tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert path.read_text() == "#!/bin/sh\necho two\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]  # no temp file left


async def test_line_endings_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "dos.txt"
    path.write_bytes(b"one\r\ntwo\r\n")
    await invoke(Edit(), {"path": "dos.txt", "old_text": "two", "new_text": "2"}, tmp_path)
    assert path.read_bytes() == b"one\r\n2\r\n"


async def test_editing_through_a_symlink_edits_the_target(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old value\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    await invoke(Edit(), {"path": "link.txt", "old_text": "old", "new_text": "new"}, tmp_path)
    assert link.is_symlink()
    assert target.read_text() == "new value\n"


async def test_edit_errors_reach_the_model(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(SOURCE)
    calls = [
        call("edit", {"path": "greet.py", "old_text": "return", "new_text": "yield"}),
        call("edit", {"path": "greet.py", "old_text": "'bye'", "new_text": "'ciao'"}),
    ]
    (many, fine), _ = await through_agent([Edit], calls, tmp_path)
    assert many.is_error and many.text.startswith("Error: Found 2 occurrences")
    assert not fine.is_error and "+    return 'ciao'" in fine.text


async def test_write_creates_parents_and_overwrites(tmp_path: Path) -> None:
    text = await invoke(Write(), {"path": "a/b/c.txt", "content": "héllo\n"}, tmp_path)
    assert text == "Wrote 7 bytes to a/b/c.txt"
    assert (tmp_path / "a/b/c.txt").read_text() == "héllo\n"
    await invoke(Write(), {"path": "a/b/c.txt", "content": ""}, tmp_path)
    assert (tmp_path / "a/b/c.txt").read_text() == ""


async def test_write_absolute_path_and_directory_error(tmp_path: Path) -> None:
    target = tmp_path / "abs.txt"
    await invoke(Write(), {"path": str(target), "content": "x"}, Path("/"))
    assert target.read_text() == "x"
    (tmp_path / "dir").mkdir()
    with pytest.raises(condukt.ToolError, match="dir is a directory"):
        await invoke(Write(), {"path": "dir", "content": "x"}, tmp_path)


async def test_write_then_read_back_through_an_agent(tmp_path: Path) -> None:
    calls = [call("write", {"path": "notes/todo.md", "content": "- test\n"})]
    results, _ = await through_agent(condukt.tools.coding_tools(), calls, tmp_path)
    assert results[0].text == "Wrote 7 bytes to notes/todo.md"
    assert (tmp_path / "notes" / "todo.md").read_text() == "- test\n"
