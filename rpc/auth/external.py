"""Verification of an external identity provider's JWTs (the `AUTH_*` settings).

Keys come from the provider's JWKS document, fetched asynchronously with a timeout, cached, and fetched
again on an unknown `kid` at most every 30 seconds; or from a shared HS256 secret (Supabase style). The fetch is
`prepare`'s, made before a request takes a database connection: `verify`, which runs on the request's
connection, only reads the keys fetched, so that no connection waits on the provider (a slow or hanging JWKS
would otherwise hold one per request with an unknown `kid` for up to the fetch's timeout).
Only the configured algorithms are accepted, and a JWKS provider may never use an HS algorithm, so a
token signed with a public key as an HMAC secret cannot pass.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt

from rpc.core.errors import InvalidToken, TokenExpired
from rpc.settings import Settings

log = logging.getLogger(__name__)

CLOCK_LEEWAY_SECONDS = 30
REFETCH_INTERVAL_SECONDS = 30.0
FETCH_TIMEOUT_SECONDS = 5.0
MAX_SUBJECT_LENGTH = 255  # OpenID Connect Core section 2: `sub` must not exceed 255 ASCII characters


class ExternalProvider:
    """Checks tokens of the one configured external provider and returns their verified claims."""

    def __init__(
        self, settings: Settings, http: httpx.AsyncClient, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if settings.auth_audience is None:  # refused in production (Settings.validate)
            log.warning(
                "AUTH_AUDIENCE is not set: tokens the identity provider minted for any of its APIs are accepted; "
                "set it to this API's audience"
            )
        self._settings = settings
        self._http = http
        self._clock = clock  # tests pass their own
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._lock = asyncio.Lock()

    @property
    def issuer(self) -> str | None:
        return self._settings.auth_issuer

    async def verify(self, token: str, header: dict[str, Any]) -> dict[str, Any]:
        settings = self._settings
        if header.get("alg") not in settings.auth_algorithms:
            raise InvalidToken("The token's algorithm is not accepted.")
        key: Any = settings.auth_jwt_secret or self._key(header.get("kid"))
        required = ["exp", "iss", "sub"] + (["aud"] if settings.auth_audience else [])
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(settings.auth_algorithms),
                issuer=settings.auth_issuer,
                audience=settings.auth_audience,
                leeway=CLOCK_LEEWAY_SECONDS,
                options={"require": required, "verify_aud": settings.auth_audience is not None},
            )
        except jwt.ExpiredSignatureError as exc:
            raise TokenExpired() from exc
        except jwt.PyJWTError as exc:
            raise InvalidToken() from exc
        subject = claims["sub"]
        if not isinstance(subject, str) or not 0 < len(subject) <= MAX_SUBJECT_LENGTH:
            raise InvalidToken("The token's subject (sub) must have 1 to 255 characters.")
        return claims

    async def prepare(self, header: dict[str, Any]) -> None:
        """Before the request takes a connection: the provider's keys fetched again when the token names one not
        seen (at most every 30 seconds; while one fetch runs, the others wait for it, holding nothing)."""
        kid = header.get("kid")
        if self._settings.auth_jwks_url and isinstance(kid, str) and kid not in self._keys:
            await self._refetch()

    def _key(self, kid: object) -> Any:
        if not isinstance(kid, str):
            raise InvalidToken("The token names no key (kid).")
        found = self._keys.get(kid)
        if found is None:
            raise InvalidToken("The token's key (kid) is unknown.")
        return found  # a PyJWK binds its algorithm: a header naming another kind of key is refused

    async def _refetch(self) -> None:
        async with self._lock:
            if self._clock() - self._fetched_at < REFETCH_INTERVAL_SECONDS:
                return
            self._fetched_at = self._clock()
            url = self._settings.auth_jwks_url
            assert url is not None
            try:
                response = await self._http.get(url, timeout=FETCH_TIMEOUT_SECONDS)
                response.raise_for_status()
                keys = jwt.PyJWKSet.from_dict(response.json()).keys
            except (httpx.HTTPError, jwt.PyJWTError, ValueError) as exc:
                log.warning("cannot fetch the identity provider's keys: %s", type(exc).__name__)
                return
            self._keys = {key.key_id: key for key in keys if key.key_id}
