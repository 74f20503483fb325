"""PostgresStore against real PostgreSQL servers the tests start: faults, schema versions, TLS."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio

from condukt.sessions import SessionOwned, StoreUnavailable, UnsupportedSchema

from .conftest import fresh_schema
from .journal_helpers import Conversation, postgres_execute
from .pg import PostgresServer, server_or_skip

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'condukt[postgres]')")

from condukt.sessions import PostgresStore  # noqa: E402


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_postgres_down_at_open_raises_store_unavailable() -> None:
    store = PostgresStore(f"host=127.0.0.1 port={unused_port()} user=condukt dbname=postgres", retry_for=0.3)
    for operation in (lambda: store.load("k"), lambda: store.acquire("k"), lambda: store.save("k", Conversation().turn())):
        with pytest.raises(StoreUnavailable, match="PostgreSQL at postgresql://127.0.0.1:.* is unavailable") as info:
            await operation()
        assert isinstance(info.value.__cause__, psycopg.OperationalError)
    assert store.held() == []


async def test_postgres_restarted_mid_use_saves_are_retried_and_nothing_is_lost() -> None:
    server = await trio.to_thread.run_sync(server_or_skip)
    try:
        store = PostgresStore(server.dsn, lease_ttl=30.0, retry_for=60.0)
        leased = await store.acquire("leased")
        conversation, plain = Conversation("leased"), Conversation("plain")
        restarted = trio.Event()
        outage: list[float] = []
        saves: list[tuple[float, float]] = []

        async def restart() -> None:
            outage.append(trio.current_time())
            await trio.to_thread.run_sync(server.kill)  # a crash: no clean shutdown
            await trio.to_thread.run_sync(server.start)
            outage.append(trio.current_time())
            restarted.set()

        async with trio.open_nursery() as nursery:
            for turn in range(1_000):
                started = trio.current_time()
                await leased.save(conversation.turn())
                await store.save("plain", plain.turn())
                saves.append((started, trio.current_time()))
                if turn == 5:
                    nursery.start_soon(restart)
                elif restarted.is_set() and turn > 10:
                    break
        assert restarted.is_set()
        down, up = outage
        # Saves went on across the outage: some waited for the server, retrying.
        assert any(start < up and end > down for start, end in saves[6:])
        fresh = PostgresStore(server.dsn)
        try:
            assert await fresh.load("leased") == conversation.snapshot()
            assert await fresh.load("plain") == plain.snapshot()
        finally:
            await fresh.aclose()
        await leased.release()
        await store.aclose()
    finally:
        await trio.to_thread.run_sync(server.remove)


async def test_the_schema_is_made_on_first_use_and_a_newer_one_is_refused(postgres_server: PostgresServer) -> None:
    schema = fresh_schema()
    store = PostgresStore(postgres_server.dsn, schema=schema)
    assert await store.load("k") is None
    assert postgres_execute(store, "SELECT version FROM {s}.schema_version") == [(1,)]
    tables = postgres_execute(
        store, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", schema
    )
    assert [name for (name,) in tables] == ["bases", "journal", "leases", "nodes", "schema_version"]
    # A second store (another node) finds it made.
    other = PostgresStore(postgres_server.dsn, schema=schema)
    await other.save("k", Conversation().turn())
    assert postgres_execute(store, "SELECT count(*) FROM {s}.schema_version") == [(1,)]
    postgres_execute(store, "UPDATE {s}.schema_version SET version = 99")
    newer = PostgresStore(postgres_server.dsn, schema=schema)
    with pytest.raises(UnsupportedSchema, match=f"schema '{schema}' has schema version 99.*upgrade condukt"):
        await newer.load("k")
    for made in (store, other, newer):
        await made.aclose()


def test_a_schema_name_must_be_a_plain_identifier() -> None:
    with pytest.raises(ValueError, match="plain SQL identifier"):
        PostgresStore("", schema='x"; DROP TABLE y; --')


async def test_tls_and_dsn_options_reach_libpq(tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    server = await trio.to_thread.run_sync(
        lambda: server_or_skip(tls=(certificate.cert_chain_pems[0].bytes(), certificate.private_key_pem.bytes()))
    )
    try:
        ca_file = tmp_path / "ca.pem"
        authority.cert_pem.write_to_path(str(ca_file))
        store = PostgresStore(server.dsn, sslmode="verify-full", sslrootcert=str(ca_file), application_name="ignored")
        await store.save("k", Conversation().turn())

        async def ssl_in_use(connection: object) -> object:
            return await connection.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")  # type: ignore[attr-defined]

        assert await store._with_retries(ssl_in_use) == [(b"t",)]
        await store.aclose()
        # A certificate the client does not trust: refused, as libpq refuses it.
        other = trustme.CA()
        wrong = tmp_path / "wrong.pem"
        other.cert_pem.write_to_path(str(wrong))
        distrusting = PostgresStore(server.dsn, sslmode="verify-full", sslrootcert=str(wrong), retry_for=0.2)
        with pytest.raises(StoreUnavailable, match="certificate verify failed"):
            await distrusting.load("k")
    finally:
        await trio.to_thread.run_sync(server.remove)


async def test_a_silent_node_s_lease_is_taken_over_with_wait(postgres_server: PostgresServer) -> None:
    schema = fresh_schema()
    old = PostgresStore(postgres_server.dsn, schema=schema, lease_ttl=1.0)
    # Acquired in a trio run of its own: when that run ends, the node's heartbeat stops with it.
    lease = await trio.to_thread.run_sync(lambda: trio.run(lambda: old.acquire("k", owner="old")))
    new = PostgresStore(postgres_server.dsn, schema=schema, lease_ttl=1.0)
    with pytest.raises(SessionOwned):
        await new.acquire("k")
    taken = await new.acquire("k", owner="new", wait=5.0)
    await taken.save(Conversation("new").turn())
    with pytest.raises(SessionOwned, match="taken over"):
        await lease.save(Conversation("old").turn())
    assert await old.load("k") == Conversation("new").turn()
    await taken.release()
    for made in (old, new):
        await made.aclose()
