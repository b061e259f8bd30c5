"""The web sign-in (`/web/signin`, `/web/signout`) and the person's authorized applications (`/web/apps`).

Sign-in checks the built-in identity provider's users (Argon2id, same time for unknown e-mails), is
throttled per address and per e-mail with the same budgets as `/auth/login` (the counters are shared, so
the two doors do not add up), and always starts a fresh session. `?next=` returns to local paths only.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from rpc.audit import log as audit_log
from rpc.auth.oauth_grants import authorized_apps, revoke_access
from rpc.core.errors import EmailNotVerified, InvalidCredentials, PayloadTooLarge, RateLimited
from rpc.core.types import Role
from rpc.web.auth_api import client_address
from rpc.web.forms import FormError, read_form, single
from rpc.web.pages import DEFAULT_LANDING, local_path, redirect, signin_url
from rpc.web.state import Web, web

MAX_EMAIL_LENGTH = 254
MAX_PASSWORD_LENGTH = 1024


async def signin_page(request: Request) -> Response:
    """`GET /web/signin?next=/path`: the form, or straight on when already signed in."""
    state = web(request)
    next_path = local_path(request.query_params.get("next"))
    async with state.pool.connection() as conn:
        if await state.sessions.current(conn, request) is not None:
            return redirect(next_path)
    return _signin_form(request, state, next_path)


def _signin_form(
    request: Request,
    state: Web,
    next_path: str,
    *,
    status: int = 200,
    email: str = "",
    error: str = "",
    unverified: bool = False,
) -> Response:
    binding, new = state.sessions.signin_binding(request)
    response = state.pages.render(
        "signin.html",
        status,
        csrf_token=state.sessions.csrf_token("signin", binding),
        next=next_path,
        email=email,
        error=error,
        unverified=unverified,
        resend_csrf_token=state.sessions.csrf_token("people", binding),
    )
    if new:
        state.sessions.set_signin_cookie(response, binding)
    return response


async def signin(request: Request) -> Response:
    """`POST /web/signin` with `email`, `password`, `csrf_token` (and `next`)."""
    state = web(request)
    try:
        form = await read_form(request)
        csrf, email, password, next_field = (single(form, name) for name in ("csrf_token", "email", "password", "next"))
    except (FormError, PayloadTooLarge):
        return state.pages.error(400, "Bad request", "The form could not be read.")
    if not state.sessions.csrf_valid("signin", state.sessions.signin_cookie_value(request), csrf):
        return state.pages.forbidden()
    next_path = local_path(next_field)
    email = (email or "").strip().lower()
    if not email or not password or len(email) > MAX_EMAIL_LENGTH or len(password) > MAX_PASSWORD_LENGTH:
        return _signin_form(request, state, next_path, status=400, email=email, error="Enter your e-mail and password.")
    try:
        await state.throttle.hit_address("signin_address", client_address(request))
        await state.throttle.hit("signin_email", email)
    except RateLimited as exc:
        return state.pages.rate_limited(exc)
    async with state.pool.connection() as conn:
        try:
            person = await state.identity.check_password(conn, email, password, audit_log.Origin.of(request))
            await state.identity.signed_in(conn, person)
        except InvalidCredentials:
            error = "The e-mail or password is wrong."
            return _signin_form(request, state, next_path, status=400, email=email, error=error)
        except EmailNotVerified:
            error = "Confirm your e-mail address first: follow the link we sent you, or ask for a new one below."
            return _signin_form(request, state, next_path, status=403, email=email, error=error, unverified=True)
        except RateLimited as exc:
            return state.pages.rate_limited(exc)
        session = await state.sessions.start(conn, person.user_id)
        previous = await state.sessions.current(conn, request)
        if previous is not None:  # signing in again (perhaps as someone else) ends the session it replaces
            await state.sessions.end(conn, previous.session)
    response = redirect(next_path)
    state.sessions.set_session_cookie(response, session)
    return response


async def signout(request: Request) -> Response:
    """`POST /web/signout` with `csrf_token`: ends the session here and in the database."""
    state = web(request)
    try:
        csrf = single(await read_form(request), "csrf_token")
    except (FormError, PayloadTooLarge):
        return state.pages.error(400, "Bad request", "The form could not be read.")
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
        if user is None:
            response = redirect("/web/signin")
            state.sessions.clear_session_cookie(response)
            return response
        if not state.sessions.csrf_valid("session", user.session, csrf):
            return state.pages.forbidden()
        await state.sessions.end(conn, user.session)
    response = redirect("/web/signin")
    state.sessions.clear_session_cookie(response)
    return response


async def apps_page(request: Request) -> Response:
    """`GET /web/apps`: the applications the signed-in person has authorized, each with "revoke access"."""
    state = web(request)
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
        if user is None:
            return redirect(signin_url("/web/apps"))
        apps = await authorized_apps(conn, user.user_id)
    return state.pages.render("apps.html", user=user, apps=apps, sentences=state.server.policy.sentences_for(user.role))


async def revoke_app(request: Request) -> Response:
    """`POST /web/apps/revoke` with `client_id` and `csrf_token`."""
    state = web(request)
    try:
        form = await read_form(request)
        csrf, client_id = single(form, "csrf_token"), single(form, "client_id")
    except (FormError, PayloadTooLarge):
        return state.pages.error(400, "Bad request", "The form could not be read.")
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
        if user is None:
            return redirect(signin_url("/web/apps"))
        if not state.sessions.csrf_valid("session", user.session, csrf):
            return state.pages.forbidden()
        if client_id:
            async with conn.transaction():
                if await revoke_access(conn, user.user_id, client_id):
                    await audit_log.record(
                        conn,
                        "oauth_grant.revoked",
                        account_id=user.account_id,
                        actor=audit_log.Actor("user", user.user_id),
                        target_id=client_id,
                        origin=audit_log.Origin.of(request),
                    )
    return redirect("/web/apps")


LANDINGS: dict[Role, str] = {"employer": "/panel", "admin": "/panel", "candidate": "/me"}


async def home(request: Request) -> Response:
    """`GET /web`: where a sign-in without `?next=` lands: an employer (or admin) on the panel, a candidate on a
    page of their own (their home: applications, profile, a way to the jobs), anyone else on the sign-in form."""
    state = web(request)
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
    return redirect(signin_url(DEFAULT_LANDING) if user is None else LANDINGS[user.role])
