"""`/jobs/{id}/apply`: sign in or sign up right there (the web sign-in's own forms and endpoints), then a cover
letter. The Application is made by `applications.create`'s own code, in one transaction with its event
`application.created` and the candidate's confirmation e-mail (the durable mail queue), so all three commit or
none does. Applying twice is refused with a sentence that says so.

The form is the place for more fields of `applications.create` (a résumé file among them): each is read from
the form into `CreateApplication`, whose own checks refuse what does not fit."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from procedures.applications import CreateApplication
from procedures.applications.pipeline import APPLIED_ONCE, create_application
from procedures.public_pages.jobposting import LABELS, PublicJob
from procedures.public_pages.site import context_for, find_job, job_gone, message, render
from rpc.core.database_errors import on_duplicate
from rpc.core.errors import Conflict, NotFound, PayloadTooLarge, RateLimited
from rpc.core.params import read_body
from rpc.core.types import Connection
from rpc.services import services
from rpc.web.forms import FORM, FormError, media_type, parse_form
from rpc.web.pages import redirect
from rpc.web.people import PURPOSE as PEOPLE_PURPOSE
from rpc.web.sessions import WebUser
from rpc.web.state import web

# A cover letter of 20,000 characters, each up to 4 UTF-8 bytes, each byte percent-encoded: 240 KB, and the rest.
MAX_APPLY_FORM_BYTES = 256 * 1024
ALREADY = "You have already applied to this job. Follow your application on your page."
_APPLIED = """
SELECT id::text AS id, created_at FROM applications WHERE job_id = %(job_id)s AND candidate_id = %(user_id)s
"""


async def apply_page(request: Request) -> Response:
    """`GET /jobs/{id}/apply`: the sign-in and sign-up forms, or the application form, or where it stands."""
    state = web(request)
    async with state.pool.connection() as conn:
        job = await find_job(conn, request.path_params["id"])
        if gone := job_gone(job):
            return gone
        assert job is not None
        user = await state.sessions.current(conn, request)
        if user is not None:
            return await _form(conn, job, user)
    binding, new = state.sessions.signin_binding(request)
    page = render(
        "apply.html",
        job=job,
        labels=LABELS,
        error=None,
        signin_csrf_token=state.sessions.csrf_token("signin", binding),
        people_csrf_token=state.sessions.csrf_token(PEOPLE_PURPOSE, binding),
    )
    if new:
        state.sessions.set_signin_cookie(page, binding)
    return page


async def _form(
    conn: Connection, job: PublicJob, user: WebUser, *, status: int = 200, error: str | None = None, letter: str = ""
) -> Response:
    applied = None
    if user.role == "candidate":
        applied = await (await conn.execute(_APPLIED, {"job_id": job.id, "user_id": user.user_id})).fetchone()
    context = {"job": job, "labels": LABELS, "error": error, "applied": applied, "cover_letter": letter}
    return render("apply.html", 403 if user.role != "candidate" else status, user=user, **context)


async def apply(request: Request) -> Response:
    """`POST /jobs/{id}/apply` with `csrf_token` and `cover_letter`: apply, then the candidate's home."""
    state = web(request)
    here = f"/jobs/{request.path_params['id']}/apply"
    try:
        if media_type(request) != FORM:
            raise FormError(f"Send the form as {FORM}.")
        form = parse_form(await read_body(request, MAX_APPLY_FORM_BYTES))
    except (FormError, PayloadTooLarge):
        return message(400, "Bad request", "The form could not be read. A cover letter holds up to 20,000 characters.")
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
        if user is None:  # the session ended meanwhile: sign in again on the page, then send again
            return redirect(here)
        sent = form.get("csrf_token", [])
        if len(sent) != 1 or not state.sessions.csrf_valid("session", user.session, sent[0]):
            return state.pages.forbidden()
        job = await find_job(conn, request.path_params["id"])
        if gone := job_gone(job):
            return gone
        assert job is not None
        letter = (form.get("cover_letter") or [""])[0].replace("\r\n", "\n")
        if user.role != "candidate":
            return await _form(conn, job, user)
        try:
            params = msgspec.convert({"job_id": job.id, "cover_letter": letter.strip() or None}, CreateApplication)
        except msgspec.ValidationError:
            error = "A cover letter holds up to 20,000 characters, without NUL characters."
            return await _form(conn, job, user, status=422, error=error, letter=letter)
        try:
            await state.throttle.hit("panel_writes", user.user_id)
            with on_duplicate(APPLIED_ONCE, _AlreadyApplied()):
                await _create(request, conn, user, job, params)
        except RateLimited as exc:
            return state.pages.rate_limited(exc)
        except _AlreadyApplied:
            return await _form(conn, job, user, status=409, error=ALREADY)
        except (Conflict, NotFound):  # closed (or gone) between reading the job and applying
            return job_gone(await find_job(conn, job.id)) or message(409, "Not applied", "Try again.", user=user)
    return redirect("/me?notice=applied")


class _AlreadyApplied(Exception):
    """The candidate applied to the job before (from another tab, or through the API)."""


async def _create(request: Request, conn: Connection, user: WebUser, job: PublicJob, params: CreateApplication) -> None:
    """The Application, its event and the confirmation e-mail, in one transaction."""
    running = services(request)
    async with conn.transaction():
        ctx = await context_for(request, conn, running, user, "applications.create")
        await create_application(ctx, params)
        if user.email:
            link = f"{running.settings.public_url.rstrip('/')}/me"
            await running.people.mail.send(
                conn, "application_received", user.email, title=job.title, company=job.company, link=link
            )
