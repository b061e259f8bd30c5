"""The first rows of a query's matches, kept in order as jobs enter and leave the published set.

A remembered answer holds a few more rows than its page shows (`SLACK`), so it can still show a full page, and
know whether another follows, after some of them have left; when it cannot, it says so and is computed again.
Rows that enter are held beside the others (up to `GROWTH` times what was computed) rather than pushing the
last ones out: a posting that enters and later closes then leaves the rows as they were, instead of using up
the slack of every answer it passed through.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

SLACK = 10  # rows beyond the page: how many may leave before the answer has to be computed again
GROWTH = 4  # rows held at most, as a multiple of the rows computed

Key = tuple[Any, ...]  # the order of the query, larger first; unique (it ends with the job's id)


@dataclass(frozen=True, slots=True)
class Ranked:
    """One match: its place in the order, and what is shown of it."""

    key: Key
    item: Any

    @property
    def id(self) -> str:
        return str(self.key[-1])


@dataclass(frozen=True, slots=True)
class Window:
    """`rows`: the matches after `start` (None: from the first), best first; `complete` when no other match
    follows them. `total` counts every match, wherever it stands."""

    rows: tuple[Ranked, ...]
    complete: bool
    total: int
    room: int  # rows held at most
    start: Key | None = None

    @classmethod
    def of(cls, rows: Sequence[Ranked], asked: int, total: int, start: Key | None = None) -> Window:
        """The window from a statement that asked for `asked` rows after `start` and got `rows`."""
        return cls(rows=tuple(rows), complete=len(rows) < asked, total=total, room=GROWTH * asked, start=start)

    def left(self, job_id: str) -> Window:
        """A match left the published set (an edited job leaves, then enters again as it is now)."""
        rows = tuple(row for row in self.rows if row.key[-1] != job_id)
        return replace(self, rows=rows, total=self.total - 1)

    def entered(self, row: Ranked) -> Window:
        """A match entered the published set: counted, and placed among the rows when it falls within them."""
        counted = replace(self, total=self.total + 1)
        if self.start is not None and not row.key < self.start:
            return counted  # before this window's start: on an earlier page
        if not self.complete and (not self.rows or row.key < self.rows[-1].key):
            return counted  # beyond the last row held: unknown ground, as any later match
        # The first row held that comes after it (tuples compare in C: no object made per row held).
        at = next((index for index, held in enumerate(self.rows) if held.key < row.key), len(self.rows))
        rows = (*self.rows[:at], row, *self.rows[at:])
        if len(rows) > self.room:
            return replace(counted, rows=rows[: self.room], complete=False)
        return replace(counted, rows=rows)

    def followed(self, changes: Iterable[tuple[bool, Ranked]]) -> Window:
        """The window after `changes` in order: (true, the state that entered) or (false, the state that left)."""
        window = self
        for entered, row in changes:
            window = window.entered(row) if entered else window.left(row.id)
        return window

    def holds(self, count: int) -> bool:
        """Whether the first `count` matches after the start are all here (or every match there is)."""
        return self.complete or len(self.rows) >= count
