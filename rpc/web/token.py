"""`POST /oauth/token`, `POST /oauth/revoke` and `GET /.well-known/oauth-authorization-server`.

Bodies are form-encoded (RFC 6749 section 4.1.3) or a JSON object of strings; a parameter sent twice is
`invalid_request`. Clients authenticate with HTTP Basic (`client_secret_basic`, id and secret form-encoded
first, RFC 6749 section 2.3.1) or `client_secret` in the body (`client_secret_post`); public clients send
`client_id` alone (`none`). Every answer, success or error, carries `Cache-Control: no-store`; errors are
RFC 6749 section 5.2 bodies `{"error", "error_description"}`, `invalid_client` with `401` and a Basic challenge.
Both endpoints are throttled per client address and per (claimed) client id.
"""

from __future__ import annotations

import base64
import binascii
import logging
import urllib.parse
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rpc.auth import access_tokens
from rpc.auth.oauth import TokenResponse
from rpc.auth.oauth_errors import InvalidClient, InvalidRequest, OAuthError, UnsupportedGrantType
from rpc.core.database_errors import translate
from rpc.core.envelope import encoder
from rpc.core.errors import InvalidJson, RpcError
from rpc.core.params import decode_json, is_json, read_body
from rpc.core.responses import json_response
from rpc.dispatch.dispatcher import ANY_METHOD
from rpc.web.auth_api import NO_STORE, client_address
from rpc.web.forms import FORM, MAX_FORM_BYTES, FormError, media_type, parse_form
from rpc.web.state import Web, web

log = logging.getLogger(__name__)

BASIC_CHALLENGE = 'Basic realm="oauth", charset="UTF-8"'
AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]


async def token(request: Request) -> Response:
    """The token endpoint: `authorization_code` and `refresh_token` grants."""
    state = web(request)
    if request.method != "POST":
        return _post_only()
    try:
        params = await _read(request, state)
        async with state.pool.connection() as conn:
            client = await state.server.authenticate_client(conn, *_credentials(request, params))
            grant_type = params.get("grant_type")
            answer: TokenResponse
            if grant_type == "authorization_code":
                answer = await state.server.exchange_code(
                    conn, client, params.get("code"), params.get("redirect_uri"), params.get("code_verifier")
                )
            elif grant_type == "refresh_token":
                answer = await state.server.refresh(conn, client, params.get("refresh_token"), params.get("scope"))
            elif not grant_type:
                raise InvalidRequest("grant_type is required.")
            else:
                raise UnsupportedGrantType("Supported grant types: authorization_code, refresh_token.")
    except Exception as exc:
        return _error(exc)
    return json_response(encoder.encode(answer), headers=NO_STORE)


async def revoke(request: Request) -> Response:
    """The revocation endpoint (RFC 7009): `200` for any token once the client has authenticated."""
    state = web(request)
    if request.method != "POST":
        return _post_only()
    try:
        params = await _read(request, state)
        async with state.pool.connection() as conn:
            client = await state.server.authenticate_client(conn, *_credentials(request, params))
            await state.server.revoke(conn, client, params.get("token"))
    except Exception as exc:
        return _error(exc)
    return Response(status_code=200, headers=NO_STORE)


async def metadata(request: Request) -> Response:
    """RFC 8414 authorization server metadata."""
    state = web(request)
    issuer = access_tokens.issuer(state.settings)
    document = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/oauth/authorize",
        "token_endpoint": f"{issuer}/oauth/token",
        "revocation_endpoint": f"{issuer}/oauth/revoke",
        "jwks_uri": f"{issuer}/.well-known/jwks.json",
        "scopes_supported": list(state.server.policy.every_scope),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        "authorization_response_iss_parameter_supported": True,
        "service_documentation": f"{issuer}/openapi.json",
    }
    return json_response(encoder.encode(document), headers={"Cache-Control": "public, max-age=300"})


