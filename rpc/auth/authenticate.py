"""From an `Authorization` header to a Principal: API key, built-in session JWT, OAuth access token or
external JWT.

Every credential is checked against the database on each request (revocation is immediate): an API key
by its hash, a JWT's user by id (or by issuer and subject for an external provider), an OAuth access
token's user together with its grant, in the same query (one primary-key lookup of the grant). A credential
seen before is remembered with its lookup (`rpc.auth.remembered`), which each later use runs again as a check.
The lookups' placeholders are all named `credential_*`, so that a check can join any statement's own.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import jwt

from rpc.auth import access_tokens, apikeys
from rpc.auth.external import ExternalProvider
from rpc.auth.keyring import KeyRing
from rpc.auth.principal import CredentialKind, Principal
from rpc.auth.remembered import (
    CredentialCheck,
    Remembered,
    RememberedCredentials,
    StaleCredential,
    remembered,
)
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
WHERE k.key_hash = %(credential_hash)s AND k.revoked_at IS NULL
"""
_TOUCH_API_KEY = """
UPDATE api_keys SET last_used_at = now()
WHERE id = %(credential_key)s AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
"""
_USER_BY_ID = """
SELECT u.id AS user_id, u.account_id, u.role, a.plan
FROM users AS u JOIN accounts AS a ON a.id = u.account_id
WHERE u.id = %(credential_user)s
"""
# The grant's primary key: one indexed lookup, folded into the user lookup. A revoked grant (or a deleted
# client, whose grants go with it) finds no row.
_USER_BY_GRANT = """
SELECT u.id AS user_id, u.account_id, u.role, a.plan, g.scopes
FROM oauth_grants AS g
JOIN users AS u ON u.id = g.user_id
JOIN accounts AS a ON a.id = u.account_id
WHERE g.id = %(credential_grant)s AND g.user_id = %(credential_user)s AND g.client_id = %(credential_client)s
  AND g.revoked_at IS NULL
"""
_USER_BY_IDENTITY = """
SELECT u.id AS user_id, u.account_id, u.role, a.plan
FROM users AS u JOIN accounts AS a ON a.id = u.account_id
WHERE u.issuer = %(credential_issuer)s AND u.subject = %(credential_subject)s
"""
_CREATE_EXTERNAL_USER = """
WITH account AS (
    INSERT INTO accounts (name) VALUES (%(account_name)s) RETURNING id, plan
), created AS (
    INSERT INTO users (account_id, role, email, issuer, subject, display_name)
    SELECT account.id, %(role)s, %(email)s, %(credential_issuer)s, %(credential_subject)s, %(display_name)s FROM account
    ON CONFLICT ON CONSTRAINT users_identity_key DO NOTHING
    RETURNING id, account_id, role
)
SELECT created.id AS user_id, created.account_id, created.role, account.plan
FROM created JOIN account ON account.id = created.account_id
"""


