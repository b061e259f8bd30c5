"""Bring a database to the current schema, safely from any number of processes at once, and without costing a
request of the processes already serving it.

Every start comes here (`bin/serve`, `bin/worker`, `bin/admin`, `bin/migrate`). Under one advisory lock it first
reads whether the database already has this schema (one read: the digest of `schema.sql` and `migrations/`
recorded by the last change); a current database is left untouched, so starting a process takes no lock any
request needs (the extras, the queue's schema and the first signing key, then only read that they are there).
Otherwise an empty database gets `schema.sql` and is recorded at the newest migration's version; an existing one
gets its pending `migrations/NNNN_what.sql` in order (changes to existing tables), then `schema.sql` again (it is
idempotent: new tables, indexes and functions arrive that way).
That runs in one transaction, so a failed step leaves the database as it was, and with a short `lock_timeout`:
a request queued behind one of its table locks waits at most that long, and the change, having given its locks
back, tries again a little later (a bounded number of times) rather than hold the requests up.

The advisory lock is a session's, held across those transactions. Behind a transaction pooler without a direct
connection (`session_lock=False`) no session outlives a transaction, so each try is one transaction that takes a
transaction-level lock first, then reads whether the database is current, changes it, runs the extras and records
the digest: the same turns, only with the lock given back between tries.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from rpc.db.pool import driver_options
from rpc.settings import PROJECT, Settings

log = logging.getLogger(__name__)

SCHEMA = PROJECT / "schema.sql"
MIGRATIONS = PROJECT / "migrations"
BASELINE = MIGRATIONS / "baseline.sql"
LOCK_KEY = 0x48495245  # "HIRE": one advisory lock for every schema change
LOCK_TIMEOUT = 1.0  # seconds a schema change waits for one table lock (and a request behind it, at most)
LOCK_ATTEMPTS = 30  # tries of a change that cannot take its locks, a growing pause apart (about a minute in all)

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

VERSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer        NOT NULL,
    applied_at  timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT schema_migrations_pkey PRIMARY KEY (version)
)"""
_APPLIED = "SELECT coalesce(max(version), 0) AS version FROM schema_migrations"
_RECORD = "INSERT INTO schema_migrations (version) VALUES (%(version)s) ON CONFLICT DO NOTHING"
# What the last change brought the database to: the digest of the schema files it applied. Written after all of it
# (the extras too: the queue's schema, the first key), so that a database recorded at today's digest needs nothing.
DIGESTS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_digests (
    digest      text           NOT NULL,
    applied_at  timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT schema_digests_pkey PRIMARY KEY (digest)
)"""
_CURRENT = "SELECT EXISTS (SELECT FROM schema_digests WHERE digest = %(digest)s) AS current"
_RECORD_DIGEST = "INSERT INTO schema_digests (digest) VALUES (%(digest)s) ON CONFLICT DO NOTHING"
_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %(timeout)s, true)"  # SET LOCAL, parameterised

Extra = Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    path: Path


def migrations(folder: Path = MIGRATIONS) -> list[Migration]:
    """The numbered migrations, in order; a misnamed file is an error, not something to skip, and so is a number
    used twice (a database recorded at that number would never get the second one)."""
    found: list[Migration] = []
    for path in sorted(folder.glob("*.sql")):
        if path.name == BASELINE.name:
            continue
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise ValueError(f"{path.name}: migrations are named NNNN_what.sql")
        version = int(match.group(1))
        if found and found[-1].version == version:
            raise ValueError(f"{found[-1].path.name} and {path.name} share the number {version}: renumber one")
        found.append(Migration(version, path))
    return found


def digest(known: list[Migration]) -> str:
    """What identifies this schema: `schema.sql` and every migration, names and text."""
    hashed = hashlib.sha256(SCHEMA.read_bytes())
    for migration in known:
        hashed.update(migration.path.name.encode() + b"\0" + migration.path.read_bytes())
    return hashed.hexdigest()


async def migrate(
    database_url: str,
    *extras: Extra,
    lock_timeout: float = LOCK_TIMEOUT,
    attempts: int = LOCK_ATTEMPTS,
    session_lock: bool = True,
    options: Mapping[str, Any] | None = None,
) -> int:
    """Apply what is pending, if anything is, and return the schema version; `extras` run under the same lock
    afterwards, on a current database too (they only read when there is nothing for them to do). `options` are
    the connection's (`rpc.db.pool.driver_options`)."""
    known = migrations()
    newest = known[-1].version if known else 0
    wanted = digest(known)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True, **(options or {})) as conn:
        if not session_lock:
            await _patiently(conn, lambda: _migrate_in_one(conn, known, wanted, extras, lock_timeout), attempts)
            return newest
        await conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            if await _current(conn, wanted):
                for extra in extras:
                    await extra(conn)
                return newest
            await _patiently(conn, lambda: _apply(conn, known, lock_timeout), attempts)
            for extra in extras:
                await extra(conn)
            await conn.execute(_RECORD_DIGEST, {"digest": wanted})
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    return newest


