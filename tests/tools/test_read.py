"""The read tool on real files: windows, truncation, images, errors."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import condukt
from condukt.messages import DocumentBlock, ImageBlock, ToolResultMessage
from condukt.testing import call
from condukt.tools import Read, read

from .helpers import invoke, through_agent

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
IMAGES = {
    "pixel.png": ("image/png", PNG),
    "photo.jpg": ("image/jpeg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00fake-jpeg"),
    "photo.JPEG": ("image/jpeg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00fake-jpeg-2"),
    "anim.gif": ("image/gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
    "pic.webp": ("image/webp", b"RIFF\x1a\x00\x00\x00WEBPVP8 fake"),
}


def numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


async def test_reads_a_whole_small_file_as_is(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    assert await invoke(Read(), {"path": "a.txt"}, tmp_path) == "alpha\nbeta"


async def test_offset_and_limit_select_a_window_with_a_header(tmp_path: Path) -> None:
    (tmp_path / "ten.txt").write_text(numbered(10))
    window = await invoke(Read(), {"path": "ten.txt", "offset": 3, "limit": 2}, tmp_path)
    assert window == "(lines 3-4 of 10)\n\nline 3\nline 4"
    tail = await invoke(Read(), {"path": "ten.txt", "offset": 9}, tmp_path)
    assert tail == "(lines 9-10 of 10)\n\nline 9\nline 10"
    head = await invoke(Read(), {"path": "ten.txt", "limit": 1}, tmp_path)
    assert head == "(lines 1-1 of 10)\n\nline 1"


async def test_offset_past_the_end_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "ten.txt").write_text(numbered(10))
    with pytest.raises(condukt.ToolError, match="past the end of the file \\(10 lines\\)"):
        await invoke(Read(), {"path": "ten.txt", "offset": 11}, tmp_path)


async def test_offset_and_limit_below_one_are_rejected_by_the_schema() -> None:
    assert Read().validate({"path": "a", "offset": 0}) is not None
    assert Read().validate({"path": "a", "limit": 0}) is not None
    assert Read().validate({"offset": 1}) is not None


async def test_truncates_at_2000_lines_with_a_header(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text(numbered(2500))
    text = await invoke(Read(), {"path": "long.txt"}, tmp_path)
    header, body = text.split("\n\n", 1)
    assert header == "(showing lines 1-2000 of 2500, output truncated; use offset=2001 to read more)"
    assert body.splitlines() == [f"line {i}" for i in range(1, 2001)]
    more = await invoke(Read(), {"path": "long.txt", "offset": 2001}, tmp_path)
    assert more.startswith("(lines 2001-2500 of 2500)\n\nline 2001\n")


async def test_truncates_at_50_kib_with_a_header(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text(("x" * 999 + "\n") * 100)
    text = await invoke(Read(), {"path": "wide.txt"}, tmp_path)
    header, body = text.split("\n\n", 1)
    assert len(body.encode()) <= 50 * 1024
    assert header == "(showing lines 1-51 of 100, output truncated; use offset=52 to read more)"
    assert body.split("\n") == ["x" * 999] * 51


async def test_a_line_longer_than_50_kib_is_cut_not_dropped(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("é" * 40_000 + "\nsecond line\n")
    text = await invoke(Read(), {"path": "min.js"}, tmp_path)
    header, body = text.split("\n\n", 1)
    assert header == (
        "(showing lines 1-1 of 2, output truncated; line 1 is longer than 50KB and was cut; "
        "use offset=2 to read more)"
    )
    assert body == "é" * (50 * 1024 // 2)
    assert (
        await invoke(Read(), {"path": "min.js", "offset": 2}, tmp_path) == "(lines 2-2 of 2)\n\nsecond line"
    )


@pytest.mark.parametrize("name", sorted(IMAGES))
async def test_images_come_back_as_image_blocks(tmp_path: Path, name: str) -> None:
    media_type, data = IMAGES[name]
    (tmp_path / name).write_bytes(data)
    block = await invoke(Read(), {"path": name}, tmp_path)
    assert isinstance(block, ImageBlock)
    assert block.media_type == media_type and block.to_bytes() == data


async def test_an_image_reaches_the_next_model_request_as_an_image(tmp_path: Path) -> None:
    (tmp_path / "pixel.png").write_bytes(PNG)
    (tmp_path / "note.txt").write_text("hello")
    calls = [call("read", {"path": "pixel.png"}), call("read", {"path": "note.txt"})]
    (image_result, text_result), _ = await through_agent([Read], calls, tmp_path)
    assert isinstance(image_result, ToolResultMessage) and not image_result.is_error
    assert image_result.content == (ImageBlock("image/png", base64.b64encode(PNG).decode()),)
    assert text_result.text == "hello"


PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\n%%EOF\n"


async def test_a_pdf_comes_back_as_a_document_the_model_reads(tmp_path: Path) -> None:
    (tmp_path / "Report.PDF").write_bytes(PDF)
    (result,), _ = await through_agent([Read], [call("read", {"path": "Report.PDF"})], tmp_path)
    assert isinstance(result, ToolResultMessage) and not result.is_error
    assert result.content == (DocumentBlock("application/pdf", base64.b64encode(PDF).decode(), "Report.PDF"),)


async def test_a_pdf_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("condukt.tools.read.MAX_DOCUMENT_BYTES", len(PDF) - 1)
    (tmp_path / "big.pdf").write_bytes(PDF)
    with pytest.raises(condukt.ToolError, match=f"big.pdf is {len(PDF)} bytes; PDFs over {len(PDF) - 1} bytes"):
        await invoke(Read(), {"path": "big.pdf"}, tmp_path)


async def test_the_largest_pdf_read_fits_in_anthropics_request_limit(tmp_path: Path) -> None:
    """Anthropic takes requests up to 32 MB, base64 makes a PDF 4/3 larger: a PDF the tool returns must fit,
    with room for the rest of the conversation, or the run fails on a 413 instead of the model hearing why."""
    with (tmp_path / "max.pdf").open("wb") as file:
        file.write(PDF)
        file.truncate(read.MAX_DOCUMENT_BYTES)
    block = await invoke(Read(), {"path": "max.pdf"}, tmp_path)
    assert isinstance(block, DocumentBlock) and len(block.data) <= 32_000_000 - 4_000_000


async def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(condukt.ToolError, match="File not found: nope.txt"):
        await invoke(Read(), {"path": "nope.txt"}, tmp_path)


async def test_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(condukt.ToolError, match="sub is a directory"):
        await invoke(Read(), {"path": "sub"}, tmp_path)


async def test_binary_file(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" * 10)
    with pytest.raises(condukt.ToolError, match="binary"):
        await invoke(Read(), {"path": "blob.bin"}, tmp_path)


async def test_errors_reach_the_model_as_error_results(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    calls = [call("read", {"path": "missing.txt"}), call("read", {"path": "sub"})]
    results, _ = await through_agent([Read], calls, tmp_path)
    assert [r.is_error for r in results] == [True, True]
    assert results[0].text == "Error: File not found: missing.txt"
    assert results[1].text == "Error: sub is a directory, not a file"


async def test_invalid_utf8_text_is_read_with_replacement_characters(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    assert await invoke(Read(), {"path": "latin1.txt"}, tmp_path) == "caf\ufffd"
