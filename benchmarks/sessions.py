"""Session stores: the cost of a save per turn, PostgresStore against raw psycopg, lease renewal.

    python benchmarks/sessions.py            # every section (PostgreSQL started here, as the tests do)
    python benchmarks/sessions.py run turns  # some sections only

Sections (ratios are to a baseline measured in the same process, same run):

- ``run``: a 100-turn agent run (one tool call per turn, so every turn is
  saved) with each store; baseline MemoryStore.
- ``turns``: 1,000 turns saved through a lease, one save per turn; the median
  cost of the last 50 saves against the first 50 (the target: <= 1.5x), and
  the bytes written per turn (journal entries, plus folds, amortised).
- ``driver``: one 2 KB INSERT, three ways: psycopg's blocking
  ``Connection.execute`` (the trio loop blocked), the same handed to
  ``trio.to_thread.run_sync``, and libpq non-blocking driven by the loop
  (what PostgresStore does).
- ``postgres``: PostgresStore's save of a turn against a raw psycopg INSERT
  of the same bytes (the target: <= 1.5x).
- ``concurrent``: 1,000 agents saving 5 turns each at once, over 8
  connections: PostgresStore against raw psycopg in a thread pool of 8.
- ``renewal``: process CPU spent keeping 10,000 leases of one node alive
  (the target: <= 1% of a core at the default lease_ttl of 30 s).
- ``owners``: 10,000 idle agents each owning its session key (spawned with
  a store: the lease taken at spawn, renewed by the store's one heartbeat,
  dead holders swept by one task per store), against the same 10,000 idle
  agents without a store, same run (the target: <= 1% of a core).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from _common import report

import condukt
import condukt.testing
from condukt.messages import AssistantMessage, Message, TextBlock, ToolCall, ToolResultMessage, Usage, UserMessage
from condukt.sessions import DiskStore, MemoryStore, Snapshot, SQLiteStore
from condukt.sessions._snapshot import message_json

RUN_TURNS = 100
TURNS = 1_000
WINDOW = 50


class Echo(condukt.Tool):
    name = "echo"
    description = "Echoes."
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        return f"echo {args['n']} " + "x" * 200


class HundredTurns:
    name = "bench"

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        turns = sum(1 for m in request.messages if type(m) is AssistantMessage)
        if turns + 1 >= RUN_TURNS:
            return AssistantMessage((TextBlock("done"),), Usage(), "end_turn")
        return AssistantMessage((ToolCall(f"c{turns}", "echo", {"n": turns}),), Usage(), "tool_use")


async def one_run(store: Any, cwd: Path) -> tuple[float, float]:
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=HundredTurns(), tools=[Echo], cwd=cwd, session_store=store,
            id="bench", max_turns=RUN_TURNS + 1, load_project_instructions=False,
        )
        wall, cpu = time.perf_counter(), time.process_time()
        await agent.run("go")
        return time.perf_counter() - wall, time.process_time() - cpu


async def section_run(tmp: Path) -> None:
    print(f"\n== run: a {RUN_TURNS}-turn agent run, per turn (baseline MemoryStore)")
    rows = []
    results: dict[str, tuple[float, float]] = {}
    for name, make in (("memory", MemoryStore), ("disk", DiskStore), ("sqlite", SQLiteStore)):
        best = (float("inf"), float("inf"))
        for attempt in range(3):
            cwd = tmp / f"run-{name}{attempt}"
            cwd.mkdir()
            store = make()
            best = min(best, await one_run(store, cwd))
            if isinstance(store, SQLiteStore):
                await store.aclose()
        results[name] = best
        rows.append((f"{name}: wall per turn", best[0] / RUN_TURNS * 1e6, "µs"))
        rows.append((f"{name}: process CPU per turn", best[1] / RUN_TURNS * 1e6, "µs"))
    report(rows)
    base = results["memory"][0]
    print(f"DiskStore per turn vs MemoryStore: {results['disk'][0] / base:.2f}x wall")
    print(f"SQLiteStore per turn vs MemoryStore: {results['sqlite'][0] / base:.2f}x wall")


def turn_messages(n: int) -> list[Message]:
    """One turn of an agent's history: a prompt, a tool call, its result, an answer (about 1.3 KB)."""
    filler = "lorem ipsum " * 25
    return [
        UserMessage.from_text(f"prompt {n} {filler}"),
        AssistantMessage((ToolCall(f"c{n}", "echo", {"n": n}),), Usage(10, 20), "tool_use"),
        ToolResultMessage(f"c{n}", "echo", (TextBlock(f"echo {n} {filler}"),)),
        AssistantMessage((TextBlock(f"answer {n} {filler}"),), Usage(30, 40), "end_turn"),
    ]


