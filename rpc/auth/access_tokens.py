"""OAuth 2.0 access tokens: ES256 JWTs in the RFC 9068 profile, signed with the service's key ring.

The header says `typ: at+jwt`, so an access token can never pass for a session token of the built-in
identity provider or the reverse; the issuer and audience differ as well. Claims: `iss` (the authorization
server's issuer identifier, `PUBLIC_URL`, the one its RFC 8414 metadata names), `aud` (`{PUBLIC_URL}/v1`, the
API), `sub` (the user), `client_id`, `scope`, `gid` (the grant: revoking it stops the token), `jti`, `iat`, `exp`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jwt

from rpc.auth.keyring import ACCESS_TOKEN_SECONDS, KeyRing
from rpc.core.errors import InvalidToken, TokenExpired
from rpc.settings import Settings

TYP = "at+jwt"
_TYPES = frozenset({"at+jwt", "application/at+jwt"})  # RFC 9068 section 4: either spelling, any case
_REQUIRED = ["iss", "aud", "sub", "exp", "iat", "jti", "client_id", "scope", "gid"]


def issuer(settings: Settings) -> str:
    """The authorization server's issuer identifier (RFC 8414 section 2): the host, so that its metadata lives at
    `{host}/.well-known/oauth-authorization-server` exactly as RFC 8414 section 3 derives it."""
    return settings.public_url.rstrip("/")


def audience(settings: Settings) -> str:
    """The resource the tokens are for: the API's `{base_url}`."""
    return f"{issuer(settings)}/v1"


def is_access_token(header: dict[str, Any]) -> bool:
    """Whether a JWT header types the token as an OAuth access token."""
    typ = header.get("typ")
    return isinstance(typ, str) and typ.lower() in _TYPES


@dataclass(frozen=True, slots=True)
class AccessClaims:
    """What a verified access token says."""

    user_id: str
    client_id: str
    grant_id: str
    scopes: frozenset[str]
    expires: float


def issue(
    keyring: KeyRing, settings: Settings, *, user_id: str, client_id: str, grant_id: str, scopes: Iterable[str]
) -> str:
    now = int(time.time())
    claims = {
        "iss": issuer(settings),
        "aud": audience(settings),
        "sub": user_id,
        "client_id": client_id,
        "scope": " ".join(scopes),
        "gid": grant_id,
        "jti": uuid.uuid4().hex,
        "iat": now,
        "exp": now + ACCESS_TOKEN_SECONDS,
    }
    return keyring.sign(claims, typ=TYP)


def verify(keyring: KeyRing, settings: Settings, token: str, header: dict[str, Any]) -> AccessClaims:
    """The claims of an access token this service signed; raises InvalidToken or TokenExpired."""
    if not is_access_token(header):
        raise InvalidToken("The token is not an OAuth access token.")
    public_key = keyring.verification_key(header.get("kid"))
    if public_key is None:
        raise InvalidToken()
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            public_key,
            algorithms=["ES256"],
            audience=audience(settings),
            issuer=issuer(settings),
            options={"require": _REQUIRED},
        )
        user_id, grant_id = str(uuid.UUID(str(claims["sub"]))), str(uuid.UUID(str(claims["gid"])))
    except jwt.ExpiredSignatureError as exc:
        raise TokenExpired() from exc
    except (jwt.PyJWTError, ValueError) as exc:
        raise InvalidToken() from exc
    client_id, scope = claims["client_id"], claims["scope"]
    if not isinstance(client_id, str) or not isinstance(scope, str):
        raise InvalidToken()
    return AccessClaims(
        user_id=user_id,
        client_id=client_id,
        grant_id=grant_id,
        scopes=frozenset(scope.split()),
        expires=float(claims["exp"]),
    )
