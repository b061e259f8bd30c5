"""`jobs.search`: web-search syntax over the published jobs, ranked, filtered, counted exactly, paged by cursor.

The text matched is `jobs.search_doc`, folded and stemmed by schema.sql's `job_document` as the job is written;
the typed query goes through the same folding (`job_search_query`), so both sides meet on the same lexemes.
A page is one statement (page, exact total and facets from one snapshot), remembered per version of the
published set (`procedures.published_cache`): a popular search costs no statement beyond the credential's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

from procedures.common import Moment, PlainText, like_pattern, moment
from procedures.jobs import EmploymentType, JobSummary
from procedures.published_cache import PROBE, PublishedCache
from procedures.search import cursor
from rpc.core.context import Context
from rpc.core.envelope import Params, Struct
from rpc.core.registry import procedure

Sort = Literal["relevance", "newest"]
# Text, read here: a query string's lax conversion would take a bare number for a Unix time.
Types = EmploymentType | Annotated[list[EmploymentType], msgspec.Meta(min_length=1, max_length=5)]
FACET_SIZE = 10


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
    facets: bool = False


class FacetValue(Struct, frozen=True, kw_only=True):
    value: str
    count: int


class Facets(Struct, frozen=True, kw_only=True):
    """Exact counts over the whole matching set, largest first."""

    employment_type: list[FacetValue]
    location: list[FacetValue]
    company: list[FacetValue]


class SearchPage(Struct, frozen=True, kw_only=True):
    """One page of a search: `page` counts the pages walked; `next_cursor` is null on the last one."""

    data: list[JobSummary]
    total: int
    page: int
    per_page: int
    next_cursor: str | None
    facets: Facets | msgspec.UnsetType = msgspec.UNSET


_COLUMNS = "id::text AS id, title, company, location, status, created_at, published_at AS _published_at"
# Title matches first (CONTRACT.md §15): 1 when the title alone answers the query, plus ts_rank normalised
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


def _facet(column: str, limit: str = "") -> str:
    """`[{value, count}]` of the matching jobs per `column`'s stored text, largest first (ties by value)."""
    return f"""(SELECT coalesce(json_agg(f ORDER BY count DESC, value), '[]') FROM (
        SELECT {column} AS value, count(*) AS count FROM matched WHERE {column} IS NOT NULL
        GROUP BY 1 ORDER BY 2 DESC, 1 {limit}) AS f)"""


_FACETS = (
    f"json_build_object('employment_type', {_facet('employment_type')},"
    f" 'location', {_facet('location', f'LIMIT {FACET_SIZE}')}, 'company', {_facet('company', f'LIMIT {FACET_SIZE}')})"
)


# Pages per version of the published set: the popular searches cost no statement of their own.
_pages: PublishedCache[SearchPage] = PublishedCache(size=1024)


@dataclass(frozen=True, slots=True)
class _Search:
    """A call's parameters resolved: what matches, in which order, and where the page starts."""

    query: dict[str, Any]  # every parameter that decides the matches and their order, as the cursor binds them
    fingerprint: str
    words: bool  # q holds something to search for
    ranked: bool
    after: cursor.Position | None
    per_page: int


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
    return await _pages.answer(ctx, (bound, params.per_page, params.cursor), lambda: _page(ctx, search))


async def _page(ctx: Context, search: _Search) -> SearchPage:
    """One statement: the page (one row more than asked, to know whether another follows), the exact total and,
    when asked, the facets, all from one snapshot."""
    values: dict[str, Any] = {**search.query, "limit": search.per_page + 1}
    for name in ("location", "company"):
        if values[name] is not None:
            values[name] = like_pattern(values[name])
    where = ["status = 'published'"]
    where += [clause for name, clause in _FILTERS.items() if values[name] is not None and (name != "q" or search.words)]
    matches = " AND ".join(where)
    score = _SCORE if search.ranked else "0::float8"
    page_where = matches
    after = search.after
    if after is not None:
        values.update(score=after.score or 0.0, after_published=after.published_at, after_id=after.id)
        page_where += f" AND ({score}, published_at, id) < (%(score)s, %(after_published)s, %(after_id)s::uuid)"
    facets = f", {_FACETS} AS _facets" if search.query["facets"] else ""
    # The facets group the matches three ways: then they are gathered once. A bare count need not gather them.
    gathered = f"WITH matched AS MATERIALIZED (SELECT employment_type, location, company FROM jobs WHERE {matches})"
    statement = f"""
        {gathered if facets else ""}
        SELECT page.*, (SELECT count(*) FROM {"matched" if facets else f"jobs WHERE {matches}"}) AS _total{facets}
        FROM (SELECT 1) AS one
        LEFT JOIN LATERAL (
            SELECT {_COLUMNS}, {score} AS _score FROM jobs WHERE {page_where}
            ORDER BY _score DESC, published_at DESC, id DESC LIMIT %(limit)s
        ) AS page ON true
    """
    # Not prepared: planned with the values, so job_search_query() is computed once, not once per row.
    result = await ctx.conn.execute(statement, values, prepare=False)
    rows = await result.fetchall()
    total = int(rows[0]["_total"])
    found = msgspec.convert(rows[0]["_facets"], Facets) if facets else msgspec.UNSET
    rows = [row for row in rows if row["id"] is not None]
    page = after.page if after else 1
    following = None
    if len(rows) > search.per_page:
        rows = rows[: search.per_page]
        last = rows[-1]
        rank = last["_score"] if search.ranked else None
        position = cursor.Position(search.fingerprint, page + 1, last["_published_at"], last["id"], rank)
        following = cursor.encode(position)
    data = [JobSummary(**{key: value for key, value in row.items() if not key.startswith("_")}) for row in rows]
    return SearchPage(data=data, total=total, page=page, per_page=search.per_page, next_cursor=following, facets=found)
