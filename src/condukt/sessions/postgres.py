"""``PostgresStore``: sessions in a PostgreSQL database, shared by every node that reaches it.

Needs the ``[postgres]`` extra (psycopg 3). See :class:`PostgresStore`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("PostgresStore needs psycopg: pip install 'condukt[postgres]'") from exc

import trio

from ._engine import Diverged, Fence, JournaledStore, Stored
from ._errors import SessionOwned, StoreUnavailable, UnsupportedSchema
from ._pgwire import Connection, Pool, Row, connect

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

T = TypeVar("T")

#: The layout of the tables this condukt makes (the ``schema_version`` table holds the database's).
SCHEMA_VERSION = 1

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

_TABLES = [
    """CREATE TABLE {s}.bases (
        key_id bytea NOT NULL, stream text NOT NULL, key bytea NOT NULL, data text NOT NULL,
        seq bigint NOT NULL, created bigserial, updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (key_id, stream))""",
    """CREATE TABLE {s}.journal (
        key_id bytea NOT NULL, stream text NOT NULL, seq bigint NOT NULL, data text NOT NULL,
        PRIMARY KEY (key_id, stream, seq))""",
    """CREATE TABLE {s}.leases (
        key_id bytea PRIMARY KEY, key bytea NOT NULL, token bigint NOT NULL, node text, owner text,
        acquired_at timestamptz)""",
    "CREATE TABLE {s}.nodes (node text PRIMARY KEY, expires_at timestamptz NOT NULL, ttl float8 NOT NULL)",
    "CREATE SEQUENCE {s}.tokens",
]


def _key_id(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def _text(value: str) -> str:
    # PostgreSQL text holds no NUL and no lone surrogates.
    return value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def _transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure worth retrying: the server unreachable, restarting, or a lost race."""
    if isinstance(exc, (psycopg.OperationalError, psycopg.errors.TransactionRollback)):
        return True
    return isinstance(exc, OSError)


