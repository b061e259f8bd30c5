"""Answers about the published jobs, remembered per version of the published set and kept exact as it changes
(docs/search.md).

`job_totals.version` is bumped by the jobs triggers in every transaction that publishes, closes or edits a
published job, and each bump logs the job's states as they left and entered the set (`published_changes`).
A call reads the version as a probe — in its credential's statement, so a hit costs no statement of its own:

- an answer remembered under that version (or a later one) is the answer;
- an older answer *follows* the changes logged since its version, read in one statement of the call: only
  those that match its query, so a publish of "Python Engineer" leaves the answer for `rust` as it was and
  moves the total, facets and first rows of `python` by one job. An answer that cannot follow (its window of
  rows ran out, or the log no longer reaches back to it) is computed again;
- a missing answer is computed by one statement, which also reads the version in its own snapshot: the answer
  is remembered under the version it truly shows, so following later changes never applies one twice.

Why that is exact, and read-your-writes across processes: versions are bumped under the `job_totals` row lock,
so they commit in order, and a snapshot that sees version V sees every change up to V and its log rows. An
answer is only ever given to a call that read version V if it shows the published set at V or later; a call that
begins after a write's commit reads that write's version or a later one. Each process keeps its own answers.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from rpc.api import Context

PROBE = "published_jobs"
PROBE_SQL = "SELECT version FROM job_totals WHERE status = 'published'"
# Read in the statement that computes an answer, so the answer is stored under the version it shows.
VERSION_SQL = f"({PROBE_SQL}) AS _version"


class Versioned(Protocol):
    @property
    def version(self) -> int: ...


A = TypeVar("A", bound=Versioned)


@dataclass(frozen=True, slots=True)
class Changes:
    """The changes to the published set after a version that match a query, oldest first, and the version
    they lead to. Each row is a job's state as it left (`_entered` false) or entered the set, with the columns
    the query asked for."""

    version: int
    rows: list[dict[str, Any]]


_CHANGES = """
WITH now AS (SELECT version FROM job_totals WHERE status = 'published')
SELECT (SELECT version FROM now) AS _version,
    (SELECT count(DISTINCT version) FROM published_changes
     WHERE version > %(_since)s AND version <= (SELECT version FROM now)) AS _logged,
    change.*
FROM (SELECT 1) AS one LEFT JOIN LATERAL (
    SELECT entered AS _entered, {columns} FROM published_changes
    WHERE version > %(_since)s AND version <= (SELECT version FROM now) AND {predicate}
    ORDER BY version, entered
) AS change ON true
"""


async def changes_since(
    ctx: Context, since: int, columns: str, predicate: str, values: dict[str, Any]
) -> Changes | None:
    """The logged changes after version `since` whose job state satisfies `predicate` (SQL over the columns
    of `jobs` that `published_changes` keeps), or None when the log no longer holds every version since."""
    statement = _CHANGES.format(columns=columns, predicate=predicate)
    # Prepared (by psycopg, from the fifth use of a shape on a connection): the log holds a few rows after any
    # version, so a generic plan is as good as a custom one, and planning it on every call cost more database CPU
    # than running it.
    result = await ctx.conn.execute(statement, {**values, "_since": since})
    rows = await result.fetchall()
    version = rows[0]["_version"]
    if version is None or rows[0]["_logged"] != version - since:
        return None  # trimmed, or a version bumped by hand without its log rows: the answer is computed anew
    return Changes(version=version, rows=[row for row in rows if row["_entered"] is not None])


class PublishedCache(Generic[A]):
    """The latest `size` answers, least recently used dropped first (an attacker's distinct queries can push
    out entries, never grow the memory), and one refresh per key at a time: concurrent asks of a popular query
    at a new version wait for one statement instead of running it 32 times."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[Hashable, A] = OrderedDict()
        self._running: dict[Hashable, asyncio.Future[A | None]] = {}

    async def answer(
        self,
        ctx: Context,
        key: Hashable,
        compute: Callable[[], Awaitable[A]],
        follow: Callable[[A], Awaitable[A | None]],
    ) -> A:
        """The answer for `key` at the version the call reads or later: remembered, followed from an older one
        (`follow` gives None when it cannot), or computed."""
        version = await ctx.probe(PROBE)
        if version is None:  # no job was ever published: nothing worth keeping
            return await compute()
        entry = self._entries.get(key)
        if entry is not None and entry.version >= version:
            self._entries.move_to_end(key)
            return entry
        running = self._running.get(key)
        if running is not None:  # another call is bringing this answer up to date: share its work
            shared = await asyncio.shield(running)  # None: it failed, and this call does the work itself
            if shared is not None and shared.version >= version:
                return shared
            entry = self._entries.get(key)  # followed from what that call left, not from what it started with
        return await self._refreshed(key, entry, compute, follow)

    async def _refreshed(
        self,
        key: Hashable,
        entry: A | None,
        compute: Callable[[], Awaitable[A]],
        follow: Callable[[A], Awaitable[A | None]],
    ) -> A:
        """`entry` followed to now, or the answer computed, while later calls for `key` wait for it."""
        future: asyncio.Future[A | None] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        value = None
        try:
            value = await follow(entry) if entry is not None else None
            if value is None:
                value = await compute()
        finally:
            future.set_result(value)
            if self._running.get(key) is future:
                del self._running[key]
        self._keep(key, value)
        return value

    def _keep(self, key: Hashable, value: A) -> None:
        current = self._entries.get(key)
        if current is None or current.version <= value.version:
            self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
