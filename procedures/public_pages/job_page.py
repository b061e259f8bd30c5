"""`GET /jobs/{id}`: a published job's page, the same for everyone (so a CDN may keep it a minute), with its
`JobPosting` in the head; and `GET /jobs?q=`: the open jobs found by `jobs.search`'s own code."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from procedures.jobs.search.jobs import search_jobs
from procedures.jobs.search.request import SearchJobs, SearchPage
from procedures.public_pages.jobposting import LABELS, description_html, job_posting, script_json
from procedures.public_pages.settings import PublicSettings
from procedures.public_pages.site import find_job, job_gone, public, render, visitor_context
from procedures.published_cache import PROBE, PROBE_SQL
from rpc.api import Connection, Principal, RpcError
from rpc.services import services

# jobs.search reads nothing of its caller: the public search page calls it as this visitor.
VISITOR = Principal(user_id="", account_id="", role="candidate", plan="free", credential="session")
SHOWN = 20


async def job_page(request: Request, settings: PublicSettings) -> Response:
    """The page of a published job; `410` closed, `404` draft, unknown or malformed."""
    job_id = request.path_params["id"]
    job = await services(request).reads.current(lambda conn: find_job(conn, job_id))
    if gone := job_gone(job):
        return public(gone)
    assert job is not None
    url = settings.job_url(job.id)
    posting = job_posting(job, url, settings.valid_days)
    page = render(
        "job.html",
        job=job,
        url=url,
        labels=LABELS,
        posting_json=script_json(posting),
        description_html=description_html(job.description),
    )
    return public(page)


async def search_page(request: Request) -> Response:
    """`GET /jobs?q=...&cursor=...`: the newest open jobs, or those matching `q`."""
    q = request.query_params.get("q", "").strip()
    cursor = request.query_params.get("cursor") or None
    try:
        params = msgspec.convert({"q": q or None, "cursor": cursor, "per_page": SHOWN}, SearchJobs)
    except msgspec.ValidationError:
        return render(
            "search.html", 400, q=q, found=None, error="Use at most 200 characters, without control characters."
        )
    state = services(request)

    async def search(conn: Connection) -> SearchPage:
        ctx = visitor_context(request, conn, state, VISITOR, "jobs.search", probes={PROBE: PROBE_SQL})
        return await search_jobs(ctx, params)

    try:
        found = await state.reads.current(search)
    except RpcError as exc:
        return render("search.html", exc.status, q=q, found=None, error=exc.message)
    return public(render("search.html", q=q, found=found, error=None))