class PostgresStore(JournaledStore):
    """Sessions, their journals, leases and run logs in a PostgreSQL database (psycopg 3).

    ``dsn`` is a libpq connection string or URI; keyword arguments are libpq
    parameters that override it (``sslmode="verify-full"``,
    ``sslrootcert=...``, ``password=...``): TLS, authentication and every
    other connection option work as psycopg takes them. A ``connect_timeout``
    of 10 seconds applies unless given.

    ``schema``: the PostgreSQL schema holding the store's tables (created
    with them, on first use, if missing). The tables are ``bases``,
    ``journal``, ``leases`` (``acquired_at``: when the owner took the
    key), ``nodes`` (each node's heartbeat: ``expires_at``), a ``tokens`` sequence and
    ``schema_version``, whose row says the layout's version
    (:data:`SCHEMA_VERSION`); a newer one raises :class:`UnsupportedSchema`.
    Keys are stored by their SHA-256 (any length works), with the key itself
    beside it.

    ``pool_size``: connections this store object (one per node) opens at
    most, on demand. ``retry_for``: how long an operation retries transient
    failures (the server unreachable or restarting, a lost connection, a
    serialisation failure), with exponential backoff from 50 ms, before it
    raises :class:`StoreUnavailable`; every operation is safe to repeat (an
    append repeated after an unknown outcome finds its own entry and
    succeeds). ``statement_timeout``: how long a statement may run on the
    server (its ``statement_timeout``) and unacknowledged data may wait on
    the socket (``tcp_user_timeout``, with TCP keepalives, unless the DSN
    sets them): a server that vanished makes the attempt fail, and retry.
    ``lease_ttl``, ``run_events``, ``runs``: as for every store (see
    ``docs/sessions.md``); lease times are the server's clock, so nodes'
    clocks need not agree.

    The trio loop never blocks on the database: statements run on libpq's
    non-blocking API, driven by the loop (see ``condukt.sessions._pgwire``
    for why not a thread pool, and benchmarks/sessions.py for the figures).
    A save through a lease is one statement (the lease check and the insert
    together); a save without a lease is a short transaction. Cancelling an
    operation in flight closes its connection: the write was done wholly or
    not at all, and the store does not know which, so the writer's next
    write reads the key first (an entry already there is recognised).

    Release the connections with :meth:`aclose` (or ``async with store:``).
    """

    def __init__(
        self,
        dsn: str = "",
        *,
        lease_ttl: float = 30.0,
        schema: str = "condukt",
        pool_size: int = 4,
        retry_for: float = 15.0,
        statement_timeout: float = 30.0,
        run_events: int = 10_000,
        runs: int = 16,
        **conninfo: Any,
    ) -> None:
        super().__init__(lease_ttl=lease_ttl, run_events=run_events, runs=runs)
        self._config: dict[str, Any] = {
            "dsn": dsn,
            "lease_ttl": lease_ttl,
            "schema": schema,
            "pool_size": pool_size,
            "retry_for": retry_for,
            "statement_timeout": statement_timeout,
            "run_events": run_events,
            "runs": runs,
            **conninfo,
        }
        if not _IDENTIFIER.fullmatch(schema):
            raise ValueError(f"schema must be a plain SQL identifier, not {schema!r}")
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        if not (retry_for >= 0 and math.isfinite(retry_for) and statement_timeout > 0):
            raise ValueError("retry_for must be >= 0 and statement_timeout > 0")
        merged = make_conninfo(dsn, **conninfo)
        given = conninfo_to_dict(merged)
        # A server that vanished (a lost host, a cut network) is noticed by the
        # socket: keepalives for an idle connection, tcp_user_timeout for unacknowledged data.
        defaults = {
            "connect_timeout": 10,
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": int(statement_timeout * 1000),
        }
        missing = {name: value for name, value in defaults.items() if name not in given}
        if missing:
            merged = make_conninfo(merged, **missing)
        self._conninfo = merged
        self._schema = schema
        self._retry_for = retry_for
        self._statement_timeout = statement_timeout
        self._pool = Pool(pool_size, self._open)
        self._schema_ready = False
        self._schema_lock = trio.Lock()
        s = f'"{schema}"'
        self._sql = {name: sql.format(s=s) for name, sql in _STATEMENTS.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (to a node of a condukt.ray cluster, say), a store is its configuration: the
        # copy is a store object of its own, a node with its own connections and leases.
        return (_from_config, (self._config,))

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the store's tables."""
        return self._schema

    def where(self) -> str:
        """The server and schema, for messages: ``host:port/dbname schema`` (no password)."""
        params = conninfo_to_dict(self._conninfo)
        host = params.get("host") or params.get("hostaddr") or "localhost"
        return f"postgresql://{host}:{params.get('port', 5432)}/{params.get('dbname', '')} schema {self._schema}"

    def bind(self, cwd: Path) -> PostgresStore:
        """Returns this store: a database is not rooted in a directory."""
        return self

    async def aclose(self) -> None:
        """Close the pooled connections that are idle (the others close when their operation ends).

        Held leases are not released (release them first); they expire
        after ``lease_ttl``. Never blocks; cancellation has nothing to interrupt.
        """
        await trio.lowlevel.checkpoint()
        self._pool.discard_idle()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- plumbing ---------------------------------------------------------------------------------

    async def _open(self) -> Connection:
        timeout_ms = int(max(self._lease_ttl, 10.0) * 1000)
        return await connect(
            self._conninfo,
            [
                "SET application_name = 'condukt'",
                # A client stopped (SIGSTOP, a debugger) inside a transaction
                # must not keep a lease row locked for longer than a lease lasts.
                f"SET idle_in_transaction_session_timeout = {timeout_ms}",
                f"SET statement_timeout = {int(self._statement_timeout * 1000)}",
            ],
        )

    async def _attempt(self, op: Callable[..., Awaitable[T]], *args: Any) -> T:
        connection = await self._pool.take()
        try:
            if not self._schema_ready:
                await self._ensure_schema(connection)
            return await op(connection, *args)
        except BaseException:
            await _roll_back(connection)
            raise
        finally:
            # A connection left mid-statement (a cancellation, a broken
            # socket) is not idle: the pool closes it.
            self._pool.give(connection)

    async def _with_retries(self, op: Callable[..., Awaitable[T]], *args: Any) -> T:
        try:
            return await self._attempt(op, *args)
        except (SessionOwned, Diverged, UnsupportedSchema):
            raise
        except Exception as exc:
            if not _transient(exc):
                raise
            first = exc
        deadline = trio.current_time() + self._retry_for
        delay = 0.05
        while True:
            self._pool.discard_idle()
            if trio.current_time() + delay > deadline:
                raise StoreUnavailable(f"PostgreSQL at {self.where()} is unavailable: {first}") from first
            await trio.sleep(delay)
            delay = min(delay * 2, 2.0)
            try:
                return await self._attempt(op, *args)
            except (SessionOwned, Diverged, UnsupportedSchema):
                raise
            except Exception as exc:
                if not _transient(exc):
                    raise
                first = exc

    async def _ensure_schema(self, connection: Connection) -> None:
        async with self._schema_lock:
            if self._schema_ready:
                return
            s = f'"{self._schema}"'
            await connection.run("BEGIN")
            # One creator at a time, in any process: the lock ends with the transaction.
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [f"condukt {self._schema}"])
            await connection.run(f"CREATE SCHEMA IF NOT EXISTS {s}")
            await connection.run(f"CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer NOT NULL)")
            [(found,)] = await connection.execute(f"SELECT max(version) FROM {s}.schema_version")
            version = 0 if found is None else int(found)
            if version > SCHEMA_VERSION:
                await connection.run("ROLLBACK")
                raise UnsupportedSchema(version, SCHEMA_VERSION, f"PostgreSQL schema {self._schema!r}")
            if version == 0:
                for statement in _TABLES:
                    await connection.run(statement.format(s=s))
                await connection.execute(f"INSERT INTO {s}.schema_version (version) VALUES ($1::int)", [SCHEMA_VERSION])
            await connection.run("COMMIT")
            self._schema_ready = True

    def _location(self, key: str) -> str:
        return f"{self.where()} (key {key!r:.200})"

    async def _check(self, connection: Connection, key_id: bytes, key: str, token: int | None, stale_ok: bool) -> None:
        """Inside a transaction: the lease check of a write (see JournaledStore)."""
        rows = await connection.execute(self._sql["lease_for_update"], [key_id])
        if token is not None:
            if not rows or int(rows[0][0] or 0) != token or _str(rows[0][1]) != self._node:
                raise SessionOwned(
                    key,
                    owner=_str(rows[0][2]) if rows else None,
                    node=_str(rows[0][1]) if rows else None,
                    detail=f"session {key!r:.200} was taken over by another owner: this lease is void",
                )
            return
        if not rows or rows[0][1] is None:
            return
        _, node, owner, remaining = rows[0]
        left = float(remaining) if remaining is not None else -1.0
        if not (_str(node) == self._node and stale_ok) and left > 0:
            raise SessionOwned(key, owner=_str(owner), node=_str(node), retry_after=left)
        await connection.execute(self._sql["lease_clear"], [key_id])

    # -- storage primitives -----------------------------------------------------------------------

    async def _read(self, key: str, stream: str, after: int) -> Stored | None:
        key_id = _key_id(key)

        async def op(connection: Connection) -> list[Row]:
            return await connection.execute(self._sql["read"], [key_id, stream, after])

        rows = await self._with_retries(op)
        if not rows or rows[0][0] != b"-1":
            return None
        _, base, base_seq, last = rows[0]
        assert base is not None and base_seq is not None
        entries = [(int(seq or 0), data or b"") for seq, data, _, _ in rows[1:]]
        last_seq = int(base_seq) if last is None else max(int(base_seq), int(last))
        return Stored(base, int(base_seq), entries, self._location(key), last_seq)

    async def _append(self, key: str, stream: str, fence: Fence, seq: int, text: str) -> None:
        key_id = _key_id(key)
        if fence.token is not None:
            await self._with_retries(self._append_leased, key, key_id, stream, fence.token, seq, text)
            return
        stale_ok = key not in self._held

        async def op(connection: Connection) -> None:
            await connection.run("BEGIN")
            await self._check(connection, key_id, key, None, stale_ok)
            rows = await connection.execute(self._sql["last"], [key_id, stream])
            if not rows or rows[0][0] is None:
                await connection.run("ROLLBACK")
                raise Diverged(key)
            if int(rows[0][0]) != seq - 1:
                await connection.run("ROLLBACK")
                if await self._mine(connection, key_id, stream, seq, text):
                    return  # a retry of an append whose first attempt committed
                raise Diverged(key)
            try:
                await connection.execute(self._sql["insert"], [key_id, stream, seq, text])
            except psycopg.errors.UniqueViolation:
                raise Diverged(key) from None  # another writer without a lease appended it first
            await connection.run("COMMIT")

        await self._with_retries(op)

    async def _append_leased(
        self, connection: Connection, key: str, key_id: bytes, stream: str, token: int | None, seq: int, text: str
    ) -> None:
        # One statement: the lease row locked (FOR SHARE, so a take-over waits
        # for it) and checked, and the entry inserted, in one transaction.
        rows = await connection.execute(self._sql["append_leased"], [key_id, token, self._node, stream, seq, text])
        if rows:
            return
        lease = await connection.execute(self._sql["lease"], [key_id])
        if not lease or int(lease[0][0] or 0) != token or _str(lease[0][1]) != self._node:
            raise SessionOwned(
                key,
                owner=_str(lease[0][2]) if lease else None,
                node=_str(lease[0][1]) if lease else None,
                detail=f"session {key!r:.200} was taken over by another owner: this lease is void",
            )
        if not await self._mine(connection, key_id, stream, seq, text):
            raise Diverged(key)

    async def _put_base_leased(
        self,
        connection: Connection,
        key: str,
        key_id: bytes,
        raw_key: bytes,
        stream: str,
        token: int,
        text: str,
        seq: int | None,
    ) -> int:
        # One statement, as an append through a lease is: check, write, drop the entries it holds.
        rows = await connection.execute(
            self._sql["put_base_leased"], [key_id, token, self._node, stream, raw_key, seq, text]
        )
        if rows:
            return int(rows[0][0] or 0)
        lease = await connection.execute(self._sql["lease"], [key_id])
        if not lease or int(lease[0][0] or 0) != token or _str(lease[0][1]) != self._node:
            raise SessionOwned(
                key,
                owner=_str(lease[0][2]) if lease else None,
                node=_str(lease[0][1]) if lease else None,
                detail=f"session {key!r:.200} was taken over by another owner: this lease is void",
            )
        raise Diverged(key)

    async def _mine(self, connection: Connection, key_id: bytes, stream: str, seq: int, text: str) -> bool:
        rows = await connection.execute(self._sql["entry"], [key_id, stream, seq])
        return bool(rows) and rows[0][0] == text.encode("utf-8")

    async def _put_base(self, key: str, stream: str, fence: Fence, text: str, seq: int | None) -> int:
        key_id = _key_id(key)
        stale_ok = key not in self._held
        raw_key = key.encode("utf-8", "surrogatepass")
        if fence.token is not None:
            return await self._with_retries(self._put_base_leased, key, key_id, raw_key, stream, fence.token, text, seq)

        async def op(connection: Connection) -> int:
            await connection.run("BEGIN")
            await self._check(connection, key_id, key, fence.token, stale_ok)
            rows = await connection.execute(self._sql["base_for_update"], [key_id, stream])
            base_seq = None if not rows else int(rows[0][0] or 0)
            if seq is None:
                last = await connection.execute(self._sql["last"], [key_id, stream])
                number = 1 if base_seq is None else int(last[0][0] or base_seq) + 1
            elif (base_seq is None and seq > 0) or (base_seq is not None and base_seq > seq):
                await connection.run("ROLLBACK")
                raise Diverged(key)
            else:
                number = seq
            await connection.execute(self._sql["put_base"], [key_id, stream, raw_key, text, number])
            await connection.execute(self._sql["drop_through"], [key_id, stream, number])
            await connection.run("COMMIT")
            return number

        return await self._with_retries(op)

    async def _remove(self, key: str, fence: Fence, stream: str | None = None) -> None:
        key_id = _key_id(key)
        stale_ok = key not in self._held

        async def op(connection: Connection) -> None:
            await connection.run("BEGIN")
            await self._check(connection, key_id, key, fence.token, stale_ok)
            if stream is None:
                await connection.execute(self._sql["remove_all_bases"], [key_id])
                await connection.execute(self._sql["remove_all_entries"], [key_id])
            else:
                await connection.execute(self._sql["remove_base"], [key_id, stream])
                await connection.execute(self._sql["drop_through"], [key_id, stream, 1 << 62])
            await connection.run("COMMIT")

        await self._with_retries(op)

    async def _streams(self, key: str, prefix: str) -> list[str]:
        key_id = _key_id(key)

        async def op(connection: Connection) -> list[Row]:
            return await connection.execute(self._sql["streams"], [key_id])

        rows = await self._with_retries(op)
        return [name for (raw,) in rows if (name := _str(raw) or "").startswith(prefix)]

    async def _acquire(self, key: str, owner: str) -> int:
        key_id = _key_id(key)
        raw_key = key.encode("utf-8", "surrogatepass")

        async def op(connection: Connection) -> int:
            await connection.run("BEGIN")
            await connection.execute(self._sql["lease_row"], [key_id, raw_key])
            [(_, node, holder, remaining)] = await connection.execute(self._sql["lease_for_update"], [key_id])
            left = float(remaining) if remaining is not None else -1.0
            if node is not None and _str(node) != self._node and left > 0:
                await connection.run("ROLLBACK")
                raise SessionOwned(key, owner=_str(holder), node=_str(node), retry_after=left)
            [(token,)] = await connection.execute(self._sql["lease_take"], [key_id, self._node, _text(owner)])
            await connection.execute(self._sql["beat"], [self._node, self._lease_ttl])
            await connection.run("COMMIT")
            return int(token or 0)

        return await self._with_retries(op)

    async def _release(self, key: str, token: int) -> None:
        key_id = _key_id(key)

        async def op(connection: Connection) -> None:
            await connection.execute(self._sql["release"], [key_id, token, self._node])

        await self._with_retries(op)

    async def _heartbeat(self) -> None:
        async def op(connection: Connection) -> None:
            await connection.execute(self._sql["beat"], [self._node, self._lease_ttl])

        await self._with_retries(op)


