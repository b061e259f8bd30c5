"""`/jobs/{id}/apply`: sign in or sign up right there (the web sign-in's own forms and endpoints), then a cover
letter. The Application is made by `applications.create`'s own code, in one transaction with its event
`application.created` and the candidate's confirmation e-mail (the durable mail queue), so all three commit or
none does. Applying twice is refused with a sentence that says so.

The form (multipart/form-data) is the place for more fields of `applications.create`: each is read from the form
into `CreateApplication`, whose own checks refuse what does not fit. The résumé is read and kept as files.upload
reads and keeps a file (procedures/public_pages/resume.py), in the application's transaction, its bytes first."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from procedures.applications import CreateApplication
from procedures.applications.pipeline import APPLIED_ONCE, create_application
from procedures.files import save_upload
from procedures.profile import UpdateProfile
from procedures.profile import update as update_profile
from procedures.public_pages import resume
from procedures.public_pages.jobposting import LABELS, PublicJob
from procedures.public_pages.site import context_for, find_job, job_gone, message, render
from rpc.api import Conflict, Connection, InvalidParams, NotFound, UnsupportedMediaType, Upload, on_duplicate
from rpc.core.errors import RateLimited
from rpc.core.multipart import Form
from rpc.services import services
from rpc.web.pages import redirect
from rpc.web.people import PURPOSE as PEOPLE_PURPOSE
from rpc.web.sessions import WebUser
from rpc.web.state import web

# A cover letter of 20,000 characters, each up to 4 UTF-8 bytes, and the CSRF token beside the résumé.
APPLY_FORM = resume.shape(required=False, cover_letter=4 * 20_000, profile_resume=8)
UNREADABLE = "The form could not be read. A cover letter holds up to 20,000 characters."
ALREADY = "You have already applied to this job. Follow your application on your page."
# The résumé on the candidate's profile, offered (ticked) on the form: sent when no file is chosen.
_ON_FILE = """
SELECT f.id::text AS id, f.filename FROM users AS u JOIN files AS f ON f.id = u.resume_file_id WHERE u.id = %(id)s
"""
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
            return await _form(request, conn, job, user)
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
    request: Request,
    conn: Connection,
    job: PublicJob,
    user: WebUser,
    *,
    status: int = 200,
    error: str | None = None,
    letter: str = "",
) -> Response:
    applied = on_file = None
    if user.role == "candidate":
        applied = await (await conn.execute(_APPLIED, {"job_id": job.id, "user_id": user.user_id})).fetchone()
        on_file = await (await conn.execute(_ON_FILE, {"id": user.user_id})).fetchone()
    context = {"job": job, "labels": LABELS, "error": error, "applied": applied, "cover_letter": letter}
    context["on_file"] = on_file
    status = 403 if user.role != "candidate" else status
    return render("apply.html", status, user=user, **context, **resume.resume_input(request))


async def apply(request: Request) -> Response:
    """`POST /jobs/{id}/apply` (multipart/form-data) with `csrf_token`, `cover_letter`, and an optional `resume`
    file or else `profile_resume=yes` (the profile's résumé): apply, then the candidate's home. Nobody signed in
    sends no file to be read."""
    state = web(request)
    here = f"/jobs/{request.path_params['id']}/apply"
    async with state.pool.connection() as conn:
        if await state.sessions.current(conn, request) is None:
            return redirect(here)  # the session ended meanwhile: sign in again on the page, then send again
    form = await resume.read(request, APPLY_FORM, here, UNREADABLE)
    if not isinstance(form, Form):
        return form
    try:
        return await _apply(request, form, here)
    finally:
        if form.file is not None:
            form.file.discard()


async def _apply(request: Request, form: Form, here: str) -> Response:
    state = web(request)
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
        if user is None:
            return redirect(here)
        if not state.sessions.csrf_valid("session", user.session, form.fields.get("csrf_token")):
            return state.pages.forbidden()
        job = await find_job(conn, request.path_params["id"])
        if gone := job_gone(job):
            return gone
        assert job is not None
        letter = form.fields.get("cover_letter", "").replace("\r\n", "\n")
        if user.role != "candidate":
            return await _form(request, conn, job, user)
        on_file = None
        if form.file is None and form.fields.get("profile_resume") == "yes":
            on_file = await (await conn.execute(_ON_FILE, {"id": user.user_id})).fetchone()
        sent = {"job_id": job.id, "cover_letter": letter.strip() or None, "resume_file_id": on_file and on_file["id"]}
        try:
            params = msgspec.convert(sent, CreateApplication)
        except msgspec.ValidationError:
            error = "A cover letter holds up to 20,000 characters, without NUL characters."
            return await _form(request, conn, job, user, status=422, error=error, letter=letter)
        try:
            await state.throttle.hit("panel_writes", user.user_id)
            with on_duplicate(APPLIED_ONCE, _AlreadyApplied()):
                await _create(request, conn, user, job, params, form.file)
        except RateLimited as exc:
            return state.pages.rate_limited(exc)
        except UnsupportedMediaType as exc:  # a résumé of no accepted type: the form again, the letter kept
            return await _form(request, conn, job, user, status=415, error=exc.message, letter=letter)
        except InvalidParams:
            error = "The résumé file is empty. Choose the file again, or send the application without one."
            return await _form(request, conn, job, user, status=422, error=error, letter=letter)
        except _AlreadyApplied:
            return await _form(request, conn, job, user, status=409, error=ALREADY)
        except (Conflict, NotFound):  # closed (or gone) between reading the job and applying
            return job_gone(await find_job(conn, job.id)) or message(409, "Not applied", "Try again.", user=user)
    return redirect("/me?notice=applied")


class _AlreadyApplied(Exception):
    """The candidate applied to the job before (from another tab, or through the API)."""


async def _create(
    request: Request,
    conn: Connection,
    user: WebUser,
    job: PublicJob,
    params: CreateApplication,
    file: Upload | None,
) -> None:
    """The résumé's File (its bytes stored first), the Application, its event and the confirmation e-mail, in
    one transaction. A résumé sent to a candidate whose profile has none becomes their profile's too
    (`profile.update`): the next application offers it, and their home shows it."""
    running = services(request)
    async with conn.transaction():
        ctx = await context_for(request, conn, running, user, "applications.create")
        if file is not None:
            kept = await save_upload(ctx, file)
            params = msgspec.structs.replace(params, resume_file_id=kept.id)
            if await (await conn.execute(_ON_FILE, {"id": user.user_id})).fetchone() is None:
                profile = await context_for(request, conn, running, user, "profile.update")
                await update_profile(profile, UpdateProfile(resume_file_id=kept.id))
        await create_application(ctx, params)
        if user.email:
            link = f"{running.settings.public_url.rstrip('/')}/me"
            await running.people.mail.send(
                conn, "application_received", user.email, title=job.title, company=job.company, link=link
            )
