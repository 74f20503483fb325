"""The worker behind ``Grep`` and ``Glob``: a separate process the tool can kill.

Run as a script through the agent's sandbox (``python -I -S _scan.py
JSON``), never imported by condukt: Python's ``re`` holds the GIL for a
whole match, so a catastrophic-backtracking pattern searched in a thread
freezes every agent on the node however short the timeout; in its own
process it is killed at the deadline. Standard library only. Prints one JSON
object: ``{"text": ...}`` or ``{"error": ...}``.
"""

from __future__ import annotations

import bisect
import fnmatch
import json
import os
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is slow to import (benchmarks/code_choices.py): this process starts for every search
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".condukt"}
MAX_LINE = 500
MAX_FILE = 64 * 1024 * 1024  # larger files are searched in their first 64 MiB only
CHUNK = 1 << 20


class Refused(Exception):
    pass


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def allowed_fn(job: dict[str, Any]) -> Callable[[str], bool]:
    root: str | None = job.get("confine")
    if not root:
        return lambda path: True
    state = os.path.join(root, ".condukt")

    def allowed(path: str) -> bool:
        real = os.path.realpath(path)
        return inside(real, root) and not inside(real, state)

    return allowed


def walk(root: str) -> Iterator[str]:
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            yield os.path.join(directory, name)


def lines_of(path: str) -> Iterator[tuple[int, str]]:
    """(number, line) pairs of a regular text file, streamed; nothing for binaries, FIFOs, devices."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        number = 0
        rest = b""
        read = 0
        first = True
        while read < MAX_FILE:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            read += len(chunk)
            if first:
                first = False
                if b"\0" in chunk[:8192]:
                    return
            pieces = (rest + chunk).split(b"\n")
            rest = pieces.pop()
            for piece in pieces:
                number += 1
                yield number, piece.rstrip(b"\r").decode("utf-8", "replace")
        if rest:
            yield number + 1, rest.rstrip(b"\r").decode("utf-8", "replace")
    finally:
        os.close(fd)


def grep(job: dict[str, Any]) -> str:
    try:
        regex = re.compile(job["pattern"], 0 if job["case_sensitive"] else re.IGNORECASE)
    except re.error as exc:
        raise Refused(f"Invalid regex: {exc}") from None
    root, display, glob, limit = job["root"], job["display"], job.get("glob"), job["limit"]
    allowed = allowed_fn(job)
    if os.path.isfile(root):
        files: Iterable[str] = [root]
        base = os.path.dirname(root)
    elif os.path.isdir(root):
        files, base = walk(root), root
    else:
        raise Refused(f"path not found: {display}")
    found: list[str] = []
    for path in files:
        rel = os.path.relpath(path, base)
        if glob and not (fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(os.path.basename(path), glob)):
            continue
        if not allowed(path):
            continue  # a symlink leading out of a confined working directory
        for number, line in lines_of(path):
            if regex.search(line):
                if len(line) > MAX_LINE:
                    line = line[:MAX_LINE] + "..."
                found.append(f"{rel}:{number}: {line}")
                if len(found) >= limit:
                    found.append(f"(stopped at {limit} matches; narrow the search)")
                    return "\n".join(found)
    return "\n".join(found) if found else f"No matches for {job['pattern']}"


def glob_files(job: dict[str, Any]) -> str:
    root, display, pattern, limit = job["root"], job["display"], job["pattern"], job["limit"]
    if not os.path.isdir(root):
        raise Refused(f"directory not found: {display}")
    parts = pattern.replace(os.sep, "/").split("/")
    if os.path.isabs(pattern) or ".." in parts:
        raise Refused("pattern must be relative to the search directory and must not contain '..'")
    import pathlib

    allowed = allowed_fn(job)
    matches: list[str] = []  # the `limit` first paths in sorted order, however many match
    total = 0
    try:
        for path in pathlib.Path(root).glob(pattern):
            if path.is_file() and allowed(str(path)):
                total += 1
                rel = str(path.relative_to(root))
                if len(matches) < limit or rel < matches[-1]:
                    bisect.insort(matches, rel)
                    del matches[limit:]
    except (ValueError, OSError) as exc:
        raise Refused(f"invalid glob pattern {pattern!r}: {exc}") from None
    if not total:
        return f"No files matched {pattern}"
    more = f"\n({total - limit} more not shown; narrow the pattern)" if total > limit else ""
    return f"{total} match(es) for {pattern}:\n" + "\n".join(matches) + more


def main() -> None:
    job = json.loads(sys.argv[1])
    try:
        text = grep(job) if job["mode"] == "grep" else glob_files(job)
        out = {"text": text}
    except Refused as exc:
        out = {"error": str(exc)}
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    main()
