"""`/oauth/authorize` (RFC 6749 section 4.1.1): validate, sign in, ask for consent, redirect with a code.

The order matters. The client and its redirect URI are checked first, and a fault there is an error page,
never a redirect (RFC 6749 section 4.1.2.1: an open redirector otherwise). Every later fault is sent back to that
redirect URI as `error=...&state=...` — but only once a person has signed in: before that, every fault is an
error page too (RFC 9700 section 4.11.2), so that nobody can use a registered client's URI as a redirector. The
consent form posts the request's parameters back with the session's CSRF token and is validated from scratch;
approving issues the code, denying sends `access_denied`. Every redirect also carries `iss` (RFC 9207), so a
client talking to several authorization servers can tell which one answered (RFC 9700 section 4.4 mix-up defence).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from rpc.audit import log as audit_log
from rpc.auth.oauth_clients import Client, find_client
from rpc.auth.oauth_errors import AccessDenied, InvalidRequest, InvalidScope, OAuthError, UnsupportedResponseType
from rpc.auth.oauth_policy import check_challenge
from rpc.core.errors import PayloadTooLarge
from rpc.core.types import Connection
from rpc.web.forms import Fields, FormError, read_form, single
from rpc.web.pages import origin_source, redirect, signin_url
from rpc.web.sessions import WebUser
from rpc.web.state import Web, web

AUTHORIZE_PATH = "/oauth/authorize"
PARAMS = ("client_id", "redirect_uri", "response_type", "scope", "state", "code_challenge", "code_challenge_method")
MAX_PARAM_LENGTH = 2048


class PageError(Exception):
    """A fault of the client or redirect URI: shown to the person, never sent anywhere."""

    def __init__(self, title: str, message: str) -> None:
        super().__init__(message)
        self.title = title
        self.message = message


class RedirectError(Exception):
    """A fault reported to the client at its (verified) redirect URI."""

    def __init__(self, redirect_uri: str, error: OAuthError, state: str | None) -> None:
        super().__init__(error.description)
        self.redirect_uri = redirect_uri
        self.error = error
        self.state = state


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """A valid authorization request (the person may still have to sign in and consent)."""

    client: Client
    redirect_uri: str
    scopes: list[str]
    state: str | None
    challenge: str
    params: list[tuple[str, str]]  # as received, for the consent form and the sign-in round trip


async def authorize_page(request: Request) -> Response:
    """`GET /oauth/authorize?client_id&redirect_uri&response_type=code&scope&state&code_challenge&...`."""
    state = web(request)
    fields = urllib.parse.parse_qs(request.url.query, keep_blank_values=True)
    user = None
    try:
        async with state.pool.connection() as conn:
            user = await state.sessions.current(conn, request)
            auth = await validate(conn, state, fields)
        if user is None:
            return redirect(signin_url(_authorize_url(auth.params)))
        return _consent(state, auth, user)
    except PageError as exc:
        return state.pages.error(400, exc.title, exc.message)
    except RedirectError as exc:
        return _redirect_error(state, exc, user)


async def decide(request: Request) -> Response:
    """`POST /oauth/authorize`: the consent form's answer, `decision=approve` or `decision=deny`."""
    state = web(request)
    try:
        fields = await read_form(request)
    except (FormError, PayloadTooLarge):
        return state.pages.error(400, "Bad request", "The form could not be read.")
    user = None
    try:
        async with state.pool.connection() as conn:
            user = await state.sessions.current(conn, request)
            if user is None:  # the session ended meanwhile: sign in again, then see the consent page again
                auth = await validate(conn, state, fields)
                return redirect(signin_url(_authorize_url(auth.params)))
            if not state.sessions.csrf_valid("session", user.session, _first(fields, "csrf_token")):
                return state.pages.forbidden()
            auth = await validate(conn, state, fields)
            scopes = _grantable(state, auth, user)
            decision = _first(fields, "decision")
            if decision == "deny":
                raise RedirectError(auth.redirect_uri, AccessDenied("The user denied the request."), auth.state)
            if decision != "approve" or len(fields.get("decision", [])) != 1:
                return state.pages.error(400, "Bad request", "Choose Allow or Deny.")
            async with conn.transaction():
                code = await state.server.issue_code(
                    conn,
                    client=auth.client,
                    user_id=user.user_id,
                    redirect_uri=auth.redirect_uri,
                    scopes=scopes,
                    challenge=auth.challenge,
                )
                await audit_log.record(
                    conn,
                    "oauth_grant.approved",
                    account_id=user.account_id,
                    actor=audit_log.Actor("user", user.user_id),
                    target_id=auth.client.id,
                    origin=audit_log.Origin.of(request),
                )
    except PageError as exc:
        return state.pages.error(400, exc.title, exc.message)
    except RedirectError as exc:
        return _redirect_error(state, exc, user)
    return redirect(_with_params(auth.redirect_uri, code=code, state=auth.state, iss=state.server.issuer))


