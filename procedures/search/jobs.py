"""`jobs.search`: web-search syntax over the published jobs, ranked, filtered, counted exactly, paged by cursor.

The text matched is `jobs.search_doc`, folded and stemmed by schema.sql's `job_document` as the job is written;
the typed query goes through the same folding (`job_search_query`), so both sides meet on the same lexemes.
A page is one statement (page, exact total and facets from one snapshot), remembered per version of the
published set (`procedures.published_cache`): a popular search costs no statement beyond the credential's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from procedures.common import Moment, PlainText, like_pattern, moment
from procedures.jobs import EmploymentType, JobSummary
from procedures.published_cache import PROBE, VERSION_SQL, PublishedCache, changes_since
from procedures.search import cursor
from procedures.search.facets import FacetCounts, Facets, counts_sql
from procedures.window import SLACK, Key, Ranked, Window
from rpc.core.context import Context
from rpc.core.envelope import Params, Struct
from rpc.core.registry import procedure

Sort = Literal["relevance", "newest"]
# Text, read here: a query string's lax conversion would take a bare number for a Unix time.
Types = EmploymentType | Annotated[list[EmploymentType], msgspec.Meta(min_length=1, max_length=5)]


class SearchJobs(Params, frozen=True, kw_only=True):
    q: (
        Annotated[
            PlainText,
            msgspec.Meta(description='Web-search syntax: words (all required), "phrases", -exclusions, `or`.'),
        ]
        | None
    ) = None
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


# What a page shows of a job, from `jobs` or from the log of changes (`status` is a column of the former).
_SHOWN = (
    "id::text AS id, title, company, location, {status} AS status, created_at,"
    " published_at AS _published_at, employment_type"
)
_LOGGED_STATUS = "'published'"  # the log keeps only states that were published
# Title matches first (docs/search.md): 1 when the title alone answers the query, plus ts_rank normalised
# into [0, 1) (flag 32), so no description can outrank a title. float8 so the cursor carries it exactly.
_SCORE = (
    "((ts_filter(search_doc, '{a}') @@ job_search_query(%(q)s))::int"
    " + ts_rank(search_doc, job_search_query(%(q)s), 32))::float8"
)
_FILTERS = {
    "q": "search_doc @@ job_search_query(%(q)s)",
    "location": "job_fold(location) LIKE job_fold(%(location)s)",
    "company": "job_fold(company) LIKE job_fold(%(company)s)",
    "employment_type": "employment_type = ANY(%(employment_type)s)",
    "posted_after": "published_at > %(posted_after)s",
}

# Answers per version of the published set, following its changes: the popular searches cost no statement
# of their own, and a publish moves them by one job instead of recounting them.
_answers: PublishedCache[_Kept] = PublishedCache(size=1024)


@dataclass(frozen=True, slots=True)
class _Search:
    """A call's parameters resolved: what matches, in which order, and where the page starts."""

    query: dict[str, Any]  # every parameter that decides the matches and their order, as the cursor binds them
    fingerprint: str
    words: bool  # q holds something to search for
    ranked: bool
    after: cursor.Position | None
    per_page: int

    @property
    def values(self) -> dict[str, Any]:
        values = dict(self.query)
        for name in ("location", "company"):
            if values[name] is not None:
                values[name] = like_pattern(values[name])
        return values

    @property
    def matches(self) -> str:
        """The conditions a published job meets to match, over columns that the change log keeps too."""
        clauses = [
            clause for name, clause in _FILTERS.items() if self.query[name] is not None and (name != "q" or self.words)
        ]
        return " AND ".join(clauses) or "true"

    @property
    def score(self) -> str:
        return _SCORE if self.ranked else "0::float8"

    @property
    def start(self) -> Key | None:
        after = self.after
        if after is None:
            return None
        return (after.score or 0.0, after.published_at, str(uuid.UUID(after.id)))

    def ranked_row(self, row: dict[str, Any]) -> Ranked:
        job = JobSummary(**{key: value for key, value in row.items() if key in _SUMMARY_FIELDS})
        return Ranked(key=(row["_score"], row["_published_at"], row["id"]), item=job)


@dataclass(frozen=True, slots=True)
class _Kept:
    """A search's answer as remembered: the page, and what it follows changes with."""

    version: int
    window: Window
    facets: FacetCounts | None
    page: SearchPage


_SUMMARY_FIELDS = frozenset(JobSummary.__struct_fields__)


