"""`jobs.search`: web-search syntax over the published jobs, ranked, filtered, counted exactly, paged by cursor.

Answered from this process's search index at the position the call read in its credential's statement
(`procedures.jobs.search.from_index`), so a search never asked before is as fast as a popular one and a read that
begins after a write's commit sees it; from PostgreSQL (`procedures.jobs.search.from_database`) only while the index
is being built.
"""

from __future__ import annotations

from procedures.jobs.search import from_database, from_index
from procedures.jobs.search.corpus import INDEX
from procedures.jobs.search.request import Search, SearchJobs, SearchPage
from procedures.published_cache import PROBE
from rpc.core.registry import procedure
from rpc.dispatch.context import Context
from rpc.search.index import SearchIndex


@procedure("jobs.search", scope="read:jobs", probes=(PROBE,))
async def search_jobs(ctx: Context, params: SearchJobs) -> SearchPage:
    """Search the published jobs: web-search syntax over title, company, location and description, ignoring
    case and accents, English plurals meeting singulars, the last word also a prefix; title matches first,
    then the newest, or newest first. `total` and `facets` are exact; follow `next_cursor` for the next page.
    """
    search = Search.of(params, ctx.settings.secret_key)
    position = await ctx.probe(PROBE)
    index: SearchIndex | None = ctx.indexes.get(INDEX)
    view = await index.view(ctx.conn, position) if index is not None and position is not None else None
    if view is None:
        return await from_database.answer(ctx, search)
    return from_index.answer(view, search)
