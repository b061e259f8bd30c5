"""`POST /me/resume`: a candidate uploads or replaces the résumé on their profile from their home, by
files.upload's and `profile.update`'s own code. The form is multipart (the API's own reader, `resume`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from procedures.files import save_upload
from procedures.profile import UpdateProfile
from procedures.profile import update as update_profile
from procedures.public_pages import home, resume
from procedures.public_pages.site import context_for
from rpc.api import InvalidParams, RpcError
from rpc.core.errors import RateLimited
from rpc.core.multipart import Form
from rpc.services import services
from rpc.web.pages import redirect, signin_url
from rpc.web.state import web

HOME_FORM = resume.shape(required=True)
UNREADABLE = "The form could not be read. Choose a file and send it again."


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
            return await home.page(request, conn, user, status=422, error="The file is empty. Choose another.")
        except RpcError as exc:  # of no accepted type (415)
            return await home.page(request, conn, user, status=exc.status, error=exc.message)
    return redirect("/me?notice=resume")
