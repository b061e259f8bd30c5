"""The files sweep, run by the delivery workers: bytes whose File is gone are deleted from the store; Files that
no profile and no row of the business (`Business.file_holders`) refers to are deleted 24 hours after their
upload (their bytes follow on the next run); and, hourly, bytes that no File names (an upload whose row never
committed, a draft a crash left) are deleted once they are an hour old, well past any upload still in flight.

Bytes are deleted only for deletions already committed: deleting them in the transaction that deletes the rows
could leave, were it rolled back, Files whose bytes are missing.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

import psycopg

from rpc.core.periodic import EventSink, Periodic
from rpc.core.types import Connection
from rpc.files.service import open_store
from rpc.files.store import Store, is_file_id
from rpc.settings import Settings

log = logging.getLogger(__name__)

BATCH = 1_000
UNREFERENCED_FOR = dt.timedelta(hours=24)
STRAY_AFTER = dt.timedelta(hours=1)

_GONE = """
SELECT file_id::text AS file_id FROM file_deletions ORDER BY deleted_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED
"""
_FORGET = "DELETE FROM file_deletions WHERE file_id = ANY(%(ids)s::uuid[])"
_EXPIRE = """
DELETE FROM files WHERE id IN (
    SELECT f.id FROM files AS f
    WHERE f.created_at < %(before)s
      AND NOT EXISTS (SELECT FROM users AS u WHERE u.resume_file_id = f.id){held}
    ORDER BY f.created_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
"""
_NAMED = "SELECT id::text AS id FROM files WHERE id = ANY(%(ids)s::uuid[])"


def expiring(holders: Sequence[str]) -> str:
    """The statement that expires unreferenced Files: none that a profile or any of `holders` refers to."""
    return _EXPIRE.format(held="".join(f"\n      AND NOT EXISTS ({holder})" for holder in holders))


async def sweep(
    conn: Connection, store: Store, holders: Sequence[str], *, now: dt.datetime | None = None
) -> dict[str, int]:
    """One batch of bytes deleted, one of unreferenced Files expired, in `conn`'s transaction."""
    moment = now or dt.datetime.now(dt.UTC)
    rows = await (await conn.execute(_GONE, {"batch": BATCH})).fetchall()
    ids = [row["file_id"] for row in rows]
    for file_id in ids:
        await store.delete(file_id)
    await conn.execute(_FORGET, {"ids": ids})
    try:
        async with conn.transaction():
            cursor = await conn.execute(expiring(holders), {"before": moment - UNREFERENCED_FOR, "batch": BATCH})
            expired = max(cursor.rowcount, 0)
    except psycopg.errors.ForeignKeyViolation:  # referenced meanwhile by an application or a profile
        expired = 0
    return {"bytes deleted": len(ids), "files expired": expired}


async def sweep_strays(conn: Connection, store: Store, *, now: dt.datetime | None = None) -> int:
    """Delete the store's keys that no File names and that are older than STRAY_AFTER; how many."""
    before = (now or dt.datetime.now(dt.UTC)) - STRAY_AFTER
    old: list[str] = [key async for key, written in store.listing() if written < before]
    deleted = 0
    for start in range(0, len(old), BATCH):
        chunk = old[start : start + BATCH]
        ids = [key for key in chunk if is_file_id(key)]
        named = {row["id"] for row in await (await conn.execute(_NAMED, {"ids": ids})).fetchall()}
        for key in chunk:
            if key not in named:
                await store.delete(key)
                deleted += 1
    return deleted


def periodic(settings: Settings, holders: Sequence[str]) -> dict[str, Periodic]:
    """The sweep every minute and the strays' hourly, on the deployment's store."""
    store = open_store(settings)

    async def run(conn: Connection, emitter: EventSink) -> None:
        done = await sweep(conn, store, holders)
        if any(done.values()):  # only what was done: a line a minute of zeros is noise
            log.info("files sweep: %s", done)

    async def strays(conn: Connection, emitter: EventSink) -> None:
        if deleted := await sweep_strays(conn, store):
            log.info("files sweep: %d stray objects deleted", deleted)

    return {"files_sweep": Periodic(cron="* * * * *", run=run), "files_strays": Periodic(cron="17 * * * *", run=strays)}
