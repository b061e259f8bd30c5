"""`GET /me`: a candidate's own page — the offers made to them (accepted or declined right there), their
interviews (each with a file to add it to a calendar), their applications with status and history (withdrawn after
a page that asks to confirm it), their profile and its résumé, and the way to the open jobs. What it reads is what
the API gives the candidate: `interviews.list` as they call it, their offers as `offers.get` shows them (the
actions are `home_actions`). Hiring people have the panel."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from procedures import keyset
from procedures.applications import FINAL
from procedures.applications.interviews.invitations import wall_time
from procedures.applications.interviews.reads import list_interviews
from procedures.applications.interviews.shapes import InterviewPage, ListInterviews
from procedures.applications.offers.shapes import SHOWN_TO_CANDIDATE, Offer
from procedures.applications.offers.store import COLUMNS as OFFER_COLUMNS
from procedures.applications.offers.store import STATUS as OFFER_STATUS
from procedures.applications.offers.store import as_seen_by, offer_of
from procedures.public_pages import resume
from procedures.public_pages.site import context_for, render
from rpc.api import Connection, Context, InvalidParams
from rpc.services import services
from rpc.web.pages import redirect, signin_url
from rpc.web.sessions import WebUser
from rpc.web.state import web

STATUSES = {
    "pending": "Sent",
    "reviewed": "Reviewed",
    "interview_scheduled": "Interview scheduled",
    "offered": "Offered",
    "hired": "Hired",
    "rejected": "Not selected",
    "withdrawn": "Withdrawn",
}
NOTICES = {
    "applied": "Your application was sent. A confirmation is on its way to your e-mail.",
    "withdrawn": "Your application was withdrawn. The employer sees it as withdrawn.",
    "resume": "Your résumé was saved. Applications you make from now on can include it.",
    "accepted": "You accepted the offer. Congratulations! The employer is told at once.",
    "declined": "You declined the offer. The employer is told at once.",
}
SHOWN = 20
INTERVIEWS_FROM = dt.timedelta(days=30)  # as far back as the home shows interviews (as the calendar feed)
OFFERS_SHOWN = 20

_PROFILE = """
SELECT u.email, u.display_name, u.headline, u.location, f.id::text AS resume_id, f.filename AS resume_filename,
       f.created_at AS resume_created_at
FROM users AS u LEFT JOIN files AS f ON f.id = u.resume_file_id WHERE u.id = %(id)s
"""
_APPLICATIONS = """
SELECT a.id::text AS id, a.job_id::text AS job_id, a.status, a.created_at, j.title, j.company,
       (SELECT f.filename FROM application_files AS af JOIN files AS f ON f.id = af.file_id
        WHERE af.application_id = a.id AND af.kind = 'resume') AS resume_filename
FROM applications AS a JOIN jobs AS j ON j.id = a.job_id
WHERE a.candidate_id = %(user_id)s {after}
ORDER BY a.created_at DESC, a.id DESC LIMIT %(limit)s
"""
_HISTORY = """
SELECT application_id::text AS application_id, from_status, to_status, changed_at
FROM application_status_history WHERE application_id = ANY(%(ids)s::uuid[]) ORDER BY changed_at, id
"""
# The offers that reached the candidate (what `offers.get` shows them), newest first.
_OFFERS = f"""
SELECT {OFFER_COLUMNS}, o.account_id::text AS job_account, j.title AS job_title, j.company AS job_company
FROM offers AS o JOIN jobs AS j ON j.id = o.job_id
WHERE o.candidate_id = %(user_id)s AND {OFFER_STATUS} = ANY(%(shown)s)
ORDER BY o.created_at DESC, o.id DESC LIMIT %(limit)s
"""


async def home(request: Request) -> Response:
    """The candidate's page; signing in first if needed. Employers and admins go to the panel."""
    state = web(request)
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
        if user is None:
            return redirect(signin_url("/me"))
        if user.role != "candidate":
            return redirect("/panel")
        return await page(request, conn, user, notice=NOTICES.get(request.query_params.get("notice", "")))


async def page(
    request: Request,
    conn: Connection,
    user: WebUser,
    *,
    status: int = 200,
    notice: str | None = None,
    error: str | None = None,
) -> Response:
    """The page as it stands, with a notice or an error above it."""
    profile = await (await conn.execute(_PROFILE, {"id": user.user_id})).fetchone()
    assert profile is not None  # the session's user
    # Their own file: a link of their own (no audit), made for this page view and valid for minutes.
    resume_url = services(request).files.links.url(profile["resume_id"]) if profile["resume_id"] else None
    applications, older = await _applications(request, conn, user)
    ctx = await context_for(request, conn, services(request), user, "interviews.list")
    return render(
        "home.html",
        status,
        user=user,
        profile=profile,
        applications=applications,
        older=older,
        interviews=await _interviews(ctx, request.query_params.get("interviews") or None),
        offers=await _offers(ctx),
        statuses=STATUSES,
        final=FINAL,
        notice=notice,
        error=error,
        resume_url=resume_url,
        wall_time=wall_time,
        **resume.resume_input(request),
    )


async def _applications(request: Request, conn: Connection, user: WebUser) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the candidate's applications, each with its history, and the next page's cursor."""
    settings = services(request).settings
    name = f"home applications {user.user_id}"
    after, values = keyset.condition(keyset.opened(settings, name, request.query_params.get("applications")), "a")
    values |= {"user_id": user.user_id, "limit": SHOWN + 1}
    rows = await (await conn.execute(_APPLICATIONS.format(after=after), values)).fetchall()
    shown = rows[:SHOWN]
    history: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for step in await (await conn.execute(_HISTORY, {"ids": [a["id"] for a in shown]})).fetchall():
        history[step["application_id"]].append(step)
    for application in shown:
        application["history"] = history[application["id"]]
    return shown, keyset.next_cursor(settings, name, rows, SHOWN)


async def _interviews(ctx: Context, cursor: str | None) -> InterviewPage:
    """The candidate's interviews from a month back, in time order, as `interviews.list` gives them (from the
    first again when the page's cursor no longer fits)."""
    since = (dt.datetime.now(dt.UTC) - INTERVIEWS_FROM).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        return await list_interviews(ctx, ListInterviews(from_=since, cursor=cursor, per_page=SHOWN))
    except InvalidParams:
        return await list_interviews(ctx, ListInterviews(from_=since, per_page=SHOWN))


async def _offers(ctx: Context) -> list[tuple[Offer, dict[str, str]]]:
    """The offers that reached the candidate, as they may read them, each with its job's title and company."""
    values = {"user_id": ctx.principal.user_id, "shown": list(SHOWN_TO_CANDIDATE), "limit": OFFERS_SHOWN}
    shown = []
    for row in await (await ctx.conn.execute(_OFFERS, values)).fetchall():
        job = {"title": row.pop("job_title"), "company": row.pop("job_company")}
        job_account = row.pop("job_account")
        shown.append((as_seen_by(ctx.principal, offer_of(row), job_account), job))
    return shown
