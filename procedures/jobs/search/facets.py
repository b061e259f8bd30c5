"""Facets of a search: exact counts per `employment_type`, and the 10 largest `location` and `company` values,
ties ordered by the values' code points — in SQL (`COLLATE "C"`) as in Python, so the index's answer and
PostgreSQL's are the same."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rpc.api import Struct

FACET_SIZE = 10
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
    """A JSON object of `[[value, count], ...]` per facet over the relation `matched`: every type, and the
    `FACET_SIZE` largest locations and companies."""
    parts = ", ".join(
        f"""'{name}', (SELECT coalesce(json_agg(json_build_array(value, count)), '[]') FROM (
            SELECT {name} AS value, count(*) AS count FROM {matched} WHERE {name} IS NOT NULL
            GROUP BY {name} ORDER BY count(*) DESC, {name} COLLATE "C"
            {"" if name == "employment_type" else f"LIMIT {FACET_SIZE}"}) AS f)"""
        for name in NAMES
    )
    return f"json_build_object({parts})"


@dataclass(frozen=True, slots=True)
class FacetCounts:
    """Values and their counts per facet."""

    counts: Mapping[str, Mapping[str, int]]

    @classmethod
    def of(cls, loaded: Mapping[str, list[list[Any]]]) -> FacetCounts:
        return cls({name: {str(value): int(count) for value, count in loaded[name]} for name in NAMES})

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
