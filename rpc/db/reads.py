"""Where a read is answered: by a streaming replica that has replayed the primary's position as of the read's
start, else by the primary — read-your-writes for every reader, whoever wrote (docs/scaling.md).

A read names the position it must see (`run(position, work)`; 0 when it needs none, None when it is not known,
which sends it to the primary): a replica known to have replayed it answers at once;
else the read waits for one, at most `REPLICA_WAIT_MS`, while the replicas' watchers check them every millisecond;
then the primary answers. A replica that fails under a read (its connection lost, a conflict with its recovery) is
not the read's failure: the read runs again on the primary, which it can, since it changed nothing. Without
`DATABASE_REPLICA_URLS` every read goes straight to the primary's pool, as before.

Counted for `/metrics`: reads by the database that answered them, and the reads that fell back to the primary, by
reason — `behind` (no replica replayed the position in time), `unavailable` (every replica left out),
`failed` (a replica failed under the read), `wrote` (a read that also writes, such as an export recorded in the
audit log: the replica refused its first write, so nothing was written, and the primary runs it) and
`unknown_position` (a credential's first use, whose statement did not read the position).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import TypeVar

import psycopg

from rpc.core.types import Connection
from rpc.db.pool import Pool
from rpc.db.positions import Positions
from rpc.db.replica import CHECK_TIMEOUT, Replica
from rpc.settings import Settings

T = TypeVar("T")
PRIMARY = "primary"
FIRST_CHECK = 2 * CHECK_TIMEOUT  # seconds a start waits for its replicas' first checks: a check, then a pool opened
_SYSTEM = "SELECT system_identifier::text AS system FROM pg_control_system()"


class Reads:
    """The primary's pool and the replicas; one per process, opened with the services."""

    def __init__(self, settings: Settings, primary: Pool, primary_url: str) -> None:
        self.primary = primary
        self.positions = Positions(primary)
        self._primary_url = primary_url
        self._wait = settings.replica_wait_ms / 1000
        self._replicas = [
            Replica(settings, url, self.positions, self._waited_beyond, self._progressed)
            for url in settings.database_replica_urls
        ]
        self._waiters: list[tuple[int, asyncio.Future[Replica]]] = []
        self._turn = 0
        self._reads = dict.fromkeys([PRIMARY, *(replica.label for replica in self._replicas)], 0)
        self._fallbacks = dict.fromkeys(["behind", "unavailable", "failed", "wrote", "unknown_position"], 0)

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, settings: Settings, primary: Pool, primary_url: str) -> AsyncIterator[Reads]:
        """The reads, with a watcher per replica for the duration of the block."""
        reads = cls(settings, primary, primary_url)
        if not reads._replicas:
            yield reads
            return
        async with primary.connection() as conn:
            row = await (await conn.execute(_SYSTEM)).fetchone()
        assert row is not None
        watchers = [asyncio.create_task(replica.watch(row["system"])) for replica in reads._replicas]
        try:
            # Each replica checked once before the process serves, so that its first reads (its search index's
            # build among them) find the healthy ones; one that does not answer is waited for only so long.
            await asyncio.wait([asyncio.create_task(r.checked.wait()) for r in reads._replicas], timeout=FIRST_CHECK)
            yield reads
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    @property
    def replicated(self) -> bool:
        """Whether any replica may answer reads (`DATABASE_REPLICA_URLS` is set)."""
        return bool(self._replicas)

    async def now(self) -> int | None:
        """The position a read without a credential must see: the primary's, read after this call began (one
        statement shared by the calls that arrive meanwhile); None without replicas, where no read needs it."""
        return await self.positions.now() if self._replicas else None

    async def run(self, position: int | None, work: Callable[[Connection], Awaitable[T]]) -> T:
        """`work` on a replica that has replayed `position` (0: any; None: unknown, so the primary), else on the
        primary; again on the primary when the replica fails under it, or refuses a write `work` makes (it may
        write only what a run on the primary would write the same)."""
        replica = await self._replica_for(position)
        if replica is not None:
            try:
                async with replica.connection() as conn:
                    result = await work(conn)
            except (psycopg.OperationalError, psycopg.errors.SerializationFailure) as exc:
                replica.troubled(exc)
                self._fallbacks["failed"] += 1
            except psycopg.errors.ReadOnlySqlTransaction:
                self._fallbacks["wrote"] += 1  # nothing was written: the replica refused the first write
            else:
                self._reads[replica.label] += 1
                return result
        async with self.primary.connection() as conn:
            result = await work(conn)
        self._reads[PRIMARY] += 1
        return result

    def answered_by_primary(self) -> None:
        """Count a read its caller ran on a primary connection it already held (a `GET` without replicas)."""
        self._reads[PRIMARY] += 1

    async def current(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        """`work` where every write committed before this call shows: a read with no credential's statement to
        read the position in (a public page)."""
        return await self.run(await self.now(), work)

    @contextlib.asynccontextmanager
    async def connection(self, position: int | None) -> AsyncIterator[Connection]:
        """A connection of a replica that has replayed `position`, else of the primary, for a read that is not
        simply run again (a render, which writes as it reads): a replica that fails before it is handed out is
        replaced by the primary, one that fails after fails the read."""
        replica = await self._replica_for(position)
        async with contextlib.AsyncExitStack() as stack:
            conn: Connection | None = None
            label = PRIMARY
            if replica is not None:
                try:
                    conn = await stack.enter_async_context(replica.connection())
                    label = replica.label
                except psycopg.OperationalError as exc:
                    replica.troubled(exc)
                    self._fallbacks["failed"] += 1
            if conn is None:
                conn = await stack.enter_async_context(self.primary.connection())
            self._reads[label] += 1
            yield conn

    def long_read(self) -> tuple[str, str]:
        """Where a long read with a connection of its own (a search index built anew) goes, named and its URL: the
        replica that lags least, else the primary. It needs no position: it reads its own from what it reads."""
        usable = [replica for replica in self._replicas if replica.usable]
        if not usable:
            return PRIMARY, self._primary_url
        chosen = min(usable, key=lambda replica: replica.lag or 0.0)
        return chosen.label, chosen.url

    async def _replica_for(self, position: int | None) -> Replica | None:
        if not self._replicas:
            return None
        if position is None:
            self._fallbacks["unknown_position"] += 1
            return None
        self.positions.seen(position)
        usable = [replica for replica in self._replicas if replica.usable]
        if not usable:
            self._fallbacks["unavailable"] += 1
            return None
        ready = [replica for replica in usable if replica.replayed >= position]
        if ready:
            self._turn += 1
            return ready[self._turn % len(ready)]
        replica = await self._replayed(position, usable)
        if replica is None:
            self._fallbacks["behind"] += 1
        return replica

    async def _replayed(self, position: int, usable: Iterable[Replica]) -> Replica | None:
        """The first replica to replay `position` within `REPLICA_WAIT_MS`, or None."""
        if self._wait <= 0:
            return None
        replayed: asyncio.Future[Replica] = asyncio.get_running_loop().create_future()
        waiter = (position, replayed)
        self._waiters.append(waiter)
        for replica in usable:
            replica.wake()
        try:
            async with asyncio.timeout(self._wait):
                return await replayed
        except TimeoutError:
            return None
        finally:
            self._waiters.remove(waiter)

    def _waited_beyond(self, replayed: int) -> bool:
        """Whether a read waits for a position past `replayed`."""
        return any(position > replayed for position, _ in self._waiters)

    def _progressed(self, replica: Replica) -> None:
        """After a check of `replica`: the reads waiting for a position it has replayed go to it."""
        if not replica.usable:
            return
        for position, future in self._waiters:
            if position <= replica.replayed and not future.done():
                future.set_result(replica)

    # What /metrics reads (rpc.core.metrics.DatabaseUse).

    def reads_by_database(self) -> Mapping[str, int]:
        return self._reads

    def fallbacks_by_reason(self) -> Mapping[str, int]:
        return self._fallbacks if self._replicas else {}

    def replica_states(self) -> Iterable[tuple[str, bool, float | None]]:
        return [(replica.label, replica.usable, replica.lag) for replica in self._replicas]
