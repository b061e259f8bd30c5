"""`jobs.list`'s filters answered from the search index: published jobs whose title or company holds `q`, whose
location and company hold theirs, of one employment type; newest created first, then by id; exact total."""

from __future__ import annotations

import tantivy

from procedures.jobs.search.filters import contains, either, every
from procedures.jobs.shapes import ListJobs
from rpc.search.view import View


def newest(
    view: View,
    *,
    q: str | None,
    location: str | None,
    company: str | None,
    employment_type: str | None,
    limit: int,
    offset: int,
) -> tuple[list[bytes], int]:
    """The shown form of the page's jobs, and how many match."""
    schema = view.schema
    conditions = []
    if q is not None:
        conditions.append(either([contains("title", q), contains("company", q)]))
    if location is not None:
        conditions.append(contains("location", location))
    if company is not None:
        conditions.append(contains("company", company))
    if employment_type is not None:
        conditions.append(tantivy.Query.term_query(schema, "employment_type", employment_type))
    query = every(conditions)
    found = view.top(query, "created_rank", limit, offset)
    return [bytes(hit.stored("shown")) for hit in found.hits], found.total  # type: ignore[call-overload]


def page(view: View, params: ListJobs) -> tuple[list[bytes], int]:
    """`newest` for the parameters of a `jobs.list` call: its filters, its page."""
    return newest(
        view,
        q=params.q,
        location=params.location,
        company=params.company,
        employment_type=params.employment_type,
        limit=params.per_page,
        offset=params.offset,
    )
