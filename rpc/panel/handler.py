"""What every panel page does before and after its own work, in one place.

`@page` turns `async def handler(panel: Panel) -> Response` into a Starlette endpoint that
1. reads a POST's form (form-encoded, bounded) and refuses it without the session's CSRF token (403),
2. finds the signed-in person (else: a GET goes to the sign-in page and comes back; a POST is refused), and
   counts a POST against the person's budget of changes (`PANEL_WRITE_LIMIT_PER_USER`, else 429),
3. hands the handler a `Panel`: the person, a database connection, the services, the form,
4. turns `NotFound` (another account's object, a malformed id) into the panel's 404 page,
5. adds the security headers to whatever is answered.

`@page_calling_out` does the same for a page that waits on another service (a checkout with the payment
provider): its handler holds no connection — the page's is given back once the person is checked — and takes
one for each step of its own (`Panel.connected`), so that a slow service never holds one of the pool's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from rpc.audit import log as audit_log
from rpc.core.errors import NotFound, PayloadTooLarge, RateLimited
from rpc.core.types import Connection
from rpc.panel.pages import PAGES, secure
from rpc.services import Services, services
from rpc.web.forms import Fields, FormError, read_form
from rpc.web.pages import redirect, signin_url
from rpc.web.sessions import WebUser
from rpc.web.state import Web, web

MAX_FIELD_LENGTH = 10_000

# Messages shown after a redirect, chosen by a fixed key in the query string (never free text, never a secret).
NOTICES = {
    "key_revoked": "The key was revoked. Calls made with it are refused from now on.",
    "endpoint_updated": "The endpoint was saved.",
    "endpoint_deleted": "The endpoint was deleted, with its delivery log. Nothing more is sent to it.",
    "endpoint_enabled": "The endpoint is enabled: it receives the events it subscribed to.",
    "endpoint_disabled": "The endpoint is disabled: it receives nothing until you enable it again.",
    "test_sent": "A webhook.test event is on its way. Reload this page to see its delivery below.",
    "redelivered": "The delivery was queued again, with fresh attempts. It appears at the top of the log.",
    "nothing_to_redeliver": "No failed delivery since that time needed sending again.",
    "redelivered_many": "Every failed delivery since that time was queued again.",
    "app_updated": "The redirect URIs were saved.",
    "app_saved": "The application was saved. Scopes taken away end for every token at its next request.",
    "app_deleted": "The application was deleted, with every authorization and token it held.",
    "access_revoked": "Access was revoked. The application's tokens stop working at once.",
    "invitation_sent": "The invitation is on its way. The link in it works once, for 7 days.",
    "invitation_resent": "A new invitation is on its way; the link of the previous one no longer works.",
    "invitation_revoked": "The invitation was revoked: its link no longer works.",
    "member_removed": "The member was removed. Their sessions, API keys and authorized apps stopped at once.",
    "profile_saved": "Your profile was saved.",
}


@dataclass(frozen=True, slots=True)
class Panel:
    """One panel request: who is signed in, a connection (autocommit; writes open a transaction; none for a page
    calling out), the running services, and the posted form (empty for a GET)."""

    request: Request
    connection: Connection | None
    user: WebUser
    services: Services
    web: Web
    form: Fields = field(default_factory=dict)

    @property
    def conn(self) -> Connection:
        if self.connection is None:
            raise RuntimeError("a page calling out holds no connection: take one with `panel.connected()`")
        return self.connection

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[Panel]:
        """This request on a connection of its own, for the block."""
        async with self.services.pool.connection() as conn:
            yield dataclasses.replace(self, connection=conn)

    @property
    def account_id(self) -> str:
        return self.user.account_id

    @property
    def actor(self) -> audit_log.Actor:
        """The signed-in person, as the audit log records who acted."""
        return audit_log.Actor("user", self.user.user_id)

    @property
    def origin(self) -> audit_log.Origin:
        return audit_log.Origin.of(self.request)

    async def audit(self, action: str, target_id: str | None) -> None:
        """Record `action` by the signed-in person in their account's audit log, inside the open transaction."""
        await audit_log.record(
            self.conn, action, account_id=self.account_id, actor=self.actor, target_id=target_id, origin=self.origin
        )

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])

    def field(self, name: str) -> str:
        """The posted value of `name` ('' when absent); the first one, if a browser sent several."""
        values = self.form.get(name, [])
        return values[0][:MAX_FIELD_LENGTH] if values else ""

    def fields(self, name: str) -> list[str]:
        """Every posted value of `name` (checkboxes)."""
        return [value[:MAX_FIELD_LENGTH] for value in self.form.get(name, [])]

    def query_int(self, name: str, default: int = 1, maximum: int = 10_000) -> int:
        raw = self.request.query_params.get(name, "")
        return min(int(raw), maximum) if raw.isdigit() and int(raw) >= 1 else default

    def context(self, **values: Any) -> dict[str, Any]:
        """What every page is rendered with — the person, their CSRF token and a notice (the page's own, else the
        one named in the query string, if any) — and `values`."""
        notice = values.pop("notice", None) or NOTICES.get(self.request.query_params.get("notice", ""))
        return {"user": self.user, "csrf_token": self.user.csrf_token, "notice": notice, **values}

    def render(self, template: str, status: int = 200, **values: Any) -> Response:
        """A page of the panel's own templates."""
        return PAGES.render(template, self.context(**values), status)


