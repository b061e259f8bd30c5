"""Bring a database to the current schema, safely from any number of processes at once.

An empty database gets `schema.sql` and is recorded at the newest migration's version. An existing one
gets its pending `migrations/NNNN_what.sql` in order (changes to existing tables), then `schema.sql` again
(it is idempotent: new tables, indexes and functions arrive that way). All of it runs under one advisory
lock and in one transaction, so a failed step leaves the database as it was.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from rpc.settings import PROJECT

log = logging.getLogger(__name__)

SCHEMA = PROJECT / "schema.sql"
MIGRATIONS = PROJECT / "migrations"
BASELINE = MIGRATIONS / "baseline.sql"
LOCK_KEY = 0x48495245  # "HIRE": one advisory lock for every schema change

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

VERSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer        NOT NULL,
    applied_at  timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT schema_migrations_pkey PRIMARY KEY (version)
)"""
_VERSIONS_EXIST = "SELECT to_regclass('schema_migrations') IS NOT NULL AS present"
_APPLIED = "SELECT coalesce(max(version), 0) AS version FROM schema_migrations"
_RECORD = "INSERT INTO schema_migrations (version) VALUES (%(version)s) ON CONFLICT DO NOTHING"

Extra = Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    path: Path


def migrations(folder: Path = MIGRATIONS) -> list[Migration]:
    """The numbered migrations, in order; a misnamed file is an error, not something to skip."""
    found = []
    for path in sorted(folder.glob("*.sql")):
        if path.name == BASELINE.name:
            continue
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise ValueError(f"{path.name}: migrations are named NNNN_what.sql")
        found.append(Migration(int(match.group(1)), path))
    return found


async def migrate(database_url: str, *extras: Extra) -> int:
    """Apply what is pending and return the schema version; `extras` run under the same lock afterwards."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            async with conn.transaction():
                version = await _apply(conn)
            for extra in extras:
                await extra(conn)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    return version


async def _apply(conn: psycopg.AsyncConnection[Any]) -> int:
    known = migrations()
    newest = known[-1].version if known else 0
    cursor = await conn.execute(_VERSIONS_EXIST)
    existing = (await cursor.fetchone() or (False,))[0]
    await conn.execute(VERSIONS_TABLE)
    if existing:
        cursor = await conn.execute(_APPLIED)
        current = int((await cursor.fetchone() or (0,))[0])
        for migration in known:
            if migration.version > current:
                log.info("applying migration %s", migration.path.name)
                await conn.execute(migration.path.read_text())
                await conn.execute(_RECORD, {"version": migration.version})
    await conn.execute(SCHEMA.read_text())
    await conn.execute(_RECORD, {"version": newest})
    return newest
