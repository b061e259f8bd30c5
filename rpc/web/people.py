"""The web pages of docs/people.md: sign-up, e-mail verification (and a new link), password reset, and
accepting an invitation. Every form carries a CSRF token bound to the pre-session cookie of the sign-in form
(purpose `people`); every page has `Referrer-Policy: no-referrer` and loads nothing from elsewhere. A page reached
by a mailed link takes its token from the address into a cookie and redirects to itself without it
(`rpc.web.link_cookie`), so no log keeps a live token. A used, expired or unknown link answers a `400` page that
offers a new one.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from rpc.audit import log as audit_log
from rpc.auth import links
from rpc.auth.people import SignUp, email_problem, normal_email
from rpc.auth.teams import InviteeHasAccount
from rpc.core.errors import InvalidLink, InvalidParams, PayloadTooLarge, RateLimited
from rpc.core.types import Connection
from rpc.mail.transport import local_mailbox
from rpc.web import link_cookie
from rpc.web.auth_api import after_answer, client_address, throttle_people
from rpc.web.forms import Fields, FormError, read_form, single
from rpc.web.pages import local_path, redirect, signin_url
from rpc.web.state import Web, web

PURPOSE = "people"  # of the CSRF tokens of these forms
# What a form that mails a link does once it has answered: with the form's values, `work(conn, email)`.
LinkWork = Callable[[Web, dict[str, str]], Callable[[Connection, str], Awaitable[None]]]
ROLES = ("employer", "candidate")
MAX_NEXT_LENGTH = 2000  # as the links keep it
_LINK_INVALID = {
    "verify": "This confirmation link was already used, has expired, or was replaced by a newer one. If your "
    "address is not confirmed yet, we can send you a new link.",
    "reset": "This password-reset link was already used, has expired, or was replaced by a newer one. "
    "Ask for a new one below.",
    "invite": "This invitation was already accepted, has expired, or was revoked. Ask the person who invited "
    "you to send it again.",
}


def _form_page(request: Request, state: Web, template: str, status: int = 200, **context: Any) -> Response:
    """A page with a form of this module, its CSRF token bound to the pre-session cookie (set if new)."""
    binding, new = state.sessions.signin_binding(request)
    response = state.pages.render(template, status, csrf_token=state.sessions.csrf_token(PURPOSE, binding), **context)
    if new:
        state.sessions.set_signin_cookie(response, binding)
    return response


async def _posted(request: Request, state: Web, *names: str) -> dict[str, str] | Response:
    """The named fields of a posted form (absent ones as ''), or the page that refuses it (unreadable: 400;
    without a valid CSRF token: 403)."""
    try:
        form: Fields = await read_form(request)
        values = {name: single(form, name) or "" for name in ("csrf_token", *names)}
    except (FormError, PayloadTooLarge):
        return state.pages.error(400, "Bad request", "The form could not be read.")
    if not state.sessions.csrf_valid(PURPOSE, state.sessions.signin_cookie_value(request), values["csrf_token"]):
        return state.pages.forbidden()
    return values


def _next(path: str | None) -> str:
    """A `next` of a form or an address: a path of this site (of a sane length), else ''."""
    return local_path(path, default="") if path and len(path) <= MAX_NEXT_LENGTH else ""


def _sign_in(next_path: str | None) -> tuple[str, str]:
    """The link a page gives to sign in: on to `next_path` (where the person began) when there is one."""
    return (signin_url(next_path) if next_path else "/web/signin", "Sign in")


def _errors(exc: InvalidParams) -> dict[str, str]:
    return {entry["field"]: entry["message"] for entry in (exc.details or {}).get("errors", [])}


def _check_email(state: Web, email: str) -> Response:
    message = (
        f"If {email} can receive it, a message is on its way there. Follow its link to go on; "
        "it may take a minute, and it may land in your spam folder."
    )
    mailbox = local_mailbox(state.settings)
    if mailbox is not None:
        message += (
            f" No mail server is configured here (SMTP_URL), so the message is written as an .eml file in "
            f"{mailbox}, with its text beside it in a .txt file of the same name: open the newest one and follow "
            "its link."
        )
    return state.pages.render("people_message.html", 200, title="Check your e-mail", message=message, link=None)


def _link_invalid(request: Request, state: Web, kind: str) -> Response:
    """`400`: the link does not work (any more); the page offers a new one (verification: a form for it)."""
    response = _form_page(request, state, "link_invalid.html", 400, kind=kind, message=_LINK_INVALID[kind])
    return _forget_link(request, state, response)


def _forget_link(request: Request, state: Web, response: Response) -> Response:
    link_cookie.forget(response, request.url.path, state.sessions.secure)
    return response


# sign-up ------------------------------------------------------------------------------------------------


async def signup_page(request: Request) -> Response:
    """`GET /web/signup[?next=/path]`: `next`, a page of this site, is where signing in goes once the address
    is confirmed (the job the person was applying to)."""
    state = web(request)
    values = {"role": "employer", "next": _next(request.query_params.get("next"))}
    return _form_page(request, state, "signup.html", values=values, errors={})


async def signup(request: Request) -> Response:
    """`POST /web/signup` with `email`, `password`, `role`, `display_name`, `account_name` (and `next`)."""
    state = web(request)
    values = await _posted(request, state, "email", "password", "role", "display_name", "account_name", "next")
    if isinstance(values, Response):
        return values
    shown = {name: value for name, value in values.items() if name not in ("password", "csrf_token")}
    if values["role"] not in ROLES:
        return _form_page(request, state, "signup.html", 422, values=shown, errors={"role": "Choose one."})
    params = SignUp(
        email=values["email"],
        password=values["password"],
        role="employer" if values["role"] == "employer" else "candidate",
        display_name=values["display_name"] or None,
        account_name=values["account_name"] or None,
    )
    try:
        await throttle_people(state.throttle, request, params.email)
        async with state.pool.connection() as conn:
            await state.people.sign_up(conn, params, _next(values["next"]) or None)
    except RateLimited as exc:
        return state.pages.rate_limited(exc)
    except InvalidParams as exc:
        return _form_page(request, state, "signup.html", 422, values=shown, errors=_errors(exc))
    return _check_email(state, values["email"].strip().lower())


# verification -------------------------------------------------------------------------------------------


async def verify(request: Request) -> Response:
    """`GET /web/verify?token=...`: the link of the sign-up mail; following it confirms the address (and, for a
    link sent again on request, goes on to choosing a password)."""
    state = web(request)
    if exchanged := link_cookie.exchange(request, state.sessions.secure):
        return exchanged
    try:
        async with state.pool.connection() as conn:
            verified = await state.people.verify(conn, link_cookie.token(request))
    except InvalidLink:
        return _link_invalid(request, state, "verify")
    if verified.reset_token is not None:
        response = redirect("/web/reset")
        link_cookie.hand_over(response, "/web/reset", verified.reset_token, state.sessions.secure)
        return _forget_link(request, state, response)
    message = "Your e-mail address is confirmed. You can sign in now."
    response = state.pages.render(
        "people_message.html", title="E-mail confirmed", message=message, link=_sign_in(verified.next_path)
    )
    return _forget_link(request, state, response)


async def resend_verification(request: Request) -> Response:
    """`POST /web/verify/resend` with `email` (and `next`): the same answer whether or not a link was sent."""
    return await _mail_a_link(
        request,
        lambda state, values: functools.partial(
            state.people.resend_verification, next_path=_next(values["next"]) or None
        ),
        "next",
    )


# password reset -----------------------------------------------------------------------------------------


async def reset_request_page(request: Request) -> Response:
    """`GET /web/password-reset`: ask for a link."""
    return _form_page(request, web(request), "reset_request.html", email="")


async def reset_request(request: Request) -> Response:
    """`POST /web/password-reset` with `email`: the same answer whether or not the address is known."""
    return await _mail_a_link(request, lambda state, values: state.people.request_reset)


async def _mail_a_link(request: Request, work: LinkWork, *names: str) -> Response:
    """The one answer ("check your e-mail") to a form with `email` (and `names`), given before `work` runs:
    known and unknown addresses look alike, also to the clock."""
    state = web(request)
    values = await _posted(request, state, "email", *names)
    if isinstance(values, Response):
        return values
    if problem := email_problem(normal_email(values["email"])):
        return state.pages.error(422, "Check the e-mail address", problem)
    try:
        await throttle_people(state.throttle, request, values["email"])
    except RateLimited as exc:
        return state.pages.rate_limited(exc)
    answer = _check_email(state, values["email"].strip().lower())
    answer.background = after_answer(state.pool, work(state, values), values["email"])
    return answer


async def reset_page(request: Request) -> Response:
    """`GET /web/reset?token=...`: the new-password form, if the link still works (it is used by the POST)."""
    state = web(request)
    if exchanged := link_cookie.exchange(request, state.sessions.secure):
        return exchanged
    token = link_cookie.token(request)
    async with state.pool.connection() as conn:
        if not token or not await links.is_open(conn, "reset", token):
            return _link_invalid(request, state, "reset")
    return _form_page(request, state, "reset.html", errors={})


async def reset(request: Request) -> Response:
    """`POST /web/reset` with `password` (the link's token in its cookie): set it; every session of the person
    ends."""
    state = web(request)
    values = await _posted(request, state, "password")
    if isinstance(values, Response):
        return values
    try:
        await state.throttle.hit_address("people_address", client_address(request))
        async with state.pool.connection() as conn:
            origin = audit_log.Origin.of(request)
            used = await state.people.reset_password(conn, link_cookie.token(request), values["password"], origin)
    except RateLimited as exc:
        return state.pages.rate_limited(exc)
    except InvalidLink:
        return _link_invalid(request, state, "reset")
    except InvalidParams as exc:
        return _form_page(request, state, "reset.html", 422, errors=_errors(exc))
    message = "Your new password is set, and you were signed out everywhere. API keys keep working."
    response = state.pages.render(
        "people_message.html", title="Password changed", message=message, link=_sign_in(used.next_path)
    )
    return _forget_link(request, state, response)


# invitations --------------------------------------------------------------------------------------------


async def invitation_page(request: Request) -> Response:
    """`GET /web/invite?token=...`: who invites you, and the form to join."""
    state = web(request)
    if exchanged := link_cookie.exchange(request, state.sessions.secure):
        return exchanged
    try:
        async with state.pool.connection() as conn:
            invitation = await state.teams.invitation(conn, link_cookie.token(request))
    except InvalidLink:
        return _link_invalid(request, state, "invite")
    except InviteeHasAccount as exc:
        return _forget_link(request, state, state.pages.error(409, "You already have an account", exc.message))
    return _form_page(request, state, "invite.html", invitation=invitation, values={}, errors={})


async def accept_invitation(request: Request) -> Response:
    """`POST /web/invite` with `display_name`, `password` (the link's token in its cookie): join, and be signed
    in."""
    state = web(request)
    values = await _posted(request, state, "display_name", "password")
    if isinstance(values, Response):
        return values
    token = link_cookie.token(request)
    try:
        await state.throttle.hit_address("people_address", client_address(request))
        async with state.pool.connection() as conn:
            user_id = await state.teams.accept_invitation(
                conn, token, values["display_name"], values["password"], audit_log.Origin.of(request)
            )
            session = await state.sessions.start(conn, user_id)
    except RateLimited as exc:
        return state.pages.rate_limited(exc)
    except InvalidLink:
        return _link_invalid(request, state, "invite")
    except InviteeHasAccount as exc:
        return _forget_link(request, state, state.pages.error(409, "You already have an account", exc.message))
    except InvalidParams as exc:
        async with state.pool.connection() as conn:
            invitation = await state.teams.invitation(conn, token)
        shown = {"display_name": values["display_name"]}
        return _form_page(request, state, "invite.html", 422, invitation=invitation, values=shown, errors=_errors(exc))
    response = redirect("/panel")
    state.sessions.set_session_cookie(response, session)
    return _forget_link(request, state, response)
