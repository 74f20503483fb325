"""Child process of test_ownership_processes: owns a key in a PostgresStore and saves turns until it may not.

``python owner.py DSN SCHEMA KEY LEASE_TTL``. Prints ``acquired <token> <node>``,
then ``saved <n>`` after each save returned (a new turn every 50 ms), and
``owned`` (exit 0) when a save is refused because another owner took the key.
"""

from __future__ import annotations

import sys

import trio

from condukt.messages import AssistantMessage, Message, TextBlock, UserMessage
from condukt.sessions import PostgresStore, SessionOwned, Snapshot


async def main(dsn: str, schema: str, key: str, ttl: str) -> None:
    store = PostgresStore(dsn, schema=schema, lease_ttl=float(ttl))
    lease = await store.acquire(key, owner="child")
    print("acquired", lease.token, store.node, flush=True)
    messages: list[Message] = []
    n = 0
    while True:
        messages += [UserMessage.from_text(f"child {n}"), AssistantMessage((TextBlock(f"child answer {n}"),))]
        try:
            await lease.save(Snapshot("child", messages, updated_at=float(n)))
        except SessionOwned:
            print("owned", flush=True)
            return
        print("saved", n, flush=True)
        n += 1
        await trio.sleep(0.05)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
