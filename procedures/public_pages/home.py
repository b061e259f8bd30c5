"""`GET /me`: a candidate's own page — their applications, each with its status, history and résumé, withdraw (by
`applications.withdraw`'s own code), their profile with its résumé, uploaded or replaced right there (by
files.upload's and `profile.update`'s own code), and the way to the open jobs. Hiring people have the panel."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from procedures.applications import FINAL
from procedures.applications.pipeline import withdraw
from procedures.files import save_upload
from procedures.profile import UpdateProfile
from procedures.profile import update as update_profile
from procedures.public_pages import resume
from procedures.public_pages.site import context_for, render
from rpc.api import Connection, IdParams, InvalidParams, RpcError
from rpc.core.errors import RateLimited
from rpc.core.multipart import Form
from rpc.services import services
from rpc.web.forms import FormError, read_form
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
}
SHOWN = 100

HOME_FORM = resume.shape(required=True)
UNREADABLE = "The form could not be read. Choose a file and send it again."

_PROFILE = """
SELECT u.email, u.display_name, u.headline, f.id::text AS resume_id, f.filename AS resume_filename,
       f.created_at AS resume_created_at
FROM users AS u LEFT JOIN files AS f ON f.id = u.resume_file_id WHERE u.id = %(id)s
"""
_APPLICATIONS = """
SELECT a.id::text AS id, a.job_id::text AS job_id, a.status, a.created_at, j.title, j.company,
       (SELECT f.filename FROM application_files AS af JOIN files AS f ON f.id = af.file_id
        WHERE af.application_id = a.id AND af.kind = 'resume') AS resume_filename
FROM applications AS a JOIN jobs AS j ON j.id = a.job_id
WHERE a.candidate_id = %(user_id)s ORDER BY a.created_at DESC, a.id DESC LIMIT %(limit)s
"""
_HISTORY = """
SELECT application_id::text AS application_id, from_status, to_status, changed_at
FROM application_status_history WHERE application_id = ANY(%(ids)s::uuid[]) ORDER BY changed_at, id
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
        return await _home(request, conn, user, notice=NOTICES.get(request.query_params.get("notice", "")))


async def _home(
    request: Request,
    conn: Connection,
    user: WebUser,
    *,
    status: int = 200,
    notice: str | None = None,
    error: str | None = None,
) -> Response:
    profile = await (await conn.execute(_PROFILE, {"id": user.user_id})).fetchone()
    assert profile is not None  # the session's user
    # Their own file: a link of their own (no audit), made for this page view and valid for minutes.
    resume_url = services(request).files.links.url(profile["resume_id"]) if profile["resume_id"] else None
    applications = await (await conn.execute(_APPLICATIONS, {"user_id": user.user_id, "limit": SHOWN})).fetchall()
    history: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for step in await (await conn.execute(_HISTORY, {"ids": [a["id"] for a in applications]})).fetchall():
        history[step["application_id"]].append(step)
    for application in applications:
        application["history"] = history[application["id"]]
    return render(
        "home.html",
        status,
        user=user,
        profile=profile,
        applications=applications,
        statuses=STATUSES,
        final=FINAL,
        notice=notice,
        error=error,
        resume_url=resume_url,
        **resume.resume_input(request),
    )


async def withdraw_application(request: Request) -> Response:
    """`POST /me/applications/{id}/withdraw` with `csrf_token`."""
    state = web(request)
    try:
        form = await read_form(request)
    except (FormError, RpcError):
        return state.pages.error(400, "Bad request", "The form could not be read.")
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
        if user is None:
            return redirect(signin_url("/me"))
        sent = form.get("csrf_token", [])
        if len(sent) != 1 or not state.sessions.csrf_valid("session", user.session, sent[0]):
            return state.pages.forbidden()
        try:
            await state.throttle.hit("panel_writes", user.user_id)
            async with conn.transaction():
                ctx = await context_for(request, conn, services(request), user, "applications.withdraw")
                await withdraw(ctx, IdParams(id=request.path_params["id"]))
        except RateLimited as exc:
            return state.pages.rate_limited(exc)
        except RpcError as exc:  # not yours (404), or already final (409)
            return await _home(request, conn, user, status=exc.status, error=exc.message)
    return redirect("/me?notice=withdrawn")


async def upload_resume(request: Request) -> Response:
    """`POST /me/resume` (multipart/form-data) with `csrf_token` and the `resume` file: it becomes the profile's
    résumé (a former one stays on the applications that hold it). Nobody signed in sends no file to be read."""
    state = web(request)
    async with state.pool.connection() as conn:
        if await state.sessions.current(conn, request) is None:
            return redirect(signin_url("/me"))
    form = await resume.read(request, HOME_FORM, "/me", UNREADABLE)
    if not isinstance(form, Form):
        return form
    try:
        return await _save_resume(request, form)
    finally:
        if form.file is not None:
            form.file.discard()


async def _save_resume(request: Request, form: Form) -> Response:
    state = web(request)
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
        if user is None:
            return redirect(signin_url("/me"))
        if not state.sessions.csrf_valid("session", user.session, form.fields.get("csrf_token")):
            return state.pages.forbidden()
        if user.role != "candidate":
            return redirect("/panel")
        assert form.file is not None  # HOME_FORM requires it
        try:
            await state.throttle.hit("panel_writes", user.user_id)
            async with conn.transaction():
                ctx = await context_for(request, conn, services(request), user, "profile.update")
                kept = await save_upload(ctx, form.file)
                await update_profile(ctx, UpdateProfile(resume_file_id=kept.id))
        except RateLimited as exc:
            return state.pages.rate_limited(exc)
        except InvalidParams:
            return await _home(request, conn, user, status=422, error="The file is empty. Choose another.")
        except RpcError as exc:  # of no accepted type (415)
            return await _home(request, conn, user, status=exc.status, error=exc.message)
    return redirect("/me?notice=resume")