class Counting:
    """Counts the bytes a store is asked to write (journal entries and bases)."""

    def __init__(self, store: Any) -> None:
        self.bytes = 0
        append, put_base = store._append, store._put_base

        async def counted_append(key: str, stream: str, fence: Any, seq: int, text: str) -> None:
            self.bytes += len(text)
            await append(key, stream, fence, seq, text)

        async def counted_put_base(key: str, stream: str, fence: Any, text: str, seq: int | None) -> int:
            self.bytes += len(text)
            result: int = await put_base(key, stream, fence, text, seq)
            return result

        store._append, store._put_base = counted_append, counted_put_base


async def save_turns(store: Any, turns: int = TURNS) -> tuple[list[float], int, int]:
    """Save ``turns`` turns through a lease; the wall time of each save, total bytes written, entry bytes."""
    counting = Counting(store)
    messages: list[Message] = []
    times = []
    entry_bytes = 0
    async with await store.acquire("bench", owner="bench") as lease:
        for n in range(turns):
            messages += turn_messages(n)
            snapshot = Snapshot("bench", messages, model="bench:model", updated_at=float(n))
            before = counting.bytes
            start = time.perf_counter()
            await lease.save(snapshot)
            times.append(time.perf_counter() - start)
            if n == turns - 1:
                entry_bytes = counting.bytes - before
        await store.settled()
    return times, counting.bytes, entry_bytes


async def section_turns(tmp: Path, dsn: str | None) -> None:
    print(f"\n== turns: {TURNS} turns saved through a lease, one save each (median of {WINDOW} saves)")
    stores: list[tuple[str, Any]] = [
        ("memory", MemoryStore()),
        ("disk", DiskStore(tmp / "turns-disk")),
        ("sqlite", SQLiteStore(tmp / "turns.sqlite3")),
    ]
    if dsn is not None:
        from condukt.sessions import PostgresStore

        stores.append(("postgres", PostgresStore(dsn, schema="bench_turns")))
    for name, store in stores:
        times, written, last_entry = await save_turns(store)
        first = statistics.median(times[1 : WINDOW + 1])  # the first save writes the base
        last = statistics.median(times[-WINDOW:])
        history = sum(len(m.text) for n in range(TURNS) for m in turn_messages(n))
        print(
            f"  {name:8s} first {first * 1e6:8.1f} µs  last {last * 1e6:8.1f} µs  "
            f"last/first {last / first:5.2f}x  |  bytes per turn: last entry {last_entry} B, "
            f"all writes {written / TURNS:,.0f} B (folds included; history {history / 1e6:.1f} MB of text)"
        )
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


