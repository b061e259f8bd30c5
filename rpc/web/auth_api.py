"""HTTP endpoints of the built-in identity provider: /auth/login, /auth/refresh, /auth/signup,
/auth/password-reset(/confirm), /.well-known/jwks.json."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import msgspec
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rpc.audit import log as audit_log
from rpc.auth.identity import TokenPair
from rpc.auth.people import SignUp, email_problem, invalid, normal_email
from rpc.core.envelope import Params, encoder
from rpc.core.params import read_json
from rpc.core.responses import json_response, render
from rpc.core.types import Connection
from rpc.db.pool import Pool
from rpc.limits.throttle import Throttle
from rpc.services import services

log = logging.getLogger(__name__)

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class Login(Params, frozen=True, kw_only=True):
    email: str
    password: str


class Refresh(Params, frozen=True, kw_only=True):
    refresh_token: str


class ResetRequest(Params, frozen=True, kw_only=True):
    email: str


class ResetConfirm(Params, frozen=True, kw_only=True):
    token: str
    password: str


_login_decoder = msgspec.json.Decoder(Login)
_refresh_decoder = msgspec.json.Decoder(Refresh)
_signup_decoder = msgspec.json.Decoder(SignUp)
_reset_decoder = msgspec.json.Decoder(ResetRequest)
_confirm_decoder = msgspec.json.Decoder(ResetConfirm)
CHECK_EMAIL = b'{"status":"check_email"}'


def client_address(request: Request) -> str:
    """The caller's address as uvicorn's proxy-header support decided it."""
    return request.client.host if request.client else "unknown"


async def login(request: Request) -> Response:
    """Sign in with e-mail and password; throttled per address and per e-mail."""
    state = services(request)
    try:
        params = await read_json(request, _login_decoder, Login, empty_is_object=False)
        await state.throttle.hit_address("signin_address", client_address(request))
        await state.throttle.hit("signin_email", params.email.strip().lower())
        async with state.pool.connection() as conn:
            pair = await state.identity.login(conn, params.email, params.password, audit_log.Origin.of(request))
    except Exception as exc:
        return _no_store(render(exc, "auth.login"))
    return _tokens(pair)


async def refresh(request: Request) -> Response:
    """Rotate a refresh token into a new pair; throttled per address."""
    state = services(request)
    try:
        params = await read_json(request, _refresh_decoder, Refresh, empty_is_object=False)
        await state.throttle.hit_address("signin_address", client_address(request))
        async with state.pool.connection() as conn:
            pair = await state.identity.refresh(conn, params.refresh_token)
    except Exception as exc:
        return _no_store(render(exc, "auth.refresh"))
    return _tokens(pair)


async def signup(request: Request) -> Response:
    """`202 {"status": "check_email"}` whether or not the e-mail has an account (docs/people.md)."""
    state = services(request)
    try:
        params = await read_json(request, _signup_decoder, SignUp, empty_is_object=False)
        await throttle_people(state.throttle, request, params.email)
        async with state.pool.connection() as conn:
            await state.people.sign_up(conn, params)
    except Exception as exc:
        return _no_store(render(exc, "auth.signup"))
    return json_response(CHECK_EMAIL, 202, NO_STORE)


async def password_reset(request: Request) -> Response:
    """`202` always; a known, verified e-mail gets a reset link."""
    state = services(request)
    try:
        params = await read_json(request, _reset_decoder, ResetRequest, empty_is_object=False)
        invalid({"email": email_problem(normal_email(params.email))})
        await throttle_people(state.throttle, request, params.email)
    except Exception as exc:
        return _no_store(render(exc, "auth.password_reset"))
    answer = json_response(CHECK_EMAIL, 202, NO_STORE)
    answer.background = after_answer(state.pool, state.people.request_reset, params.email)
    return answer


async def password_reset_confirm(request: Request) -> Response:
    """Set the password of a reset link's person; every session of theirs ends. `400 invalid_token` for a used,
    expired or unknown token."""
    state = services(request)
    try:
        params = await read_json(request, _confirm_decoder, ResetConfirm, empty_is_object=False)
        await state.throttle.hit_address("people_address", client_address(request))
        async with state.pool.connection() as conn:
            await state.people.reset_password(conn, params.token, params.password, audit_log.Origin.of(request))
    except Exception as exc:
        return _no_store(render(exc, "auth.password_reset.confirm"))
    return json_response(b'{"status":"password_changed"}', headers=NO_STORE)


def after_answer(pool: Pool, work: Callable[[Connection, str], Awaitable[None]], email: str) -> BackgroundTask:
    """`work(conn, email)` once the answer has been sent, on a connection of its own: a request whose answer
    must not tell whether the e-mail is known (reset, a new verification link) answers in the same time either
    way, since the work that differs (a link and its mail, or nothing) happens after it."""

    async def run() -> None:
        try:
            async with pool.connection() as conn:
                await work(conn, email)
        except Exception:  # the answer is gone; the person asks again
            log.exception("could not prepare the mail of an answered request")

    return BackgroundTask(run)


async def throttle_people(throttle: Throttle, request: Request, email: str) -> None:
    """Sign-up, reset and a new verification link: limited per client address (IPv6 per /64) and per e-mail."""
    await throttle.hit_address("people_address", client_address(request))
    await throttle.hit("people_email", normal_email(email))


async def jwks(request: Request) -> Response:
    """The public keys that verify the built-in provider's tokens."""
    document = services(request).keyring.jwks()
    return json_response(encoder.encode(document), headers={"Cache-Control": "public, max-age=300"})


def _tokens(pair: TokenPair) -> Response:
    return json_response(encoder.encode(pair), headers=NO_STORE)


def _no_store(response: Response) -> Response:
    response.headers.update(NO_STORE)
    return response


routes = [
    Route("/auth/login", login, methods=["POST"]),
    Route("/auth/refresh", refresh, methods=["POST"]),
    Route("/auth/signup", signup, methods=["POST"]),
    Route("/auth/password-reset", password_reset, methods=["POST"]),
    Route("/auth/password-reset/confirm", password_reset_confirm, methods=["POST"]),
    Route("/.well-known/jwks.json", jwks, methods=["GET"]),
]