async def _read(request: Request, state: Web) -> dict[str, str]:
    """The body's parameters, once each; counted against the address before anything else, and against the
    client it names before that client is checked."""
    await state.throttle.hit_address("oauth_token_address", client_address(request))
    body = await read_body(request, MAX_FORM_BYTES)
    kind = media_type(request)
    if kind == FORM:
        try:
            fields = parse_form(body)
        except FormError as exc:
            raise InvalidRequest(str(exc)) from exc
        repeated = sorted(name for name, values in fields.items() if len(values) > 1)
        if repeated:
            raise InvalidRequest(f"Parameters sent more than once: {', '.join(repeated)}.")
        params = {name: values[0] for name, values in fields.items()}
    elif is_json(request.headers.get("content-type", "")):
        params = _json_params(body)
    else:
        raise InvalidRequest(f"Send the parameters as {FORM} (or a JSON object).")
    claimed = params.get("client_id") or _basic_client_id(request)
    if claimed:
        await state.throttle.hit("oauth_token_client", claimed[:64])
    return params


def _json_params(body: bytes) -> dict[str, str]:
    try:
        data = decode_json(body or b"null")
    except InvalidJson as exc:
        raise InvalidRequest(exc.message) from exc
    if not isinstance(data, dict):
        raise InvalidRequest("The body must be a JSON object.")
    wrong = sorted(name for name, value in data.items() if not isinstance(value, str))
    if wrong:
        raise InvalidRequest(f"Parameters must be strings: {', '.join(wrong)}.")
    return data


def _basic(request: Request) -> tuple[str, str] | None:
    """The (client_id, secret) of an HTTP Basic header, each form-decoded (RFC 6749 section 2.3.1)."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        raise InvalidClient("Authenticate the client with HTTP Basic or client_secret in the body.")
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as exc:
        raise InvalidClient("The Basic credentials are malformed.") from exc
    client_id, colon, secret = decoded.partition(":")
    if not colon:
        raise InvalidClient("The Basic credentials are malformed.")
    return urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)


def _basic_client_id(request: Request) -> str | None:
    try:
        basic = _basic(request)
    except InvalidClient:
        return None
    return basic[0] if basic else None


def _credentials(request: Request, params: dict[str, str]) -> tuple[str | None, str | None]:
    """The client id and secret, by exactly one method."""
    basic = _basic(request)
    if basic is None:
        return params.get("client_id"), params.get("client_secret") or None
    if "client_secret" in params:
        raise InvalidRequest("Use one client authentication method: HTTP Basic or client_secret, not both.")
    client_id, secret = basic
    if params.get("client_id", client_id) != client_id:
        raise InvalidRequest("client_id differs from the one in the Basic credentials.")
    return client_id, secret or None


def _error(exc: Exception) -> Response:
    """An RFC 6749 section 5.2 body for every failure, with `no-store`."""
    headers = dict(NO_STORE)
    if isinstance(exc, OAuthError):
        status, error, description = exc.status, exc.error, exc.description
        if isinstance(exc, InvalidClient):
            headers["WWW-Authenticate"] = BASIC_CHALLENGE
    else:
        rpc_error = _as_rpc_error(exc)
        status, error, description = rpc_error.status, rpc_error.code, rpc_error.message
        headers.update(rpc_error.headers())
    body: dict[str, Any] = {"error": error, "error_description": description}
    return json_response(encoder.encode(body), status, headers)


def _post_only() -> Response:
    """405 in the endpoint's own error shape, `no-store` included."""
    body = {"error": "invalid_request", "error_description": "Use POST."}
    return json_response(encoder.encode(body), 405, {**NO_STORE, "Allow": "POST"})


def _as_rpc_error(exc: Exception) -> RpcError:
    if isinstance(exc, RpcError):
        return exc  # rate_limited (429, Retry-After), payload_too_large (413)
    if isinstance(exc, psycopg.Error | PoolTimeout):
        translated = translate(exc, None)
        if translated is not None:
            return translated
    log.error("unhandled error in the OAuth token endpoint", exc_info=exc)
    return RpcError()


routes = [
    Route("/oauth/token", token, methods=ANY_METHOD),
    Route("/oauth/revoke", revoke, methods=ANY_METHOD),
    Route("/.well-known/oauth-authorization-server", metadata, methods=["GET"]),
]