async def section_driver(dsn: str) -> None:
    import psycopg

    from condukt.sessions._pgwire import connect

    print("\n== driver: one 2 KB INSERT (prepared), per statement")
    data = "x" * 2_000
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("DROP TABLE IF EXISTS bench_driver")
        setup.execute("CREATE TABLE bench_driver (k bytea, seq bigint, data text, PRIMARY KEY (k, seq))")
    raw = psycopg.connect(dsn, autocommit=True)
    counter = iter(range(10**9))

    def blocking() -> None:
        raw.execute("INSERT INTO bench_driver VALUES (%s, %s, %s)", (b"raw", next(counter), data), prepare=True)

    limiter = trio.CapacityLimiter(1)
    nonblocking = await connect(dsn)
    sql = "INSERT INTO bench_driver VALUES ($1::bytea, $2::bigint, $3::text)"

    async def loop_driven() -> None:
        await nonblocking.execute(sql, [b"nb", next(counter), data])

    async def in_thread() -> None:
        await trio.to_thread.run_sync(blocking, limiter=limiter)

    async def blocked() -> None:
        blocking()

    results: dict[str, tuple[float, float]] = {}
    for _ in range(2):  # the second round is reported: caches and prepared statements warm
        for name, op in (("psycopg blocking", blocked), ("psycopg in to_thread", in_thread), ("libpq non-blocking on trio", loop_driven)):
            for _ in range(100):
                await op()
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(2_000):
                await op()
            results[name] = ((time.perf_counter() - wall) / 2_000, (time.process_time() - cpu) / 2_000)
    for name, (wall, cpu) in results.items():
        print(f"  {name:28s} wall {wall * 1e6:8.1f} µs  CPU {cpu * 1e6:7.1f} µs")
    base = results["libpq non-blocking on trio"]
    thread = results["psycopg in to_thread"]
    print(f"to_thread vs non-blocking: {thread[0] / base[0]:.2f}x wall, {thread[1] / base[1]:.2f}x CPU")
    raw.close()
    nonblocking.close()


async def section_postgres(dsn: str) -> None:
    import psycopg

    from condukt.sessions import PostgresStore

    print(f"\n== postgres: a save per turn vs a raw psycopg INSERT of the same bytes ({TURNS} turns each)")
    store = PostgresStore(dsn, schema="bench_vs_raw")
    messages: list[Message] = []
    entries: list[str] = []
    real_append = store._append

    async def recording(key: str, stream: str, fence: Any, seq: int, text: str) -> None:
        entries.append(text)
        await real_append(key, stream, fence, seq, text)

    store._append = recording  # type: ignore[method-assign]
    saves = []
    async with await store.acquire("bench") as lease:
        for n in range(TURNS):
            messages += turn_messages(n)
            snapshot = Snapshot("bench", messages, updated_at=float(n))
            start = time.perf_counter()
            await lease.save(snapshot)
            saves.append(time.perf_counter() - start)
    await store.aclose()
    with psycopg.connect(dsn, autocommit=True) as raw:
        raw.execute("DROP TABLE IF EXISTS bench_raw")
        raw.execute("CREATE TABLE bench_raw (key_id bytea, stream text, seq bigint, data text, PRIMARY KEY (key_id, stream, seq))")
        inserts, encoded_inserts = [], []
        for seq, text in enumerate(entries):
            start = time.perf_counter()
            raw.execute("INSERT INTO bench_raw VALUES (%s, '', %s, %s)", (b"k" * 32, seq, text), prepare=True)
            inserts.append(time.perf_counter() - start)
        # The same, plus encoding the turn's messages to JSON (what any store must do first).
        for seq in range(len(entries)):
            turn = turn_messages(seq + 10_000)
            start = time.perf_counter()
            text = "[" + ",".join(message_json(m) for m in turn) + "]"
            raw.execute("INSERT INTO bench_raw VALUES (%s, 'e', %s, %s)", (b"k" * 32, seq, text), prepare=True)
            encoded_inserts.append(time.perf_counter() - start)
    save, insert = statistics.median(saves[1:]), statistics.median(inserts[1:])
    encoded = statistics.median(encoded_inserts[1:])
    print(f"  PostgresStore lease.save                 median {save * 1e6:8.1f} µs")
    print(f"  raw psycopg INSERT                       median {insert * 1e6:8.1f} µs  (the same {statistics.mean(map(len, entries)):,.0f} B entries)")
    print(f"  raw psycopg INSERT, messages encoded too median {encoded * 1e6:8.1f} µs")
    print(f"PostgresStore save vs raw psycopg INSERT of the same bytes: {save / insert:.2f}x")
    print(f"PostgresStore save vs encoding the turn + raw psycopg INSERT: {save / encoded:.2f}x")


