"""The `jobs.changes` scenario of `bin/bench`: an integration following the feed, one request at a time.

A full pass walks the whole feed from no cursor to `has_more: false` (1,000 jobs a page); an incremental
pass then asks from that cursor after `RECENT` jobs were changed. The feed is sequential by nature (each
page's cursor is the next request's), so what counts is the time per page and per pass, not requests/s
under load. Requests rotate among the seeded accounts' API keys: the rate limits stay on and each key is
checked, as for every other scenario.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx
import psycopg

PER_PAGE = 1_000
RECENT = 100
INCREMENTAL_PASSES = 5
# The feed trails the oldest transaction running on the server (docs/sync.md): how long to wait for it.
PATIENCE_SECONDS = 60.0
# Writes through SQL, as any write path does: the stamp_change trigger marks them for the feed.
_TOUCH = """
UPDATE jobs SET title = title || '.', updated_at = now()
WHERE id IN (SELECT id FROM jobs WHERE status = 'published' ORDER BY random() LIMIT %(count)s)
"""


class SyncError(RuntimeError):
    """The feed answered something other than a page."""


@dataclass(frozen=True, slots=True)
class Pass:
    """One walk of the feed until `has_more` was false."""

    jobs: int
    pages: int
    seconds: float
    page_ms: list[float]
    cursor: str


def walk(client: httpx.Client, rotation: Iterator[str], cursor: str | None) -> Pass:
    """Follow the feed from `cursor` to its end, timing each page; each request takes the next key."""
    jobs, page_ms = 0, []
    started = time.perf_counter()
    while True:
        params: dict[str, object] = {"per_page": PER_PAGE} | ({"cursor": cursor} if cursor else {})
        began = time.perf_counter()
        response = client.post("/v1/jobs.changes", json=params, headers={"Authorization": f"Bearer {next(rotation)}"})
        page_ms.append(1000 * (time.perf_counter() - began))
        if response.status_code != 200:
            raise SyncError(f"jobs.changes answered {response.status_code}: {response.text[:300]}")
        result = response.json()["result"]
        jobs += len(result["data"])
        cursor = result["next_cursor"]
        if not result["has_more"]:
            return Pass(jobs, len(page_ms), time.perf_counter() - started, page_ms, cursor)


@dataclass(frozen=True, slots=True)
class Figures:
    """One size's passes: the full one, and the incremental ones after recent changes."""

    full: Pass
    incremental: list[Pass]  # the pass that delivered the last of the recent changes
    delivery_s: list[float]  # from the changes' commit to that pass's end

    @property
    def jobs_per_s(self) -> float:
        return round(self.full.jobs / self.full.seconds, 1)

    def page_ms(self) -> dict[str, float]:
        return _spread(self.full.page_ms)

    def details(self) -> dict[str, object]:
        return {
            "full_pass_seconds": round(self.full.seconds, 2),
            "full_pass_jobs": self.full.jobs,
            "full_pass_pages": self.full.pages,
            "full_pass_page_ms": self.page_ms(),
            "recent_changes": RECENT,
            "incremental_last_pass_jobs": [step.jobs for step in self.incremental],
            "incremental_ms": _spread([1000 * step.seconds for step in self.incremental]),
            "commit_to_delivery_ms": _spread([1000 * seconds for seconds in self.delivery_s]),
        }


def measure(base_url: str, database_url: str, keys: Sequence[str]) -> Figures:
    """A full pass, then incremental passes each after `RECENT` fresh changes: the figures of one size."""
    with httpx.Client(base_url=base_url, timeout=120) as client, psycopg.connect(database_url) as conn:
        rotation = itertools.cycle(keys)
        full = walk(client, rotation, None)
        cursor, incremental, delivery = full.cursor, [], []
        for _ in range(INCREMENTAL_PASSES):
            conn.execute(_TOUCH, {"count": RECENT})
            conn.commit()
            committed, delivered = time.perf_counter(), 0
            while delivered < RECENT:  # the feed delivers them once older transactions have ended
                if time.perf_counter() - committed > PATIENCE_SECONDS:
                    raise SyncError(f"{RECENT - delivered} changes not delivered after {PATIENCE_SECONDS:.0f} s")
                step = walk(client, rotation, cursor)
                cursor, delivered = step.cursor, delivered + step.jobs
            incremental.append(step)
            delivery.append(time.perf_counter() - committed)
    return Figures(full, incremental, delivery)


def _spread(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 1),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
        "max": round(ordered[-1], 1),
    }
