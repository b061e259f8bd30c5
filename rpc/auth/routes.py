"""HTTP endpoints of the built-in identity provider: /auth/login, /auth/refresh, /.well-known/jwks.json."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rpc.audit import log as audit_log
from rpc.auth.identity import TokenPair
from rpc.core.envelope import Params, encoder
from rpc.core.params import read_json
from rpc.core.responses import json_response, render
from rpc.services import services

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class Login(Params, frozen=True, kw_only=True):
    email: str
    password: str


class Refresh(Params, frozen=True, kw_only=True):
    refresh_token: str


_login_decoder = msgspec.json.Decoder(Login)
_refresh_decoder = msgspec.json.Decoder(Refresh)


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
    Route("/.well-known/jwks.json", jwks, methods=["GET"]),
]