async def section_concurrent(dsn: str) -> None:
    import psycopg

    from condukt.sessions import PostgresStore

    agents, turns, pool = 1_000, 5, 8
    print(f"\n== concurrent: {agents} agents saving {turns} turns each at once, {pool} connections")
    store = PostgresStore(dsn, schema="bench_concurrent", pool_size=pool)
    leases = []
    async with trio.open_nursery() as nursery:

        async def take(i: int) -> None:
            leases.append(await store.acquire(f"agent-{i}"))

        for i in range(agents):
            nursery.start_soon(take, i)
    latencies: list[float] = []

    async def agent(lease: Any) -> None:
        messages: list[Message] = []
        for n in range(turns):
            messages += turn_messages(n)
            start = time.perf_counter()
            await lease.save(Snapshot("a", messages, updated_at=float(n)))
            latencies.append(time.perf_counter() - start)

    wall, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for lease in leases:
            nursery.start_soon(agent, lease)
    store_wall, store_cpu = time.perf_counter() - wall, time.process_time() - cpu
    store_p99 = statistics.quantiles(latencies, n=100)[98]
    for lease in leases:
        await lease.release()
    await store.aclose()

    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("DROP TABLE IF EXISTS bench_concurrent_raw")
        setup.execute("CREATE TABLE bench_concurrent_raw (key_id bytea, seq bigint, data text, PRIMARY KEY (key_id, seq))")
    connections = [psycopg.connect(dsn, autocommit=True) for _ in range(pool)]
    send, receive = trio.open_memory_channel[Any](pool)
    for connection in connections:
        send.send_nowait(connection)
    limiter = trio.CapacityLimiter(pool)
    entry = '{"seq":2,"op":"save","append":[' + ",".join(["{}"] * 4) + "]}" + "x" * 1_300
    raw_latencies: list[float] = []

    def insert(connection: Any, key: bytes, seq: int) -> None:
        connection.execute("INSERT INTO bench_concurrent_raw VALUES (%s, %s, %s)", (key, seq, entry), prepare=True)

    async def raw_agent(i: int) -> None:
        for n in range(turns):
            start = time.perf_counter()
            connection = await receive.receive()
            try:
                await trio.to_thread.run_sync(insert, connection, f"agent-{i}".encode(), n, limiter=limiter)
            finally:
                send.send_nowait(connection)
            raw_latencies.append(time.perf_counter() - start)

    wall, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for i in range(agents):
            nursery.start_soon(raw_agent, i)
    raw_wall, raw_cpu = time.perf_counter() - wall, time.process_time() - cpu
    raw_p99 = statistics.quantiles(raw_latencies, n=100)[98]
    for connection in connections:
        connection.close()
    total = agents * turns
    print(f"  PostgresStore (leases)        {total / store_wall:8,.0f} saves/s  p99 {store_p99 * 1e3:7.1f} ms  CPU {store_cpu / total * 1e6:6.0f} µs/save")
    print(f"  raw psycopg, 8 threads        {total / raw_wall:8,.0f} INSERTs/s p99 {raw_p99 * 1e3:7.1f} ms  CPU {raw_cpu / total * 1e6:6.0f} µs/insert")
    print(f"PostgresStore throughput vs raw psycopg: {raw_wall / store_wall:.2f}x; p99 {store_p99 / raw_p99:.2f}x")


async def section_renewal(dsn: str | None, tmp: Path) -> None:
    count = 10_000
    print(f"\n== renewal: process CPU keeping {count:,} leases of one node alive")
    kinds: list[tuple[str, Any]] = [("disk", lambda ttl: DiskStore(tmp / "renewal-disk", lease_ttl=ttl))]
    if dsn is not None:
        from condukt.sessions import PostgresStore

        kinds.append(("postgres", lambda ttl: PostgresStore(dsn, schema="bench_renewal", lease_ttl=ttl, pool_size=8)))
    for name, make in kinds:
        ttl = 0.3  # a heartbeat every 0.1 s: 100 times the default rate, to measure it
        store = make(ttl)
        leases: list[Any] = []
        async with trio.open_nursery() as nursery:

            async def take(i: int, store: Any = store, leases: list[Any] = leases) -> None:
                leases.append(await store.acquire(f"s{i}", wait=5.0))

            for i in range(count):
                nursery.start_soon(take, i)
        beats = 0
        heartbeat = store._heartbeat

        async def counted(heartbeat: Any = heartbeat) -> None:
            nonlocal beats
            beats += 1
            await heartbeat()

        store._heartbeat = counted
        await trio.sleep(0.5)
        beats = 0
        wall, cpu = time.perf_counter(), time.process_time()
        await trio.sleep(5.0)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        per_beat = cpu / max(beats, 1)
        print(
            f"  {name:8s} {beats} heartbeats in {wall:.1f} s: CPU {cpu / wall * 100:5.2f}% of a core at lease_ttl={ttl} s; "
            f"{per_beat * 1e3:.2f} ms per heartbeat -> {per_beat / 10.0 * 100:.4f}% of a core at the default lease_ttl=30 s"
        )
        for lease in leases:
            await lease.release()
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


