"""The connection pool and the one place where driver errors become API errors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from rpc.core.types import Connection
from rpc.settings import Settings

log = logging.getLogger(__name__)

# A lock conflict, not an outage: the database answered, and a whole transaction tried again may well pass.


class Pool(AsyncConnectionPool[Connection]):
    """psycopg's pool, with callers queueing on a semaphore of `max_size` before they ask it for a connection.

    The pool's own queue of waiting clients costs a task and a condition per wait: with 32 requests sharing 10
    connections that was a sixth of a cached `jobs.list` call's CPU (py-spy; docs/benchmarks.md). A semaphore
    wait costs a future. The pool's timeout still applies to the whole wait, and is still a `PoolTimeout`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = asyncio.Semaphore(self.max_size)

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[Connection]:  # noqa: ASYNC109 - as overridden
        limit = self.timeout if timeout is None else timeout
        started = time.monotonic()
        if self._gate.locked():
            try:
                async with asyncio.timeout(limit):
                    await self._gate.acquire()
            except TimeoutError:
                raise PoolTimeout(f"couldn't get a connection after {limit:.2f} sec") from None
        else:
            await self._gate.acquire()  # a free place: taken at once, without a timer
        try:
            async with super().connection(max(0.0, limit - (time.monotonic() - started))) as conn:
                yield conn
        finally:
            self._gate.release()


def driver_options(settings: Settings) -> dict[str, Any]:
    """What every connection of the service is opened with. Behind a transaction pooler, no named prepared
    statements: each lives in one server session, which the pooler hands to another client after the transaction
    (PgBouncer 1.18: "prepared statement _pg3_0 already exists", or another client's statement run)."""
    return {"prepare_threshold": None} if settings.pooled_by_transaction else {}


async def configure(conn: Connection) -> None:
    """Autocommit (writes open their own transaction), and UTC so that timestamps leave as `...Z`.

    Set here rather than in the pool's kwargs: procrastinate opens its listening connection with those
    kwargs plus its own `autocommit=True`, and a duplicate keyword would fail. The time zone is the one session
    setting the service makes: a transaction pooler carries it (PgBouncer tracks `TimeZone` per client and sets it
    on whichever server session serves the client; it refuses the startup packet's `options`), and
    tests/test_pooler.py checks that it does.
    """
    await conn.set_autocommit(True)
    await conn.execute("SET TIME ZONE 'UTC'")


def create_pool(settings: Settings, database_url: str, name: str = "hire-api", **overrides: Any) -> Pool:
    """An unopened pool of autocommit connections; writes open their own transaction. `overrides` are psycopg's
    pool arguments (`min_size`, `configure`, ...)."""
    options: dict[str, Any] = {
        "connection_class": psycopg.AsyncConnection[DictRow],
        "kwargs": {"row_factory": dict_row, **driver_options(settings)},
        "configure": configure,
        "min_size": settings.db_pool_min,
        "max_size": settings.db_pool_max,
        "timeout": settings.db_pool_timeout,
        # No background reconnection loop with growing back-off: a lost connection is replaced when a request
        # needs one, so service returns with the database's first answer (tests/drills).
        "reconnect_timeout": 0,
        "open": False,
        "name": name,
        **overrides,
    }
    return Pool(database_url, **options)


@contextlib.asynccontextmanager
async def open_pool(settings: Settings, database_url: str, **overrides: Any) -> AsyncIterator[Pool]:
    """The pool, open (its first connections made) for the duration of the block."""
    pool = create_pool(settings, database_url, **overrides)
    await pool.open(wait=True, timeout=30)
    try:
        yield pool
    finally:
        await pool.close()


async def one_row(cursor: psycopg.AsyncCursor[DictRow]) -> DictRow:
    """The row a statement that always answers one (an INSERT/UPDATE ... RETURNING of a known row) gave."""
    row = await cursor.fetchone()
    assert row is not None
    return row


async def count_for_account(conn: Connection, account_id: str, query: str) -> int:
    """Lock the account's row, then count with `query` (`%(account_id)s`, one `n` column), inside the caller's
    transaction: creations of one account take turns, so that two cannot both take its last free place. The count
    is a statement of its own, after the lock's: it sees what the creation it waited for committed, where a count
    in the locking statement would read the snapshot taken before the wait."""
    await conn.execute("SELECT FROM accounts WHERE id = %(account_id)s FOR UPDATE", {"account_id": account_id})
    cursor = await conn.execute(query, {"account_id": account_id})
    return int((await one_row(cursor))["n"])
