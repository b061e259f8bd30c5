"""A job's page on the desk: its facts and the form that edits them (`jobs.update`), publishing (`jobs.publish`)
and closing it after a confirmation (`jobs.close`), and its applicants — name, e-mail, status, date applied and a
link to the résumé — newest first, filtered by status, a page at a time with a cursor. A job of another account
is the panel's 404, as an application of one is."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from procedures import keyset
from procedures.desk.jobs import FIELDS, job_params, posted_job
from procedures.desk.pages import APPLICATION_STATUSES, FormState, back_to, desk_page, render, said, sent_back
from procedures.jobs.reads import get_job, owned
from procedures.jobs.shapes import Job, UpdateJob
from procedures.jobs.writes import close_job, publish_job, update_job
from procedures.public_pages import calls
from rpc.api import Forbidden, IdParams, NotFound
from rpc.panel.handler import Panel

PER_PAGE = 25

_COUNTS = "SELECT status, count(*) AS n FROM applications WHERE job_id = %(job_id)s GROUP BY status"
_APPLICANTS = """
SELECT a.id::text AS id, a.status, a.created_at, a.rating, u.display_name, u.email,
       f.id::text AS resume_id, f.filename AS resume_filename
FROM applications AS a
JOIN users AS u ON u.id = a.candidate_id
LEFT JOIN application_files AS af ON af.application_id = a.id AND af.kind = 'resume'
LEFT JOIN files AS f ON f.id = af.file_id
WHERE a.job_id = %(job_id)s {status} {after}
ORDER BY a.created_at DESC, a.id DESC
LIMIT %(limit)s
"""
_BY_STATUS = "AND a.status = %(status)s"


@desk_page
async def job_page(panel: Panel) -> Response:
    """`GET /panel/jobs/{id}[?status=&cursor=]`."""
    return await show(panel)


@desk_page
async def save(panel: Panel) -> Response:
    """`POST /panel/jobs/{id}`: the fields that changed, through `jobs.update` (one `job.updated` event)."""
    job = await _job(panel)
    values = posted_job(panel)
    current = {name: getattr(job, name) for name in FIELDS}
    changed = {name: value for name, value in job_params(values).items() if _differs(value, current[name])}
    try:
        await calls.run(panel, update_job, calls.params(UpdateJob, {"id": job.id, **changed}))
    except calls.Refused as refused:
        return await show(panel, sent_back(values, refused), refused.status)
    return back_to(f"/panel/jobs/{job.id}", "job_saved")


@desk_page
async def publish(panel: Panel) -> Response:
    """`POST /panel/jobs/{id}/publish`."""
    job = await _job(panel)
    if refused := await calls.attempt(panel, publish_job, IdParams(id=job.id)):
        return await show(panel, status=refused.status, alert=said(refused))
    return back_to(f"/panel/jobs/{job.id}", "job_published")


@desk_page
async def confirm_close(panel: Panel) -> Response:
    """`GET /panel/jobs/{id}/close`: closing cannot be undone, so it is asked first."""
    return render(panel, "job_close.html", job=await _job(panel))


@desk_page
async def close(panel: Panel) -> Response:
    """`POST /panel/jobs/{id}/close`."""
    job = await _job(panel)
    if refused := await calls.attempt(panel, close_job, IdParams(id=job.id)):
        return render(panel, "job_close.html", refused.status, job=job, error=said(refused))
    return back_to(f"/panel/jobs/{job.id}", "job_closed")


async def show(panel: Panel, form: FormState | None = None, status: int = 200, alert: str | None = None) -> Response:
    """The job's page; `form` is the edit form sent back with what was wrong, `alert` why a button did nothing."""
    job = await _job(panel)
    rows = await (await panel.conn.execute(_COUNTS, {"job_id": job.id})).fetchall()
    counts = {row["status"]: row["n"] for row in rows}
    shown = panel.request.query_params.get("status", "")
    chosen = shown if shown in APPLICATION_STATUSES else None
    name = f"desk applicants {job.id} {chosen}"
    settings = panel.services.settings
    place = keyset.opened(settings, name, panel.request.query_params.get("cursor"))
    after, values = keyset.condition(place, "a")
    values |= {"job_id": job.id, "status": chosen, "limit": PER_PAGE + 1}
    query = _APPLICANTS.format(status=_BY_STATUS if chosen else "", after=after)
    applicants = await (await panel.conn.execute(query, values)).fetchall()
    editing = form or FormState(values=_form_values(job))
    return render(
        panel,
        "job.html",
        status,
        job=job,
        counts=counts,
        total=sum(counts.values()),
        chosen=chosen,
        applicants=applicants[:PER_PAGE],
        older=keyset.next_cursor(settings, name, applicants, PER_PAGE),
        first=place is None,
        form=editing,
        alert=alert,
    )


async def _job(panel: Panel) -> Job:
    """The job of the address, if the signed-in person's account owns it (`jobs.get`'s rule of who sees it, and
    the rule of who changes it); else the panel's 404."""
    ctx = await calls.context(panel, get_job)
    try:
        job, _ = await owned(ctx, panel.path("id"), lock=False)
    except Forbidden:
        raise NotFound() from None
    return job


def _form_values(job: Job) -> dict[str, Any]:
    values = {name: getattr(job, name) or "" for name in FIELDS}
    values["scorecard_attributes"] = "\n".join(job.scorecard_attributes)
    return values


def _differs(sent: Any, current: Any) -> bool:
    if isinstance(current, list):
        return list(sent) != current
    return bool(sent != current)