async def section_owners(dsn: str | None, tmp: Path) -> None:
    """10,000 idle agents each owning its session key: the CPU their renewal costs, against the same agents without a store."""
    count = 10_000
    ttl = 0.3  # a heartbeat (and a sweep of dead holders) every 0.1 s: 100 times the default rate, to measure it
    print(f"\n== owners: process CPU of {count:,} idle agents owning their keys, lease_ttl={ttl} s")
    kinds: list[tuple[str, Any]] = [("none", lambda: None), ("memory", lambda: MemoryStore(lease_ttl=ttl))]
    if dsn is not None:
        from condukt.sessions import PostgresStore

        kinds.append(("postgres", lambda: PostgresStore(dsn, schema="bench_owners", lease_ttl=ttl, pool_size=8)))
    model = condukt.testing.FunctionModel(lambda request: condukt.testing.reply("ok"))
    baseline = 0.0
    for name, make in kinds:
        store = make()
        async with condukt.open_node() as node:
            agents: list[Any] = []

            async def spawn(i: int, node: Any = node, store: Any = store, agents: list[Any] = agents) -> None:
                options: dict[str, Any] = {"model": model, "cwd": tmp, "id": f"owner-{i}", "load_project_instructions": False}
                if store is not None:
                    options["session_store"] = store
                agents.append(await node.spawn(condukt.Agent, **options))

            async with trio.open_nursery() as nursery:
                for i in range(count):
                    nursery.start_soon(spawn, i)
            await trio.sleep(0.5)
            wall, cpu = time.perf_counter(), time.process_time()
            await trio.sleep(5.0)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            share = cpu / wall
            if name == "none":
                baseline = share
                print(f"  {name:8s} {len(agents):,} idle agents without a store: CPU {share * 100:5.2f}% of a core")
            else:
                extra = max(share - baseline, 0.0)
                print(
                    f"  {name:8s} {len(agents):,} idle owners: CPU {share * 100:5.2f}% of a core; "
                    f"{extra * 100:5.2f}% more than without a store at lease_ttl={ttl} s "
                    f"-> {extra * ttl / 30.0 * 100:.4f}% of a core at the default lease_ttl=30 s"
                )
            async with trio.open_nursery() as nursery:
                for agent in agents:
                    nursery.start_soon(agent.stop)
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


async def main() -> None:
    wanted = set(sys.argv[1:]) or {"run", "turns", "driver", "postgres", "concurrent", "renewal", "owners"}
    server = None
    dsn: str | None = None
    if wanted & {"turns", "driver", "postgres", "concurrent", "renewal", "owners"}:
        try:
            from condukt.testing.postgres import PostgresServer

            server = PostgresServer()
            await trio.to_thread.run_sync(server.start)
            dsn = server.dsn
        except Exception as exc:  # no PostgreSQL here: its sections are skipped
            print(f"(PostgreSQL sections skipped: {exc})")
    try:
        with tempfile.TemporaryDirectory() as directory:
            tmp = Path(directory)
            if "run" in wanted:
                await section_run(tmp)
            if "turns" in wanted:
                await section_turns(tmp, dsn)
            if dsn is not None:
                if "driver" in wanted:
                    await section_driver(dsn)
                if "postgres" in wanted:
                    await section_postgres(dsn)
                if "concurrent" in wanted:
                    await section_concurrent(dsn)
            if "renewal" in wanted:
                await section_renewal(dsn, tmp)
            if "owners" in wanted:
                await section_owners(dsn, tmp)
    finally:
        if server is not None:
            await trio.to_thread.run_sync(server.remove)


if __name__ == "__main__":
    trio.run(main)
