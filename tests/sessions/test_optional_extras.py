"""condukt.sessions without the [postgres] extra: everything but PostgresStore imports."""

from __future__ import annotations

import subprocess
import sys

# psycopg hidden from a fresh interpreter: an import of it fails, as where the extra is not installed.
WITHOUT_PSYCOPG = "import sys\nsys.modules['psycopg'] = None\n"


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG + code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_star_import_works_without_psycopg_and_leaves_postgres_store_out() -> None:
    out = run(
        "from condukt.sessions import *\n"
        "import condukt.sessions\n"
        "print(sorted(set(condukt.sessions.__all__) - set(globals())))\n"
        "print('PostgresStore' in globals(), 'PostgresStore' in condukt.sessions.__all__)\n"
        "print(SQLiteStore.__name__, DiskStore.__name__, MemoryStore.__name__)\n"
    )
    assert out.splitlines() == ["[]", "False False", "SQLiteStore DiskStore MemoryStore"]


def test_postgres_store_by_name_without_psycopg_says_which_extra_to_install() -> None:
    out = run(
        "import condukt.sessions\n"
        "try:\n"
        "    condukt.sessions.PostgresStore\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "try:\n"
        "    from condukt.sessions import PostgresStore\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert out.splitlines() == ["PostgresStore needs psycopg: pip install 'condukt[postgres]'"] * 2


def test_with_psycopg_the_star_import_includes_postgres_store() -> None:
    namespace: dict[str, object] = {}
    exec("from condukt.sessions import *", namespace)
    from condukt.sessions import PostgresStore

    assert namespace["PostgresStore"] is PostgresStore
