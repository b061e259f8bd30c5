"""`jobs.search` answered from the search index, at the position the call read: page, exact total and facets from
one view (`rpc.search.view`), in a few milliseconds whatever was asked before."""

from __future__ import annotations

import datetime as dt

import msgspec
import tantivy

from procedures.jobs.search.corpus import micros, rank
from procedures.jobs.search.facets import NAMES, FacetCounts, Facets
from procedures.jobs.search.filters import contains, either, every
from procedures.jobs.search.request import Search, SearchPage
from procedures.jobs.search.syntax import to_query
from procedures.jobs.shapes import JobSummary
from rpc.search.view import Hit, View

_FIRST_FETCH = 8  # rows beyond those asked, for the few that share the cursor's rank
_shown = msgspec.json.Decoder(JobSummary)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def answer(view: View, search: Search) -> SearchPage:
    schema = view.schema
    matches = matching(search, schema)
    rows: list[tuple[int, Hit]] = []
    wanted = search.per_page + 1  # one more than shown tells whether another page follows
    # A first page walks every tier once, each pass counting its tier as well: the total costs no pass of its
    # own. A later page ranges from its cursor, and counts the matches in a pass of their own.
    after_tier = search.after_tier  # None on a first page
    total = 0 if after_tier is None else view.count(matches)
    for tier, query in _tiers(search, schema, matches):
        if after_tier is None:
            found = view.top(query, "published_rank", wanted - len(rows))
            total += found.total
            rows += [(tier, hit) for hit in found.hits]
        elif tier <= after_tier and len(rows) < wanted:
            rows += [(tier, hit) for hit in _after(view, search, tier, query, wanted - len(rows))]
    shown = rows[: search.per_page]
    following = None
    if len(rows) > search.per_page:
        tier, last = shown[-1]
        following = search.following(tier, _published(last.rank), last.id_in("id"))
    facets: Facets | msgspec.UnsetType = msgspec.UNSET
    if search.facets:
        facets = FacetCounts(view.terms(matches, NAMES)).shown()
    return SearchPage(
        data=[_shown.decode(hit.stored("shown")) for _, hit in shown],  # type: ignore[arg-type]
        total=total,
        page=search.page,
        per_page=search.per_page,
        next_cursor=following,
        facets=facets,
    )


def matching(search: Search, schema: tantivy.Schema, filters: list[tantivy.Query] | None = None) -> tantivy.Query:
    """Every job `search` finds, whatever its order and page: its words over all the text, and its filters. The
    one definition of a match, also asked of each published job by the job alerts (`procedures.alerts`), which
    hand in the `filtering` of searches whose filters they share."""
    words = _words(search, schema, "text")
    return every([*(filtering(search, schema) if filters is None else filters), words])


def _tiers(search: Search, schema: tantivy.Schema, matches: tantivy.Query) -> list[tuple[int, tantivy.Query]]:
    """The matches in the order pages walk them: title matches first when ranked."""
    if not search.ranked:
        return [(0, matches)]
    title = _words(search, schema, "title")
    return [
        (1, every([matches, title])),
        (0, tantivy.Query.boolean_query([(tantivy.Occur.Must, matches), (tantivy.Occur.MustNot, title)])),
    ]


def _after(view: View, search: Search, tier: int, query: tantivy.Query, wanted: int) -> list[Hit]:
    """Up to `wanted` rows of one tier, newest first, after the cursor when it stopped in this tier."""
    after = search.after
    assert after is not None
    if tier != search.after_tier:
        return view.top(query, "published_rank", wanted).hits
    # From the cursor's rank down (a number the index can range over); those of that very rank at or before the
    # cursor's row, by id, are left out here (a rank holds the time and 12 bits of the id: a handful at most).
    start = rank(after.published_at, after.id)
    ranged = every(
        [query, tantivy.Query.range_query(view.schema, "published_rank", tantivy.FieldType.Unsigned, 0, start)]
    )
    fetch = wanted + _FIRST_FETCH
    while True:
        hits = view.top(ranged, "published_rank", fetch).hits
        kept = [hit for hit in hits if hit.rank < start or hit.id_in("id") < after.id]
        if len(kept) >= wanted or len(hits) < fetch:
            return kept[:wanted]
        fetch *= 4


def _words(search: Search, schema: tantivy.Schema, field: str) -> tantivy.Query:
    if search.typed is None:
        return tantivy.Query.all_query()
    return to_query(search.typed, schema, field)


def filtering(search: Search, schema: tantivy.Schema) -> list[tantivy.Query]:
    """The conditions of `search` besides its words."""
    filters = []
    for name, text in (("location", search.location), ("company", search.company)):
        if text is not None:
            filters.append(contains(name, text))
    if search.employment_type:
        # A job has one type: any of the terms (a term set query builds an automaton on every search, ~50x slower).
        types = [tantivy.Query.term_query(schema, "employment_type", kind) for kind in search.employment_type]
        filters.append(types[0] if len(types) == 1 else either(types))
    if search.posted_after is not None:
        after = micros(search.posted_after)
        filters.append(
            tantivy.Query.range_query(schema, "published", tantivy.FieldType.Integer, after, 2**63 - 1, False, True)
        )
    return filters


def _published(rank: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(microseconds=rank >> 12)
