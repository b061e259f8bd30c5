"""The primary's WAL position, as this process learns it: what a replica must have replayed before it may answer
a read, and the yardstick of each replica's lag.

A position is a number of bytes of WAL (`pg_lsn - '0/0'`). A commit that has returned is in the WAL up to
`pg_current_wal_lsn()` (commits are synchronous: the service never turns `synchronous_commit` off), so a replica
that has replayed the position read when a request began shows every write committed before it.

- A request with a credential reads the position in its credential's statement (`POSITION_SQL`, one more column
  of a round trip it makes anyway).
- A request without one (public pages, the sitemap, the feed) asks `now()`: a reading of the primary begun after
  the call. Calls that arrive while a reading runs share the next one, so under load it costs the primary one tiny
  statement per round trip, not one per page.
- Every position read is kept as a sample (time, position), a tenth of a second apart at most; a replica that has
  replayed the sample taken at time t is at most `now - t` behind. That is its lag, measured on this process's
  own clock: no clock of another host enters it.
"""

from __future__ import annotations

import asyncio
import collections
import time

from rpc.db.pool import Pool

POSITION_SQL = "(pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
PROBE = "wal_position"  # the credential statement's column that reads it (`rpc.auth.authenticate` probes)
_NOW = f"SELECT {POSITION_SQL} AS position"
SAMPLE_SPACING = 0.1  # seconds between two samples kept
_SAMPLES = 2048  # at least 200 s of samples: past any lag a replica is kept for


class Positions:
    """The positions this process has read of the primary."""

    def __init__(self, primary: Pool) -> None:
        self._primary = primary
        self._samples: collections.deque[tuple[float, int]] = collections.deque(maxlen=_SAMPLES)
        self._next: asyncio.Future[int] | None = None  # the reading the calls arriving now will share
        self._running: asyncio.Future[int] | None = None

    @property
    def latest(self) -> int:
        """The newest position read (0 before any)."""
        return self._samples[-1][1] if self._samples else 0

    def seen(self, position: int) -> None:
        """A position read on the primary just now (by a credential's statement, or here). Within a tenth of a
        second of the newest sample, it only raises that sample's position: a replica that has replayed it is
        then still at most as far behind as the sample's time says."""
        if position <= self.latest:
            return
        now = time.monotonic()
        if self._samples and now - self._samples[-1][0] < SAMPLE_SPACING:
            self._samples[-1] = (self._samples[-1][0], position)
        else:
            self._samples.append((now, position))

    def lag(self, replayed: int) -> float:
        """How far behind the primary a replica that has replayed `replayed` is, in seconds, at most."""
        if not self._samples or replayed >= self._samples[-1][1]:
            return 0.0
        now = time.monotonic()
        for moment, position in reversed(self._samples):
            if position <= replayed:
                return now - moment
        return now - self._samples[0][0]  # behind every sample kept: longer ago than that

    async def now(self) -> int:
        """The primary's position, read by a statement begun after this call."""
        if self._next is None:
            self._next = asyncio.ensure_future(self._read_after(self._running))
            self._next.add_done_callback(_retrieved)
        return await asyncio.shield(self._next)

    async def fresh(self, age: float) -> int:
        """The newest position, read anew when the newest sample is older than `age` seconds."""
        if self._samples and time.monotonic() - self._samples[-1][0] < age:
            return self.latest
        return await self.now()

    async def _read_after(self, running: asyncio.Future[int] | None) -> int:
        if running is not None:
            await asyncio.wait([running])
        self._running, self._next = self._next, None  # later calls form the next reading: this one starts now
        async with self._primary.connection() as conn:
            row = await (await conn.execute(_NOW)).fetchone()
        assert row is not None
        position = int(row["position"])
        self.seen(position)
        return position


def _retrieved(reading: asyncio.Future[int]) -> None:
    """A failed reading's error is its callers' (each sees it); none left to log it as never retrieved."""
    if not reading.cancelled():
        reading.exception()
