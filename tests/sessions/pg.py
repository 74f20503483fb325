"""A real PostgreSQL for the tests: started with initdb in a temporary directory, or the test is skipped saying why."""

from __future__ import annotations

import pytest

from condukt.testing.postgres import PostgresNotFound, PostgresServer, find_binaries

__all__ = ["PostgresServer", "server_or_skip"]


def server_or_skip(**options: object) -> PostgresServer:
    """A started :class:`PostgresServer`; skips the test where PostgreSQL or psycopg cannot be had."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'condukt[postgres]')")
    try:
        find_binaries()
    except PostgresNotFound as exc:
        pytest.skip(f"{exc} (.ci/run installs it with apt-get where it can)")
    server = PostgresServer(**options)  # type: ignore[arg-type]
    try:
        server.start()
    except BaseException:
        server.remove()
        raise
    return server