async def validate(conn: Connection, state: Web, fields: Fields) -> AuthorizationRequest:
    """The request's client and redirect URI (PageError), then everything else (RedirectError)."""
    client_ids, redirect_uris = fields.get("client_id", []), fields.get("redirect_uri", [])
    if len(client_ids) != 1 or not client_ids[0]:
        raise PageError("Unknown application", "The request does not name one application (client_id).")
    client = await find_client(conn, client_ids[0])
    if client is None:
        raise PageError("Unknown application", "No application is registered with this client_id.")
    if len(redirect_uris) != 1 or not client.accepts_redirect(redirect_uris[0]):
        raise PageError(
            "Invalid redirect URI",
            f"The redirect_uri is missing or is not registered for {client.name}; you have not been sent anywhere.",
        )
    redirect_uri = redirect_uris[0]
    states = fields.get("state", [])
    state_value = states[0] if len(states) == 1 and states[0] else None
    try:
        for name in PARAMS:
            values = fields.get(name, [])
            if len(values) > 1:
                raise InvalidRequest(f"{name} was sent more than once.")
            if values and len(values[0]) > MAX_PARAM_LENGTH:
                raise InvalidRequest(f"{name} is too long.")
        response_type = _first(fields, "response_type")
        if not response_type:
            raise InvalidRequest("response_type is required; use response_type=code.")
        if response_type != "code":
            raise UnsupportedResponseType("Only response_type=code is supported.")
        challenge = check_challenge(_first(fields, "code_challenge"), _first(fields, "code_challenge_method"))
        scopes = state.server.policy.parse(_first(fields, "scope"), client)
    except OAuthError as exc:
        raise RedirectError(redirect_uri, exc, state_value) from exc
    params = [(name, fields[name][0]) for name in PARAMS if name in fields]
    return AuthorizationRequest(client, redirect_uri, scopes, state_value, challenge, params)


def _grantable(state: Web, auth: AuthorizationRequest, user: WebUser) -> list[str]:
    scopes = state.server.policy.grantable(auth.scopes, auth.client, user.role)
    if not scopes:
        error = InvalidScope(f"None of the requested scopes is available to a {user.role}.")
        raise RedirectError(auth.redirect_uri, error, auth.state)
    return scopes


def _consent(state: Web, auth: AuthorizationRequest, user: WebUser) -> Response:
    scopes = _grantable(state, auth, user)
    return state.pages.render(
        "consent.html",
        form_targets=origin_source(auth.redirect_uri),
        user=user,
        client=auth.client,
        scopes=scopes,
        withheld=[scope for scope in auth.scopes if scope not in scopes],
        sentences=state.server.policy.sentences_for(user.role),
        redirect_host=_host(auth.redirect_uri),
        params=auth.params,
    )


def _redirect_error(state: Web, exc: RedirectError, user: WebUser | None) -> Response:
    """The fault sent to the client's redirect URI; before anyone has signed in, an error page instead."""
    if user is None:
        return state.pages.error(400, "Invalid authorization request", exc.error.description)
    location = _with_params(
        exc.redirect_uri,
        error=exc.error.error,
        error_description=exc.error.description,
        state=exc.state,
        iss=state.server.issuer,
    )
    return redirect(location)


def _with_params(uri: str, **params: str | None) -> str:
    """`uri` with parameters added to its query, keeping the registered query as it is (RFC 6749 section 3.1.2)."""
    parts = urllib.parse.urlsplit(uri)
    added = urllib.parse.urlencode({name: value for name, value in params.items() if value is not None})
    return urllib.parse.urlunsplit(parts._replace(query=f"{parts.query}&{added}" if parts.query else added))


def _authorize_url(params: list[tuple[str, str]]) -> str:
    return f"{AUTHORIZE_PATH}?{urllib.parse.urlencode(params)}"


def _host(uri: str) -> str:
    parts = urllib.parse.urlsplit(uri)
    return parts.netloc or f"{parts.scheme}:"


def _first(fields: Mapping[str, list[str]], name: str) -> str | None:
    try:
        return single(fields, name)
    except FormError:
        return None