async def migrate_as_configured(settings: Settings, database_url: str, *extras: Extra) -> int:
    """`migrate` through `DATABASE_DIRECT_URL` when it is given (the lock is a session's); behind a transaction
    pooler without it, with a transaction-level lock, said once in the log; else through `database_url`."""
    if settings.database_direct_url:
        return await migrate(settings.database_direct_url, *extras)
    if settings.pooled_by_transaction:
        log.warning(
            "DATABASE_POOLER=transaction without DATABASE_DIRECT_URL: the schema change takes a transaction-level "
            "lock, each of its tries in one transaction, instead of a session's"
        )
        return await migrate(database_url, *extras, session_lock=False, options=driver_options(settings))
    return await migrate(database_url, *extras)


async def _migrate_in_one(
    conn: psycopg.AsyncConnection[Any],
    known: list[Migration],
    wanted: str,
    extras: tuple[Extra, ...],
    lock_timeout: float,
) -> None:
    """All of a migration in the caller's transaction, under a transaction-level lock."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
    current = await _current(conn, wanted)
    if not current:
        await _apply(conn, known, lock_timeout)
    for extra in extras:
        await extra(conn)
    if not current:
        await conn.execute(_RECORD_DIGEST, {"digest": wanted})


async def _current(conn: psycopg.AsyncConnection[Any], wanted: str) -> bool:
    """Whether the database has this schema already: one read, which takes no lock a request could wait on."""
    if not await _exists(conn, "schema_digests"):  # no digest recorded yet: older than this check, or empty
        return False
    cursor = await conn.execute(_CURRENT, {"digest": wanted})
    row = await cursor.fetchone()
    return bool(row and row[0])


async def _exists(conn: psycopg.AsyncConnection[Any], table: str) -> bool:
    cursor = await conn.execute("SELECT to_regclass(%(table)s) IS NOT NULL", {"table": table})
    return bool((await cursor.fetchone() or (False,))[0])


async def _patiently(conn: psycopg.AsyncConnection[Any], change: Callable[[], Awaitable[None]], attempts: int) -> None:
    """`change` in one transaction; when one of its locks is not to be had within its `lock_timeout` (or it was
    chosen to break a deadlock), everything it held is given back, so the requests waiting behind it go on, and it
    tries again after a pause, up to `attempts` times."""
    for attempt in range(1, attempts + 1):
        try:
            async with conn.transaction():
                await change()
            return
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected) as exc:
            if attempt == attempts:
                raise
            pause = min(5.0, 0.1 * 2**attempt)
            log.warning(
                "the schema change gave way to requests (%s); trying again in %.1f s", type(exc).__name__, pause
            )
            await asyncio.sleep(pause)


async def _apply(conn: psycopg.AsyncConnection[Any], known: list[Migration], lock_timeout: float) -> None:
    """The pending migrations and `schema.sql`, each lock waited for at most `lock_timeout` (in the caller's
    transaction)."""
    await conn.execute(_LOCK_TIMEOUT, {"timeout": f"{round(lock_timeout * 1000)}ms"})
    newest = known[-1].version if known else 0
    existing = await _exists(conn, "schema_migrations")
    await conn.execute(VERSIONS_TABLE)
    await conn.execute(DIGESTS_TABLE)
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
