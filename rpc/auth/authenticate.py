"""From an `Authorization` header to a Principal: API key, built-in session JWT, OAuth access token or
external JWT.

Every credential is checked against the database on each request (revocation is immediate): an API key
by its hash, a JWT's user by id (or by issuer and subject for an external provider), an OAuth access
token's user together with its grant, in the same query (one primary-key lookup of the grant).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections import OrderedDict
from typing import Any

import jwt

from rpc.auth import access_tokens, apikeys
from rpc.auth.external import ExternalProvider
from rpc.auth.keyring import KeyRing
from rpc.auth.principal import CredentialKind, Principal
from rpc.crypto import token_hash
from rpc.errors import InvalidApiKey, InvalidToken, MissingCredentials, TokenExpired
from rpc.settings import Settings
from rpc.types import ROLES, Connection

AUDIENCE = "hire-api"
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)

_API_KEY = """
SELECT k.id, k.scopes, k.mode, k.last_used_at, u.id AS user_id, u.account_id, u.role, a.plan
FROM api_keys AS k
JOIN users AS u ON u.id = k.user_id
JOIN accounts AS a ON a.id = u.account_id
WHERE k.key_hash = %(hash)s AND k.revoked_at IS NULL
"""
_TOUCH_API_KEY = """
UPDATE api_keys SET last_used_at = now()
WHERE id = %(id)s AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
"""
_USER_BY_ID = """
SELECT u.id AS user_id, u.account_id, u.role, a.plan
FROM users AS u JOIN accounts AS a ON a.id = u.account_id
WHERE u.id = %(id)s
"""
# The grant's primary key: one indexed lookup, folded into the user lookup. A revoked grant (or a deleted
# client, whose grants go with it) finds no row.
_USER_BY_GRANT = """
SELECT u.id AS user_id, u.account_id, u.role, a.plan, g.scopes
FROM oauth_grants AS g
JOIN users AS u ON u.id = g.user_id
JOIN accounts AS a ON a.id = u.account_id
WHERE g.id = %(grant_id)s AND g.user_id = %(user_id)s AND g.client_id = %(client_id)s AND g.revoked_at IS NULL
"""
_USER_BY_IDENTITY = """
SELECT u.id AS user_id, u.account_id, u.role, a.plan
FROM users AS u JOIN accounts AS a ON a.id = u.account_id
WHERE u.issuer = %(issuer)s AND u.subject = %(subject)s
"""
_CREATE_EXTERNAL_USER = """
WITH account AS (
    INSERT INTO accounts (name) VALUES (%(account_name)s) RETURNING id, plan
), created AS (
    INSERT INTO users (account_id, role, email, issuer, subject, display_name)
    SELECT account.id, %(role)s, %(email)s, %(issuer)s, %(subject)s, %(display_name)s FROM account
    ON CONFLICT ON CONSTRAINT users_identity_key DO NOTHING
    RETURNING id, account_id, role
)
SELECT created.id AS user_id, created.account_id, created.role, account.plan
FROM created JOIN account ON account.id = created.account_id
"""


class Authenticator:
    """Resolves bearer credentials; holds the key ring and the optional external provider."""

    def __init__(self, settings: Settings, keyring: KeyRing, external: ExternalProvider | None) -> None:
        self._settings = settings
        self._keyring = keyring
        self._recent = RecentSessionTokens()
        self._external = external

    async def authenticate(self, conn: Connection, authorization: str | None) -> Principal:
        if not authorization:
            raise MissingCredentials()
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise InvalidToken("Use the Bearer scheme: 'Authorization: Bearer <token>'.")
        if apikeys.looks_like_key(token):
            return await self._api_key(conn, token)
        return await self._jwt(conn, token)

    async def _api_key(self, conn: Connection, token: str) -> Principal:
        mode = apikeys.parse_mode(token)
        if mode is None:
            raise InvalidApiKey()
        if mode == "test" and self._settings.production:
            raise InvalidApiKey("Test keys are refused by a production deployment; use a live key.")
        cursor = await conn.execute(_API_KEY, {"hash": token_hash(token)})
        row = await cursor.fetchone()
        if row is None:
            raise InvalidApiKey()
        last_used = row["last_used_at"]
        if last_used is None or dt.datetime.now(dt.UTC) - last_used >= LAST_USED_RESOLUTION:
            await conn.execute(_TOUCH_API_KEY, {"id": row["id"]})
        return _principal(row, "api_key", frozenset(row["scopes"]))

    async def _jwt(self, conn: Connection, token: str) -> Principal:
        subject = self._recent.subject(token)
        if subject is not None:
            return await self._user(conn, _USER_BY_ID, {"id": subject})
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken("The token is malformed.") from exc
        if access_tokens.is_access_token(header):
            return await self._access_token(conn, token, header)
        public_key = self._keyring.verification_key(header.get("kid"))
        if public_key is not None:
            claims = _decode_builtin(token, public_key, self._settings.issuer)
            self._recent.remember(token, claims["sub"], claims["exp"])
            return await self._user(conn, _USER_BY_ID, {"id": claims["sub"]})
        if self._external is None:
            raise InvalidToken()
        claims = await self._external.verify(token, header)
        identity = {"issuer": claims["iss"], "subject": str(claims["sub"])}
        try:
            return await self._user(conn, _USER_BY_IDENTITY, identity)
        except InvalidToken:
            return await self._first_sight(conn, claims, identity)

    async def _access_token(self, conn: Connection, token: str, header: dict[str, Any]) -> Principal:
        """An OAuth access token: exactly the scopes it was granted, while its grant stands."""
        claims = access_tokens.verify(self._keyring, self._settings, token, header)
        params = {"grant_id": claims.grant_id, "user_id": claims.user_id, "client_id": claims.client_id}
        cursor = await conn.execute(_USER_BY_GRANT, params)
        row = await cursor.fetchone()
        if row is None:
            raise InvalidToken("The token's authorization was revoked.")
        return _principal(row, "oauth", claims.scopes & frozenset(row["scopes"]))

    async def _user(self, conn: Connection, query: str, params: dict[str, Any]) -> Principal:
        cursor = await conn.execute(query, params)
        row = await cursor.fetchone()
        if row is None:
            raise InvalidToken("The token's user does not exist.")
        return _principal(row, "session", None)

    async def _first_sight(self, conn: Connection, claims: dict[str, Any], identity: dict[str, str]) -> Principal:
        """Create the user of a new (iss, sub) pair: a candidate unless a provider-controlled claim says employer."""
        role = "candidate"
        claim = self._settings.auth_role_claim
        if claim and claims.get(claim) in ROLES and claims[claim] != "admin":
            role = claims[claim]
        email = claims.get("email")
        email = email.lower() if isinstance(email, str) else None
        params = {
            **identity,
            "role": role,
            "email": email,
            "account_name": (email or identity["subject"])[:200],
            "display_name": claims["name"] if isinstance(claims.get("name"), str) else None,
        }
        try:
            async with conn.transaction():
                cursor = await conn.execute(_CREATE_EXTERNAL_USER, params)
                row = await cursor.fetchone()
                if row is None:
                    raise _LostRace()
        except _LostRace:  # a concurrent request created the user first; its account stands, ours rolled back
            return await self._user(conn, _USER_BY_IDENTITY, identity)
        return _principal(row, "session", None)


class _LostRace(Exception):
    """Rolls back the account made for a user that a concurrent request created first."""


class RecentSessionTokens:
    """The subjects of recently verified session tokens of the built-in provider, until their `exp`.

    Such a token cannot be revoked before it expires, and its user is still read from the database on every
    request (so a removed user is refused at once): remembering the signature check saves a busy client an
    ECDSA verification per call. Bounded: the least recently used token is forgotten first.
    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._tokens: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def subject(self, token: str) -> str | None:
        entry = self._tokens.get(token)
        if entry is None:
            return None
        if entry[1] <= time.time():
            del self._tokens[token]  # expired: verified again, to answer token_expired
            return None
        self._tokens.move_to_end(token)
        return entry[0]

    def remember(self, token: str, subject: str, expires: float) -> None:
        self._tokens[token] = (subject, expires)
        if len(self._tokens) > self._size:
            self._tokens.popitem(last=False)


def _decode_builtin(token: str, public_key: Any, issuer: str) -> dict[str, Any]:
    """The claims of a token of the built-in provider; same clock, so no leeway."""
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            public_key,
            algorithms=["ES256"],
            audience=AUDIENCE,
            issuer=issuer,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
        )
        uuid.UUID(str(claims["sub"]))
    except jwt.ExpiredSignatureError as exc:
        raise TokenExpired() from exc
    except (jwt.PyJWTError, ValueError) as exc:
        raise InvalidToken() from exc
    return claims


def _principal(row: dict[str, Any], credential: CredentialKind, scopes: frozenset[str] | None) -> Principal:
    return Principal(
        user_id=str(row["user_id"]),
        account_id=str(row["account_id"]),
        role=row["role"],
        plan=row["plan"],
        credential=credential,
        scopes=scopes,
    )
