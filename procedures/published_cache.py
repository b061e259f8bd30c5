"""Answers about the published jobs, remembered per version of the published set (docs/search.md).

`job_totals.version` is bumped by the jobs triggers in every transaction that publishes, closes or edits a
published job. A call reads the version as a probe — in its credential's statement, so a hit costs no statement
of its own — and an answer is reused only under the very version it was stored with.

Why that is exact, and read-your-writes across processes: an answer is stored under the version the storing
call read *before* computing it, so it shows that version's published set or a later one, never an earlier
one. A call that begins after a write's commit reads that write's version or a later one, so it can only be
given an answer computed after that commit. Each process keeps its own entries; they need no invalidation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from rpc.core.context import Context

T = TypeVar("T")

PROBE = "published_jobs"
PROBE_SQL = "SELECT version FROM job_totals WHERE status = 'published'"


class PublishedCache(Generic[T]):
    """The latest `size` answers, least recently used dropped first: an attacker's distinct queries can push
    out entries, never grow the memory."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[Hashable, tuple[int, T]] = OrderedDict()

    async def answer(self, ctx: Context, key: Hashable, compute: Callable[[], Awaitable[T]]) -> T:
        """The remembered answer for `key` if it was stored under the version the call reads, else a new one."""
        version = await ctx.probe(PROBE)
        entry = self._entries.get(key)
        if entry is not None and entry[0] == version:
            self._entries.move_to_end(key)
            return entry[1]
        value = await compute()
        if version is not None:  # no version yet: no job was ever published, nothing worth keeping
            self._entries[key] = (version, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value
