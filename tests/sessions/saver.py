"""Child process of test_crash_safety: saves ever newer snapshots until killed.

``python saver.py disk|sqlite LOCATION [pause-before-rename|journal]``. Resumes from
the snapshot found at LOCATION, then saves snapshot N+1, N+2... of about
4 MB each, printing N once save N has returned. With ``journal``, each save
adds one turn to the history instead (a journal entry of about 40 KB) and
prints the number of turns saved. With
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

from condukt.messages import UserMessage
from condukt.sessions import DiskStore, SessionStore, Snapshot, SQLiteStore

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
    if "journal" in options:
        messages = [] if previous is None else list(previous.messages)
        while True:
            messages.append(UserMessage.from_text(f"turn {len(messages)} " + "x" * 40_000))
            await store.save(KEY, Snapshot("grow", messages))
            print(len(messages), flush=True)
    n = 0 if previous is None else int(tag_of(previous)) + 1
    while True:
        await store.save(KEY, big_snapshot(str(n)))
        print(n, flush=True)
        if "pause-before-rename" in options:
            pause_before_rename()
        n += 1


if __name__ == "__main__":
    trio.run(main, sys.argv[1:])
