"""Facets of a search: exact counts per `employment_type`, and the 10 largest `location` and `company` values.

A remembered answer keeps every value's count (up to `KEPT_VALUES` per facet), so that a job entering or
leaving the matches moves one count and the 10 largest are chosen again from exact numbers. Ties are ordered by
the values' code points, in SQL (`COLLATE "C"`) as in Python, so a followed answer equals a computed one.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rpc.core.envelope import Struct

FACET_SIZE = 10
KEPT_VALUES = 1000  # per facet; a matching set with more distinct values is computed again when it changes
NAMES = ("employment_type", "location", "company")


class FacetValue(Struct, frozen=True, kw_only=True):
    value: str
    count: int


class Facets(Struct, frozen=True, kw_only=True):
    """Exact counts over the whole matching set, largest first."""

    employment_type: list[FacetValue]
    location: list[FacetValue]
    company: list[FacetValue]


def counts_sql(matched: str) -> str:
    """A JSON object of `[[value, count], ...]` per facet over the relation `matched`, largest first, at most
    `KEPT_VALUES + 1` each (one more than kept tells that there were too many to keep)."""
    parts = ", ".join(
        f"""'{name}', (SELECT coalesce(json_agg(json_build_array(value, count)), '[]') FROM (
            SELECT {name} AS value, count(*) AS count FROM {matched} WHERE {name} IS NOT NULL
            GROUP BY {name} ORDER BY count(*) DESC, {name} COLLATE "C" LIMIT {KEPT_VALUES + 1}) AS f)"""
        for name in NAMES
    )
    return f"json_build_object({parts})"


@dataclass(frozen=True, slots=True)
class FacetCounts:
    """Every value's count per facet; `kept` is false when a facet had more values than are kept, and the
    counts can only be shown, not followed."""

    counts: Mapping[str, Mapping[str, int]]
    kept: bool

    @classmethod
    def of(cls, loaded: Mapping[str, list[list[Any]]]) -> FacetCounts:
        kept = all(len(loaded[name]) <= KEPT_VALUES for name in NAMES)
        return cls({name: {str(value): int(count) for value, count in loaded[name]} for name in NAMES}, kept)

    def moved(self, job: Mapping[str, Any], by: int) -> FacetCounts:
        """The counts after `job` (its facet values) entered (`by` 1) or left (-1) the matching set."""
        counts = {name: dict(values) for name, values in self.counts.items()}
        for name in NAMES:
            value = job[name]
            if value is None:
                continue
            count = counts[name].get(value, 0) + by
            if count > 0:
                counts[name][value] = count
            else:
                counts[name].pop(value, None)
        return FacetCounts(counts, self.kept)

    def shown(self) -> Facets:
        return Facets(
            employment_type=_largest(self.counts["employment_type"], None),
            location=_largest(self.counts["location"], FACET_SIZE),
            company=_largest(self.counts["company"], FACET_SIZE),
        )


def _largest(counts: Mapping[str, int], size: int | None) -> list[FacetValue]:
    """The `size` largest counts (all when None), ties by value's code points."""

    def rank(item: tuple[str, int]) -> tuple[int, str]:
        return -item[1], item[0]

    ranked = sorted(counts.items(), key=rank) if size is None else heapq.nsmallest(size, counts.items(), key=rank)
    return [FacetValue(value=value, count=count) for value, count in ranked]
