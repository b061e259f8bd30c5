"""Migrations: idempotent, safe from several processes at once, and replaying them gives schema.sql."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from rpc.db import migrate as migration
from tests.conftest import Databases

ROOT = Path(__file__).resolve().parent.parent

CATALOG_QUERIES = {
    "columns": """
        SELECT table_name, column_name, data_type, is_nullable, column_default, datetime_precision
        FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2""",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1, 2",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid)
        FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2""",
    "functions": """
        SELECT proname, md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1, 2""",
    "extensions": "SELECT extname FROM pg_extension ORDER BY 1",
}


def catalog(url: str) -> dict[str, list[tuple[object, ...]]]:
    with psycopg.connect(url) as conn:
        return {name: conn.execute(query).fetchall() for name, query in CATALOG_QUERIES.items()}  # type: ignore[arg-type]


@pytest.fixture
def empty_database(databases: Databases) -> str:
    return databases.empty()


def test_migrating_twice_changes_nothing(empty_database: str) -> None:
    asyncio.run(migration.migrate(empty_database))
    first = catalog(empty_database)
    asyncio.run(migration.migrate(empty_database))
    assert catalog(empty_database) == first
    assert first["triggers"], "the schema has triggers (the published-jobs total)"


def test_replaying_the_migrations_gives_schema_sql(databases: Databases, empty_database: str) -> None:
    """A database made with the first released schema (migrations/baseline.sql), then brought forward by every
    migration (and schema.sql's new tables), must equal one made from schema.sql today."""
    asyncio.run(migration.migrate(empty_database))
    expected = catalog(empty_database)
    assert migration.migrations(), "there are migrations to replay"
    replayed = databases.empty()
    with psycopg.connect(replayed, autocommit=True) as conn:
        conn.execute(migration.BASELINE.read_text())  # type: ignore[arg-type]
        conn.execute(migration.VERSIONS_TABLE)
        conn.execute("INSERT INTO schema_migrations VALUES (0)")
    released = catalog(replayed)
    asyncio.run(migration.migrate(replayed))
    assert catalog(replayed) == expected
    assert released != expected, "the baseline is the released schema, not today's"


def test_version_is_recorded(empty_database: str) -> None:
    version = asyncio.run(migration.migrate(empty_database))
    with psycopg.connect(empty_database) as conn:
        recorded = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    assert recorded == (version,)


def test_processes_starting_at_once_are_safe(empty_database: str) -> None:
    """Four bin/migrate processes on one empty database: all succeed, the schema is whole."""
    env = {"DATABASE_URL": empty_database, "SERVICE_SECRET_KEY": "k" * 40, "PATH": "/usr/bin:/bin"}
    runs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "bin" / "migrate")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(4)
    ]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err.decode()
        assert b'"schema_version"' in out
    with psycopg.connect(empty_database) as conn:
        keys = conn.execute("SELECT count(*) FROM signing_keys").fetchone()
    assert keys == (1,), "exactly one signing key, made under the migration lock"


def test_misnamed_migration_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "1_oops.sql").write_text("SELECT 1")
    with pytest.raises(ValueError, match=r"NNNN_what\.sql"):
        migration.migrations(tmp_path)


def test_a_number_used_twice_is_an_error(tmp_path: Path) -> None:
    """Two branches each took the next number: a database recorded at it would never get the other one."""
    (tmp_path / "0080_users_resume_file.sql").write_text("SELECT 1")
    (tmp_path / "0080_webhook_endpoint_disabling.sql").write_text("SELECT 1")
    with pytest.raises(ValueError, match="share the number 80"):
        migration.migrations(tmp_path)


def _holding(url: str, statement: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection in a transaction that holds the locks `statement` takes, as a busy request would."""
    conn = psycopg.connect(url)
    conn.execute(statement)  # type: ignore[arg-type]
    return conn


def test_a_current_database_is_not_touched(empty_database: str) -> None:
    """Starting a process on a current database takes no lock a request needs: with every table of the schema
    locked by another transaction, the start still completes at once (schema.sql applied again would wait)."""
    asyncio.run(migration.migrate(empty_database))
    tables = "jobs, idempotency_keys, applications, webhook_deliveries, signing_keys, events"
    holder = _holding(empty_database, f"LOCK TABLE {tables} IN EXCLUSIVE MODE")  # reads still pass, DDL waits
    try:
        version = asyncio.run(migration.migrate(empty_database, lock_timeout=0.05, attempts=1))
    finally:
        holder.close()
    assert version == migration.migrations()[-1].version


def test_a_change_gives_way_to_requests(empty_database: str) -> None:
    """A change that cannot take a table lock gives back what it holds within its lock_timeout, so that a request
    queued behind it goes on, and tries again; here it never gets its lock and reports it."""
    asyncio.run(migration.migrate(empty_database))
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("DELETE FROM schema_digests")  # as if schema.sql had changed since
    holder = _holding(empty_database, "UPDATE jobs SET title = title WHERE false")  # a write in progress
    try:
        with pytest.raises(psycopg.errors.LockNotAvailable):
            asyncio.run(migration.migrate(empty_database, lock_timeout=0.05, attempts=2))
        with psycopg.connect(empty_database) as writer:
            writer.execute("SET lock_timeout = '5s'")  # a bound on the test, not a clock: nothing is left held
            writer.execute("UPDATE applications SET status = status WHERE false")
            writer.execute("UPDATE jobs SET title = title WHERE false")
    finally:
        holder.close()
    asyncio.run(migration.migrate(empty_database, lock_timeout=0.05, attempts=1))  # once the write is over
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT count(*) FROM schema_digests").fetchone() == (1,)
