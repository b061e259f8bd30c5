"""`jobs.search`: web-search syntax over the published jobs, ranked, filtered, counted exactly, paged by cursor.

Answered from this process's search index at the position the call read in its credential's statement
(`procedures.jobs.search.from_index`), so a search never asked before is answered from the index as a popular one
is, and a read that begins after a write's commit sees it; from PostgreSQL (`procedures.jobs.search.from_database`)
only while the index is being built. A search asked again at the same position is given the answer remembered.
"""

from __future__ import annotations

from procedures.jobs.search import from_database, from_index
from procedures.jobs.search.corpus import INDEX
from procedures.jobs.search.request import Search, SearchJobs, SearchPage
from procedures.published_cache import PROBE
from rpc.api import Context, procedure
from rpc.core.memory import Slot
from rpc.search.answers import Answers
from rpc.search.index import SearchIndex

# The answers of this process's index at its current position (`rpc.search.answers`): a popular search asked again
# before anything changed is not computed again.
ANSWERS: Slot[Answers[SearchPage]] = Slot("jobs.search answers", Answers)


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
    asked = (search.fingerprint, search.per_page, search.after)
    return ctx.kept(ANSWERS).of(view.position, asked, lambda: from_index.answer(view, search))
