"""One streaming replica as a process sees it: how far it has replayed the primary's WAL, whether it may answer
reads, and its pool of connections while it may.

A watcher (`watch()`, a task for the process's life) keeps a connection of its own to the replica and checks it
every second, and every millisecond while a read waits for it to replay a position: the position it has replayed,
that it is in recovery, and that it is a replica of this primary (the same system identifier). A replica is
*left out* — no read is sent to it, its pool is closed, and a read waiting for one of its connections goes to the
primary — when a check fails (down, refusing connections, not answering within two seconds, promoted, another
database), when it lags more than `REPLICA_MAX_LAG_SECONDS`, when a read on it loses its connection, or when its
pool cannot connect. It is *taken back* when a check passes again and a new pool has made its first connections.

The position read by a check holds for a connection of the pool only if both are of the same run of the replica's
server (a restarted replica may show less than it did). So each new connection reads the position on itself: one
showing less than the last check said is refused, and the watcher checks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from rpc.core.types import Connection
from rpc.db.pool import Pool, configure, create_pool, driver_options
from rpc.db.positions import Positions
from rpc.settings import Settings

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0  # between two checks of a replica no read is waiting for
WAITING_PAUSE = 0.001  # between two checks while a read waits for the replica to replay its position
CHECK_TIMEOUT = 2.0  # a replica that does not connect or answer its check within this is left out
_CHECK = """
SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS replayed, pg_is_in_recovery() AS standby,
       (SELECT system_identifier::text FROM pg_control_system()) AS system
"""
_REPLAYED = "SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS replayed"


class LeftOut(psycopg.OperationalError):
    """The replica may not answer reads now; the read goes to the primary."""


def label_of(url: str) -> str:
    """How metrics and logs name a replica: its host and port (never its password)."""
    parts = conninfo_to_dict(url)
    return f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}"


class Replica:
    """One replica of `DATABASE_REPLICA_URLS`; `waiting(replayed)` says whether a read waits for more than
    `replayed`, and `progressed(self)` is called after every check."""

    def __init__(
        self,
        settings: Settings,
        url: str,
        positions: Positions,
        waiting: Callable[[int], bool],
        progressed: Callable[[Replica], None],
    ) -> None:
        self.label = label_of(url)
        self.replayed = 0  # the position it had replayed at the last check (0: unknown, left out)
        self.lag: float | None = None  # seconds behind the primary at the last check (None: down)
        self._settings = settings
        self.url = url
        self._positions = positions
        self._waiting = waiting
        self._progressed = progressed
        self._pool: Pool | None = None
        self._wake = asyncio.Event()
        self._system = ""  # the primary's system identifier, learned by `watch`
        self._out_said = False  # whether the log has said it is left out since it last answered reads
        self._closing: set[asyncio.Task[None]] = set()
        self.checked = asyncio.Event()  # set once the first check has been made, whatever it found

    @property
    def usable(self) -> bool:
        return self._pool is not None

    def wake(self) -> None:
        """Check now: a read waits for a position."""
        self._wake.set()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        pool = self._pool
        if pool is None:
            raise LeftOut(f"the replica {self.label} is left out")
        async with pool.connection() as conn:
            yield conn

    def troubled(self, exc: BaseException) -> None:
        """A read on it failed with `exc`: left out at once when its connection or server failed (the watcher
        takes it back when it is healthy again); a recovery conflict or a busy pool leaves it in."""
        if isinstance(exc, psycopg.errors.SerializationFailure | PoolTimeout | LeftOut):
            log.info("a read on the replica %s was answered by the primary instead: %s", self.label, exc)
            return
        self._leave_out(f"a read on it failed: {exc}")
        self.wake()

    async def watch(self, system: str) -> None:
        """Check the replica for the process's life, leaving it out and taking it back as it fares."""
        self._system = system
        try:
            while True:
                try:
                    async with asyncio.timeout(CHECK_TIMEOUT):
                        conn = await psycopg.AsyncConnection.connect(
                            self.url, autocommit=True, **driver_options(self._settings)
                        )
                    async with conn:
                        while True:
                            await self._check(conn)
                            self.checked.set()
                            await self._pause()
                except (psycopg.Error, OSError, TimeoutError) as exc:
                    self._leave_out(str(exc) or type(exc).__name__)
                self.checked.set()
                await self._rest()
        finally:  # the process stops
            pool, self._pool = self._pool, None
            if pool is not None:
                await pool.close()
            if self._closing:
                await asyncio.wait(self._closing)

    async def _check(self, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            primary: int | None = await self._positions.fresh(CHECK_SECONDS / 2)
        except psycopg.Error:  # the primary away is not the replica's fault: its lag is measured again later
            primary = None
        async with asyncio.timeout(CHECK_TIMEOUT):
            row = await (await conn.execute(_CHECK)).fetchone()
        assert row is not None
        replayed, standby, system = row
        if not standby or system != self._system:
            raise psycopg.OperationalError("it is not a streaming replica of DATABASE_URL (promoted, or another)")
        self.replayed = int(replayed)
        if primary is not None:
            self.lag = self._positions.lag(self.replayed) if self.replayed < primary else 0.0
        elif self.lag is None:
            return  # not measured yet: left out until it is
        limit = self._settings.replica_max_lag_seconds
        if self.lag > limit:
            self._leave_out(f"it lags {self.lag:.1f} s (REPLICA_MAX_LAG_SECONDS={limit:g})", lag=self.lag)
        elif self._pool is None:
            await self._take_back()
        self._progressed(self)

    async def _pause(self) -> None:
        """Until the next check: a millisecond while a read waits for more than this replica has replayed, else
        a second or until woken."""
        if self._pool is not None and self._waiting(self.replayed):
            await asyncio.sleep(WAITING_PAUSE)
            return
        await self._rest()

    async def _rest(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CHECK_SECONDS):
                await self._wake.wait()
        self._wake.clear()

    async def _take_back(self) -> None:
        pool = create_pool(
            self._settings,
            self.url,
            name=f"hire-replica-{self.label}",
            configure=self._configure,
            reconnect_failed=self._refused,
        )
        try:
            await pool.open(wait=True, timeout=CHECK_TIMEOUT)
        except BaseException:
            await pool.close()
            raise
        self._pool = pool
        self._out_said = False
        log.warning("the replica %s is taken back: it answers reads again (lag %.1f s)", self.label, self.lag or 0)

    async def _configure(self, conn: Connection) -> None:
        """A new connection of the pool, refused when its server shows less than the last check read (a
        restarted replica, which the watcher has not yet seen go)."""
        await configure(conn)
        row = await (await conn.execute(_REPLAYED)).fetchone()
        if row is None or row["replayed"] is None or int(row["replayed"]) < self.replayed:
            self.wake()
            raise psycopg.OperationalError(f"the replica {self.label} shows less than it did: restarted?")

    async def _refused(self, pool: AsyncConnectionPool[Any]) -> None:
        if pool is self._pool:
            self._leave_out("its pool cannot connect")
            self.wake()

    def _leave_out(self, reason: str, lag: float | None = None) -> None:
        """No read goes to it from now on; said once in the log until it is taken back."""
        self.replayed = 0
        self.lag = lag
        if not self._out_said:
            self._out_said = True
            log.warning("the replica %s is left out, reads go to the primary or other replicas: %s", self.label, reason)
        pool, self._pool = self._pool, None
        if pool is None:
            return
        closing = asyncio.ensure_future(pool.close())  # waits for reads on it to end; waiting ones go elsewhere
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)