def _from_config(config: dict[str, Any]) -> PostgresStore:
    return PostgresStore(**config)


async def _roll_back(connection: Connection) -> None:
    """End a transaction a failed operation left open, so the connection can be pooled again."""
    pgconn = connection.pgconn
    if pgconn.status != psycopg.pq.ConnStatus.OK:
        return
    if pgconn.transaction_status in (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR):
        try:
            await connection.run("ROLLBACK")
        except psycopg.Error:
            connection.close()


def _str(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


_STATEMENTS = {
    "read": """
        SELECT -1, b.data, b.seq, (SELECT max(seq) FROM {s}.journal j
                                   WHERE j.key_id = $1::bytea AND j.stream = $2::text)
        FROM {s}.bases b WHERE b.key_id = $1::bytea AND b.stream = $2::text
        UNION ALL
        SELECT j.seq, j.data, NULL, NULL FROM {s}.journal j JOIN {s}.bases b USING (key_id, stream)
        WHERE j.key_id = $1::bytea AND j.stream = $2::text AND j.seq > greatest($3::bigint, b.seq)
        ORDER BY 1""",
    "append_leased": """
        WITH lease AS (SELECT 1 FROM {s}.leases
                       WHERE key_id = $1::bytea AND token = $2::bigint AND node = $3::text FOR SHARE)
        INSERT INTO {s}.journal (key_id, stream, seq, data)
        SELECT $1::bytea, $4::text, $5::bigint, $6::text FROM lease
        ON CONFLICT DO NOTHING RETURNING 1""",
    "put_base_leased": """
        WITH lease AS (SELECT 1 FROM {s}.leases
                       WHERE key_id = $1::bytea AND token = $2::bigint AND node = $3::text FOR SHARE),
        number AS (
            SELECT coalesce($6::bigint, greatest(
                (SELECT seq FROM {s}.bases WHERE key_id = $1::bytea AND stream = $4::text),
                (SELECT max(seq) FROM {s}.journal WHERE key_id = $1::bytea AND stream = $4::text)) + 1, 1) AS n
            FROM lease
            WHERE $6::bigint IS NULL OR $6::bigint = 0
               OR EXISTS (SELECT 1 FROM {s}.bases WHERE key_id = $1::bytea AND stream = $4::text)),
        put AS (
            INSERT INTO {s}.bases (key_id, stream, key, data, seq)
            SELECT $1::bytea, $4::text, $5::bytea, $7::text, n FROM number
            ON CONFLICT (key_id, stream) DO UPDATE SET data = EXCLUDED.data, seq = EXCLUDED.seq, updated_at = now()
            WHERE {s}.bases.seq <= EXCLUDED.seq
            RETURNING seq),
        dropped AS (
            DELETE FROM {s}.journal
            WHERE key_id = $1::bytea AND stream = $4::text AND seq <= (SELECT seq FROM put))
        SELECT seq FROM put""",
    "insert": "INSERT INTO {s}.journal (key_id, stream, seq, data) VALUES ($1::bytea, $2::text, $3::bigint, $4::text)",
    "entry": "SELECT data FROM {s}.journal WHERE key_id = $1::bytea AND stream = $2::text AND seq = $3::bigint",
    "last": """
        SELECT greatest(b.seq, (SELECT max(seq) FROM {s}.journal j WHERE j.key_id = $1::bytea AND j.stream = $2::text))
        FROM {s}.bases b WHERE b.key_id = $1::bytea AND b.stream = $2::text""",
    "lease": "SELECT token, node, owner FROM {s}.leases WHERE key_id = $1::bytea",
    "lease_for_update": """
        SELECT l.token, l.node, l.owner, extract(epoch FROM n.expires_at - now())
        FROM {s}.leases l LEFT JOIN {s}.nodes n ON n.node = l.node
        WHERE l.key_id = $1::bytea FOR UPDATE OF l""",
    "lease_clear": """
        UPDATE {s}.leases SET token = nextval('{s}.tokens'), node = NULL, owner = NULL WHERE key_id = $1::bytea""",
    "lease_row": """
        INSERT INTO {s}.leases (key_id, key, token) VALUES ($1::bytea, $2::bytea, 0) ON CONFLICT DO NOTHING""",
    "lease_take": """
        UPDATE {s}.leases SET token = nextval('{s}.tokens'), node = $2::text, owner = $3::text, acquired_at = now()
        WHERE key_id = $1::bytea RETURNING token""",
    "release": """
        UPDATE {s}.leases SET node = NULL, owner = NULL
        WHERE key_id = $1::bytea AND token = $2::bigint AND node = $3::text""",
    "beat": """
        INSERT INTO {s}.nodes (node, expires_at, ttl)
        VALUES ($1::text, now() + make_interval(secs => $2::float8), $2::float8)
        ON CONFLICT (node) DO UPDATE SET expires_at = EXCLUDED.expires_at, ttl = EXCLUDED.ttl""",
    "base_for_update": "SELECT seq FROM {s}.bases WHERE key_id = $1::bytea AND stream = $2::text FOR UPDATE",
    "put_base": """
        INSERT INTO {s}.bases (key_id, stream, key, data, seq)
        VALUES ($1::bytea, $2::text, $3::bytea, $4::text, $5::bigint)
        ON CONFLICT (key_id, stream) DO UPDATE SET data = EXCLUDED.data, seq = EXCLUDED.seq, updated_at = now()""",
    "drop_through": "DELETE FROM {s}.journal WHERE key_id = $1::bytea AND stream = $2::text AND seq <= $3::bigint",
    "remove_all_bases": "DELETE FROM {s}.bases WHERE key_id = $1::bytea",
    "remove_all_entries": "DELETE FROM {s}.journal WHERE key_id = $1::bytea",
    "remove_base": "DELETE FROM {s}.bases WHERE key_id = $1::bytea AND stream = $2::text",
    "streams": "SELECT stream FROM {s}.bases WHERE key_id = $1::bytea AND stream <> '' ORDER BY created",
}
