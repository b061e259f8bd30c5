"""Hiring > Jobs: the account's jobs in every status, newest first, each with how many applications stand in each
status of the pipeline; and a new job (`jobs.create`'s own code), saved as a draft. The list reads the jobs
`jobs.list` with `mine=true` reads — the account's own — a page at a time with a cursor (`keyset`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from procedures import keyset
from procedures.desk.pages import FormState, back_to, desk_page, render, sent_back
from procedures.jobs.shapes import CreateJob
from procedures.jobs.writes import create_job
from procedures.public_pages import calls
from rpc.panel.handler import Panel

PER_PAGE = 25
FIELDS = ("title", "company", "location", "employment_type", "description", "scorecard_attributes")

# How many of a job's applications stand in each status: an index-only count on (job_id, status).
_COUNTS = """coalesce((SELECT json_object_agg(c.status, c.n) FROM (
    SELECT a.status, count(*) AS n FROM applications AS a WHERE a.job_id = j.id GROUP BY a.status) AS c),
    json_build_object())"""
_JOBS = f"""
SELECT j.id::text AS id, j.title, j.company, j.location, j.status, j.created_at, j.published_at, j.closed_at,
       {_COUNTS} AS counts
FROM jobs AS j
WHERE j.account_id = %(account_id)s {{after}}
ORDER BY j.created_at DESC, j.id DESC
LIMIT %(limit)s
"""
# What a new job's form starts from: the company of the account's latest job, else the account's name.
_COMPANY = """
SELECT coalesce((SELECT company FROM jobs WHERE account_id = a.id ORDER BY created_at DESC, id DESC LIMIT 1), a.name)
       AS company
FROM accounts AS a WHERE a.id = %(account_id)s
"""


@desk_page
async def jobs_page(panel: Panel) -> Response:
    """`GET /panel/jobs[?cursor=]`."""
    settings = panel.services.settings
    place = keyset.opened(settings, "desk jobs", panel.request.query_params.get("cursor"))
    after, values = keyset.condition(place, "j")
    values |= {"account_id": panel.account_id, "limit": PER_PAGE + 1}
    rows = await (await panel.conn.execute(_JOBS.format(after=after), values)).fetchall()
    older = keyset.next_cursor(settings, "desk jobs", rows, PER_PAGE)
    return render(panel, "jobs.html", jobs=rows[:PER_PAGE], older=older, first=place is None)


@desk_page
async def new_job_page(panel: Panel) -> Response:
    """`GET /panel/jobs/new`: the form of a new job."""
    row = await (await panel.conn.execute(_COMPANY, {"account_id": panel.account_id})).fetchone()
    return _new(panel, FormState(values={"company": row["company"] if row else ""}))


@desk_page
async def create(panel: Panel) -> Response:
    """`POST /panel/jobs`: a draft made by `jobs.create`, then its page."""
    values = posted_job(panel)
    try:
        job = await calls.run(panel, create_job, calls.params(CreateJob, job_params(values)), once=True)
    except calls.Refused as refused:
        return _new(panel, sent_back(values, refused), refused.status)
    return back_to(f"/panel/jobs/{job.id}", "job_created")


def _new(panel: Panel, form: FormState, status: int = 200) -> Response:
    return render(panel, "job_new.html", status, form=form)


def posted_job(panel: Panel) -> dict[str, str]:
    """The job form's fields as typed."""
    return {name: panel.field(name) for name in FIELDS}


def job_params(values: Mapping[str, str]) -> dict[str, Any]:
    """The job form's fields as `jobs.create` and `jobs.update` take them: an empty description or employment
    type is none, and the scorecard's attributes are the form's non-blank lines."""
    return {
        "title": values["title"],
        "company": values["company"],
        "location": values["location"],
        "employment_type": values["employment_type"] or None,
        "description": values["description"].replace("\r\n", "\n") or None,
        "scorecard_attributes": attribute_lines(values["scorecard_attributes"]),
    }


def attribute_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]
