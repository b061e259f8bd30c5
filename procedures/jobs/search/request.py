"""A `jobs.search` call's parameters, resolved once: what matches, in which order, where the page starts — the
same for the answer from the index and the one from PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from procedures.jobs.search import cursor
from procedures.jobs.search.facets import Facets
from procedures.jobs.search.syntax import Typed, parse
from procedures.jobs.shapes import EmploymentType, JobSummary
from rpc.api import Moment, Params, PlainText, Struct, moment
from rpc.core.cursor import CursorCodec

Sort = Literal["relevance", "newest"]
# Text, read here: a query string's lax conversion would take a bare number for a Unix time.
Types = EmploymentType | Annotated[list[EmploymentType], msgspec.Meta(min_length=1, max_length=5)]


Query = Annotated[
    PlainText, msgspec.Meta(description='Web-search syntax: words (all required), "phrases", -exclusions, `or`.')
]


class SearchJobs(Params, frozen=True, kw_only=True):
    q: Query | None = None
    location: PlainText | None = None
    company: PlainText | None = None
    employment_type: Types | None = None
    posted_after: Moment | None = None
    sort: Sort | None = None
    per_page: Annotated[int, msgspec.Meta(ge=1, le=100, description="Items per page, 1..100.")] = 20
    cursor: Annotated[str, msgspec.Meta(max_length=1000, description="The previous page's next_cursor.")] | None = None
    # None when left out, so that a cursor asked with `facets=false` and followed without it is refused, as
    # every parameter left out is (docs/search.md).
    facets: bool | None = None

    example: ClassVar[Mapping[str, Any]] = {
        "q": 'python -java "remote friendly"',
        "location": "Berlin",
        "employment_type": "full_time",
        "sort": "relevance",
        "per_page": 20,
        "facets": True,
    }


class SearchPage(Struct, frozen=True, kw_only=True):
    """One page of a search: `page` counts the pages walked; `next_cursor` is null on the last one."""

    data: list[JobSummary]
    total: int
    page: int
    per_page: int
    next_cursor: str | None
    facets: Facets | msgspec.UnsetType = msgspec.UNSET


@dataclass(frozen=True, slots=True)
class Search:
    """A call resolved. Relevance has two tiers — the title alone answers the query (1), or not (0) — and within
    a tier the newest first, then the id; `sort=newest` is one tier."""

    q: str | None
    typed: Typed | None  # None: q holds nothing to search for (absent, or no letter or digit)
    location: str | None
    company: str | None
    employment_type: list[str] | None
    posted_after: dt.datetime | None
    ranked: bool
    facets: bool
    fingerprint: str
    after: cursor.Position | None
    per_page: int
    codec: CursorCodec  # this server's cursors of `jobs.search`

    @classmethod
    def of(cls, params: SearchJobs, secret_key: str) -> Search:
        words = params.q is not None and any(char.isalnum() for char in params.q)
        types = [params.employment_type] if isinstance(params.employment_type, str) else params.employment_type
        bound: dict[str, Any] = {
            "q": params.q,
            "location": params.location,
            "company": params.company,
            "employment_type": sorted(set(types)) if types else None,
            "posted_after": moment("posted_after", params.posted_after),
            "sort": params.sort,
            "facets": params.facets,
        }
        fingerprint = cursor.fingerprint(bound)
        codec = cursor.codec(secret_key)
        return cls(
            q=params.q if words else None,
            typed=parse(params.q) if words and params.q is not None else None,
            location=params.location,
            company=params.company,
            employment_type=bound["employment_type"],
            posted_after=bound["posted_after"],
            ranked=words and (params.sort or "relevance") == "relevance",
            facets=bool(params.facets),
            fingerprint=fingerprint,
            after=cursor.decode(codec, params.cursor, fingerprint) if params.cursor is not None else None,
            per_page=params.per_page,
            codec=codec,
        )

    @property
    def page(self) -> int:
        return self.after.page if self.after else 1

    @property
    def after_tier(self) -> int | None:
        if self.after is None:
            return None
        return int(self.after.score or 0) if self.ranked else 0

    def following(self, tier: int, published_at: dt.datetime, job_id: str) -> str:
        """The cursor of the page after one whose last row is this."""
        score = float(tier) if self.ranked else None
        return cursor.encode(self.codec, cursor.Position(self.fingerprint, self.page + 1, published_at, job_id, score))
