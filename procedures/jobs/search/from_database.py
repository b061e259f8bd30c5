"""`jobs.search` answered by PostgreSQL alone: while this process's search index is being built, and as the
reference the index's answers are tested against. One statement: page, exact total and facets from one
snapshot; slow on large matching sets (it counts and groups every match), never wrong."""

from __future__ import annotations

from typing import Any

import msgspec

from procedures.jobs.search.facets import FacetCounts, counts_sql
from procedures.jobs.search.request import Search, SearchPage
from procedures.jobs.shapes import JobSummary
from rpc.api import Context, like_pattern

_SHOWN = "id::text AS id, title, company, location, status, created_at, published_at AS _published_at"
# The tier: 1 when the title alone answers the query, else 0.
_TIER = "(ts_filter(search_doc, '{a}') @@ job_search_query(%(q)s))::int"
_FILTERS = {
    "q": "search_doc @@ job_search_query(%(q)s)",
    "location": "job_fold(location) LIKE job_fold(%(location)s)",
    "company": "job_fold(company) LIKE job_fold(%(company)s)",
    "employment_type": "employment_type = ANY(%(employment_type)s)",
    "posted_after": "published_at > %(posted_after)s",
}
_SUMMARY_FIELDS = frozenset(JobSummary.__struct_fields__)


async def answer(ctx: Context, search: Search) -> SearchPage:
    values: dict[str, Any] = {
        "q": search.q,
        "location": like_pattern(search.location) if search.location is not None else None,
        "company": like_pattern(search.company) if search.company is not None else None,
        "employment_type": search.employment_type,
        "posted_after": search.posted_after,
        "limit": search.per_page + 1,
    }
    matches = " AND ".join(
        ["status = 'published'", *(clause for name, clause in _FILTERS.items() if values[name] is not None)]
    )
    tier = _TIER if search.ranked else "0"
    page_where = matches
    if search.after is not None:
        values.update(tier=search.after_tier, after_published=search.after.published_at, after_id=search.after.id)
        page_where += f" AND ({tier}, published_at, id) < (%(tier)s, %(after_published)s, %(after_id)s::uuid)"
    gathered = f"WITH matched AS MATERIALIZED (SELECT employment_type, location, company FROM jobs WHERE {matches})"
    statement = f"""
        {gathered if search.facets else ""}
        SELECT page.*,
            (SELECT count(*) FROM {"matched" if search.facets else f"jobs WHERE {matches}"}) AS _total
            {f", {counts_sql('matched')} AS _facets" if search.facets else ""}
        FROM (SELECT 1) AS one
        LEFT JOIN LATERAL (
            SELECT {_SHOWN}, {tier} AS _tier FROM jobs WHERE {page_where}
            ORDER BY _tier DESC, published_at DESC, id DESC LIMIT %(limit)s
        ) AS page ON true
    """
    # Not prepared: planned with the values, so job_search_query() is computed once, not once per row.
    result = await ctx.conn.execute(statement, values, prepare=False)
    rows = [row for row in await result.fetchall()]
    first = rows[0]
    found = [row for row in rows if row["id"] is not None]
    shown = found[: search.per_page]
    following = None
    if len(found) > search.per_page:
        last = shown[-1]
        following = search.following(last["_tier"], last["_published_at"], last["id"])
    facets = FacetCounts.of(first["_facets"]).shown() if search.facets else msgspec.UNSET
    return SearchPage(
        data=[JobSummary(**{key: value for key, value in row.items() if key in _SUMMARY_FIELDS}) for row in shown],
        total=int(first["_total"]),
        page=search.page,
        per_page=search.per_page,
        next_cursor=following,
        facets=facets,
    )