@procedure("jobs.search", scope="read:jobs", probes=(PROBE,))
async def search_jobs(ctx: Context, params: SearchJobs) -> SearchPage:
    """Search the published jobs: web-search syntax over title, company, location and description, ignoring
    case and accents, English plurals meeting singulars, the last word also a prefix; ranked with title matches
    first, or newest first. `total` and `facets` are exact; follow `next_cursor` for the next page.
    """
    words = params.q is not None and any(char.isalnum() for char in params.q)
    types = [params.employment_type] if isinstance(params.employment_type, str) else params.employment_type
    query = {
        "q": params.q,
        "location": params.location,
        "company": params.company,
        "employment_type": sorted(set(types)) if types else None,
        "posted_after": moment("posted_after", params.posted_after),
        "sort": params.sort,
        "facets": params.facets,
    }
    bound = cursor.fingerprint(query)
    after = cursor.decode(params.cursor, bound) if params.cursor is not None else None
    ranked = words and (params.sort or "relevance") == "relevance"
    search = _Search(query, bound, words, ranked, after, params.per_page)
    kept = await _answers.answer(
        ctx,
        (bound, params.per_page, params.cursor),
        lambda: _computed(ctx, search),
        lambda old: _followed(ctx, search, old),
    )
    return kept.page


async def _computed(ctx: Context, search: _Search) -> _Kept:
    """One statement: the version it sees, the first rows after the cursor (one more than the page shows, to
    know whether another follows, and `SLACK` more to follow changes with), the exact total and, when asked,
    every facet value's count, all from one snapshot."""
    values: dict[str, Any] = {**search.values, "limit": search.per_page + 1 + SLACK}
    matches = f"status = 'published' AND {search.matches}"
    page_where = matches
    start = search.start
    if start is not None:
        values.update(score=start[0], after_published=start[1], after_id=start[2])
        page_where += f" AND ({search.score}, published_at, id) < (%(score)s, %(after_published)s, %(after_id)s::uuid)"
    facets = search.query["facets"]
    # The facets group the matches three ways: then they are gathered once. A bare count need not gather them.
    gathered = f"WITH matched AS MATERIALIZED (SELECT employment_type, location, company FROM jobs WHERE {matches})"
    statement = f"""
        {gathered if facets else ""}
        SELECT page.*, {VERSION_SQL},
            (SELECT count(*) FROM {"matched" if facets else f"jobs WHERE {matches}"}) AS _total
            {f", {counts_sql('matched')} AS _facets" if facets else ""}
        FROM (SELECT 1) AS one
        LEFT JOIN LATERAL (
            SELECT {_SHOWN.format(status="status")}, {search.score} AS _score FROM jobs WHERE {page_where}
            ORDER BY _score DESC, published_at DESC, id DESC LIMIT %(limit)s
        ) AS page ON true
    """
    # Not prepared: planned with the values, so job_search_query() is computed once, not once per row.
    result = await ctx.conn.execute(statement, values, prepare=False)
    rows = await result.fetchall()
    first = rows[0]
    found = [search.ranked_row(row) for row in rows if row["id"] is not None]
    window = Window.of(found, values["limit"], int(first["_total"]), start)
    counts = FacetCounts.of(first["_facets"]) if facets else None
    return _kept(search, int(first["_version"] or 0), window, counts)


async def _followed(ctx: Context, search: _Search, old: _Kept) -> _Kept | None:
    """`old` moved by the changes to the published set since its version that match this search; None when it
    cannot follow them (too many of its rows left, or too many facet values to keep)."""
    columns = f"{_SHOWN.format(status=_LOGGED_STATUS)}, {search.score} AS _score"
    changes = await changes_since(ctx, old.version, columns, search.matches, search.values)
    if changes is None:
        return None
    if not changes.rows:
        return replace(old, version=changes.version)
    counts = old.facets
    if counts is not None:
        if not counts.kept:
            return None
        for change in changes.rows:
            counts = counts.moved(change, 1 if change["_entered"] else -1)
    window = old.window.followed([(row["_entered"], search.ranked_row(row)) for row in changes.rows])
    if not window.holds(search.per_page + 1):
        return None
    return _kept(search, changes.version, window, counts)


def _kept(search: _Search, version: int, window: Window, counts: FacetCounts | None) -> _Kept:
    """The page a window shows: its first `per_page` rows, and a cursor after the last when more follow."""
    rows = window.rows[: search.per_page]
    page = search.after.page if search.after else 1
    following = None
    if len(window.rows) > search.per_page:
        score, published_at, last_id = rows[-1].key
        rank = score if search.ranked else None
        following = cursor.encode(cursor.Position(search.fingerprint, page + 1, published_at, last_id, rank))
    shown = SearchPage(
        data=[row.item for row in rows],
        total=window.total,
        page=page,
        per_page=search.per_page,
        next_cursor=following,
        facets=counts.shown() if counts is not None else msgspec.UNSET,
    )
    return _Kept(version=version, window=window, facets=counts, page=shown)