class Authenticator:
    """Resolves bearer credentials; holds the key ring, the optional external provider and what it remembers."""

    def __init__(self, settings: Settings, keyring: KeyRing, external: ExternalProvider | None) -> None:
        self._settings = settings
        self._keyring = keyring
        self._remembered = RememberedCredentials()
        self._external = external

    def remembered(self, authorization: str | None) -> tuple[bytes, Remembered] | None:
        """The remembered credential behind `authorization` (and its digest, to forget it by), if any: to be
        confirmed within the call that uses it."""
        token = _bearer_token(authorization)
        if token is None:
            return None
        digest, memory = self._recall(token)
        return None if memory is None else (digest, memory)

    def forget(self, digest: bytes) -> None:
        """Drop a remembered credential whose check failed: the next use authenticates afresh."""
        self._remembered.forget(digest)

    async def authenticate(self, conn: Connection, authorization: str | None) -> Principal:
        if not authorization:
            raise MissingCredentials()
        token = _bearer_token(authorization)
        if token is None:
            raise InvalidToken("Use the Bearer scheme: 'Authorization: Bearer <token>'.")
        digest, memory = self._recall(token)
        if memory is not None:
            try:
                await CredentialCheck(memory).confirm(conn)
                return memory.principal
            except StaleCredential:
                self._remembered.forget(digest)
        if apikeys.looks_like_key(token):
            memory = await self._api_key(conn, token, digest)
        else:
            memory = await self._jwt(conn, token)
        self._remembered.put(digest, memory)
        return memory.principal

    def _recall(self, token: str) -> tuple[bytes, Remembered | None]:
        """The token's digest (what it is remembered by), and what is remembered of it."""
        digest = token_hash(token)
        return digest, self._remembered.get(digest)

    async def _api_key(self, conn: Connection, token: str, digest: bytes) -> Remembered:
        mode = apikeys.parse_mode(token)
        if mode is None:
            raise InvalidApiKey()
        if mode == "test" and self._settings.production:
            raise InvalidApiKey("Test keys are refused by a production deployment; use a live key.")
        lookup = {"credential_hash": digest}
        row = await _lookup(conn, _API_KEY, lookup)
        if row is None:
            raise InvalidApiKey()
        last_used = row["last_used_at"]
        if last_used is None or dt.datetime.now(dt.UTC) - last_used >= LAST_USED_RESOLUTION:
            await conn.execute(_TOUCH_API_KEY, {"credential_key": row["id"]})
            last_used = dt.datetime.now(dt.UTC)
        next_stamp = (last_used + LAST_USED_RESOLUTION).timestamp()
        return _remember(row, "api_key", frozenset(row["scopes"]), _API_KEY, lookup, next_stamp)

    async def _jwt(self, conn: Connection, token: str) -> Remembered:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken("The token is malformed.") from exc
        if access_tokens.is_access_token(header):
            return await self._access_token(conn, token, header)
        public_key = self._keyring.verification_key(header.get("kid"))
        if public_key is not None:
            claims = _decode_builtin(token, public_key, self._settings.issuer)
            return await self._user(conn, _USER_BY_ID, {"credential_user": claims["sub"]}, claims["exp"])
        if self._external is None:
            raise InvalidToken()
        claims = await self._external.verify(token, header)
        identity = {"credential_issuer": claims["iss"], "credential_subject": str(claims["sub"])}
        try:
            return await self._user(conn, _USER_BY_IDENTITY, identity, claims["exp"])
        except InvalidToken:
            return await self._first_sight(conn, claims, identity)

    async def _access_token(self, conn: Connection, token: str, header: dict[str, Any]) -> Remembered:
        """An OAuth access token: exactly the scopes it was granted, while its grant stands."""
        claims = access_tokens.verify(self._keyring, self._settings, token, header)
        lookup = {
            "credential_grant": claims.grant_id,
            "credential_user": claims.user_id,
            "credential_client": claims.client_id,
        }
        row = await _lookup(conn, _USER_BY_GRANT, lookup)
        if row is None:
            raise InvalidToken("The token's authorization was revoked.")
        scopes = claims.scopes & frozenset(row["scopes"])
        return _remember(row, "oauth", scopes, _USER_BY_GRANT, lookup, claims.expires)

    async def _user(self, conn: Connection, query: str, lookup: dict[str, Any], expires: float) -> Remembered:
        row = await _lookup(conn, query, lookup)
        if row is None:
            raise InvalidToken("The token's user does not exist.")
        return _remember(row, "session", None, query, lookup, expires)

    async def _first_sight(self, conn: Connection, claims: dict[str, Any], identity: dict[str, str]) -> Remembered:
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
            "account_name": (email or identity["credential_subject"])[:200],
            "display_name": claims["name"] if isinstance(claims.get("name"), str) else None,
        }
        try:
            async with conn.transaction():
                row = await _lookup(conn, _CREATE_EXTERNAL_USER, params)
                if row is None:
                    raise _LostRace()
        except _LostRace:  # a concurrent request created the user first; its account stands, ours rolled back
            return await self._user(conn, _USER_BY_IDENTITY, identity, claims["exp"])
        return _remember(row, "session", None, _USER_BY_IDENTITY, identity, claims["exp"])


class _LostRace(Exception):
    """Rolls back the account made for a user that a concurrent request created first."""


def _bearer_token(authorization: str | None) -> str | None:
    """The token of a well-formed `Bearer <token>` header, else None."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


async def _lookup(conn: Connection, query: str, values: dict[str, Any]) -> dict[str, Any] | None:
    cursor = await conn.execute(query, values)
    return await cursor.fetchone()


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


def _remember(
    row: dict[str, Any],
    credential: CredentialKind,
    scopes: frozenset[str] | None,
    lookup: str,
    lookup_values: dict[str, Any],
    fresh_until: float,
) -> Remembered:
    """The principal of a lookup's row, remembered with that lookup as its check."""
    principal = Principal(
        user_id=str(row["user_id"]),
        account_id=str(row["account_id"]),
        role=row["role"],
        plan=row["plan"],
        credential=credential,
        scopes=scopes,
    )
    return remembered(principal, lookup, lookup_values, row, fresh_until)