Handler = Callable[[Panel], Awaitable[Response]]


def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The Starlette endpoint of a panel page (see the module's docstring)."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        return secure(await _serve(request, handler, calls_out=False))

    return endpoint


def page_calling_out(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint of a panel page that waits on another service: its handler holds no connection."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        return secure(await _serve(request, handler, calls_out=True))

    return endpoint


async def _serve(request: Request, handler: Handler, *, calls_out: bool) -> Response:
    state = web(request)
    form: Fields = {}
    if request.method == "POST":
        try:
            form = await read_form(request)
        except (FormError, PayloadTooLarge):
            return error_page(400, "Bad request", "The form could not be read.")
    async with state.pool.connection() as conn:
        admitted = await _admit(request, state, conn, form)
        if isinstance(admitted, Response):
            return admitted
        if not calls_out:
            return await _handle(handler, Panel(request, conn, admitted, services(request), state, form))
    return await _handle(handler, Panel(request, None, admitted, services(request), state, form))


async def _admit(request: Request, state: Web, conn: Connection, form: Fields) -> WebUser | Response:
    """The person signed in, their form's CSRF token and their budget of changes checked; else the answer."""
    user = await state.sessions.current(conn, request)
    if user is None:
        if request.method == "POST":  # a form of a session that has ended: sign in, then start again
            return redirect(signin_url("/panel"))
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return redirect(signin_url(here))
    if request.method == "POST" and not _csrf_ok(state, user, form):
        return error_page(
            403,
            "This form has expired",
            "The form was missing its security token, or the token no longer matches your session. "
            "Go back, reload the page and try again.",
            user=user,
        )
    if request.method == "POST":
        try:
            await state.throttle.hit("panel_writes", user.user_id)
        except RateLimited as exc:
            page = error_page(429, "Too many changes", f"Wait {exc.retry_after} seconds, then try again.", user=user)
            page.headers.update(exc.headers())
            return page
    return user


async def _handle(handler: Handler, panel: Panel) -> Response:
    try:
        return await handler(panel)
    except NotFound:
        return not_found_page(panel.user)


def _csrf_ok(state: Web, user: WebUser, form: Mapping[str, list[str]]) -> bool:
    sent = form.get("csrf_token", [])
    return len(sent) == 1 and state.sessions.csrf_valid("session", user.session, sent[0])


def error_page(status: int, title: str, message: str, user: WebUser | None = None) -> Response:
    context = {"user": user, "csrf_token": user.csrf_token if user else "", "notice": None}
    return PAGES.render("panel/error.html", {**context, "title": title, "message": message}, status)


def not_found_page(user: WebUser | None) -> Response:
    return error_page(404, "Not found", "There is nothing here, or it belongs to another account.", user)


async def unknown_page(request: Request) -> Response:
    """Any other address under /panel: the panel's 404 page (signed in or not)."""
    state = web(request)
    async with state.pool.connection() as conn:
        user = await state.sessions.current(conn, request)
    return secure(not_found_page(user))
