"""Child process of test_crash_safety: saves ever newer snapshots until killed.

``python saver.py disk|sqlite LOCATION [pause-before-rename]``. Resumes from
the snapshot found at LOCATION, then saves snapshot N+1, N+2... of about
4 MB each, printing N once save N has returned. With
``pause-before-rename``, the DiskStore save after the first one stops
(forever) between writing its temporary file and renaming it, after
printing ``renaming``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import trio
from helpers import big_snapshot, tag_of  # type: ignore[import-not-found]  # beside this script

from condukt.sessions import DiskStore, SessionStore, SQLiteStore

KEY = "session"


def pause_before_rename() -> None:
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        print("renaming", flush=True)
        time.sleep(60)
        real_replace(src, dst)

    os.replace = replace  # type: ignore[assignment]


async def main(argv: list[str]) -> None:
    kind, location, *options = argv
    store: SessionStore = DiskStore(location) if kind == "disk" else SQLiteStore(location)
    previous = await store.load(KEY)
    n = 0 if previous is None else int(tag_of(previous)) + 1
    while True:
        await store.save(KEY, big_snapshot(str(n)))
        print(n, flush=True)
        if "pause-before-rename" in options:
            pause_before_rename()
        n += 1


if __name__ == "__main__":
    trio.run(main, sys.argv[1:])
