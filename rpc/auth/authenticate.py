"""From an `Authorization` header to a Credential: API key, built-in session JWT, OAuth access token or
external JWT.

Every use of a credential is checked against the database (revocation is immediate): an API key by its hash,
a JWT's user by id (or by issuer and subject for an external provider) while the key that signed it is not
retired, an OAuth access token's user together with its grant, in the same query (one primary-key lookup of
the grant). A credential seen before is remembered with its lookup (`rpc.auth.remembered`), which each later
use runs again: one indexed statement, and no parsing or signature check. `confirm` runs it once more inside a
write's transaction, after the body has arrived (docs/security.md). The remembered lookup can also carry a
procedure's probes (scalar queries such as a version of the data a cache depends on), so that a cached read
is still one statement.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

import jwt

from rpc.auth import access_tokens, apikeys
from rpc.auth.external import ExternalProvider
from rpc.auth.keyring import KeyRing
from rpc.auth.remembered import Credential, RememberedCredentials, principal_of
from rpc.auth.validity import still_valid
from rpc.core.crypto import token_hash
from rpc.core.errors import InvalidApiKey, InvalidToken, MissingCredentials, TokenExpired, Unauthenticated
from rpc.core.principal import CredentialKind, Principal
from rpc.core.types import ROLES, Connection
from rpc.settings import Settings

AUDIENCE = "hire-api"
# The user's session epoch when the token was issued: a password reset or change, a removal from the team or
# "sign out everywhere" raises the epoch, and every session token issued before stops at its next use.
SESSION_EPOCH_CLAIM = "sep"
_NO_PROBES: Mapping[str, str] = {}
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)

_API_KEY = f"""
SELECT k.id, k.scopes, k.last_used_at, u.id AS user_id, u.account_id, u.role, a.plan
FROM api_keys AS k
JOIN users AS u ON u.id = k.user_id
JOIN accounts AS a ON a.id = u.account_id
WHERE k.key_hash = %(credential_hash)s AND {still_valid(revocable="k")}
"""
_TOUCH_API_KEY = """
UPDATE api_keys SET last_used_at = now()
WHERE id = %(credential_key)s AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
"""
# A token of the built-in provider holds while the credential rule does and its user is at the session epoch it
# was issued in.
_USER_BY_ID = f"""
SELECT u.id AS user_id, u.account_id, u.role, a.plan
FROM users AS u JOIN accounts AS a ON a.id = u.account_id
WHERE u.id = %(credential_user)s AND u.session_epoch = %(credential_epoch)s AND {still_valid(signed=True)}
"""
# The grant's primary key: one indexed lookup, folded into the user lookup. A revoked grant (or a deleted
# client, whose grants go with it) finds no row.
_USER_BY_GRANT = f"""
SELECT u.id AS user_id, u.account_id, u.role, a.plan, g.scopes, g.client_id
FROM oauth_grants AS g
JOIN users AS u ON u.id = g.user_id
JOIN accounts AS a ON a.id = u.account_id
WHERE g.id = %(credential_grant)s AND g.user_id = %(credential_user)s AND g.client_id = %(credential_client)s
  AND {still_valid(revocable="g", signed=True)}
"""
_USER_BY_IDENTITY = f"""
SELECT u.id AS user_id, u.account_id, u.role, a.plan
FROM users AS u JOIN accounts AS a ON a.id = u.account_id
WHERE u.issuer = %(credential_issuer)s AND u.subject = %(credential_subject)s AND {still_valid()}
"""
_CREATE_EXTERNAL_USER = """
WITH account AS (
    INSERT INTO accounts (name) VALUES (%(account_name)s) RETURNING id, plan
), created AS (
    INSERT INTO users (account_id, role, email, email_verified_at, issuer, subject, display_name)
    SELECT account.id, %(role)s, %(email)s, CASE WHEN %(email_verified)s THEN now() END, %(credential_issuer)s,
           %(credential_subject)s, %(display_name)s
    FROM account
    ON CONFLICT ON CONSTRAINT users_identity_key DO NOTHING
    RETURNING id, account_id, role
)
SELECT created.id AS user_id, created.account_id, created.role, account.plan
FROM created JOIN account ON account.id = created.account_id
"""

# What a bearer credential that is neither of the service's kinds gets told (an `sk_live_…` key of another
# service, a truncated paste): the two shapes it accepts, and where each comes from.
NOT_A_CREDENTIAL = (
    "The bearer credential is neither an API key nor a token of this service. API keys start with service_live_ "
    "or service_test_ (create one in the panel's Settings > API keys, or with bin/admin create-api-key); tokens "
    "are JWTs, three base64url parts joined by dots (from /auth/login or /oauth/token)."
)


def _gone(kind: CredentialKind) -> Unauthenticated:
    """What a credential whose lookup no longer finds its row is told."""
    if kind == "api_key":
        return InvalidApiKey()
    if kind == "oauth":
        return InvalidToken("The token's authorization was revoked.")
    return InvalidToken(
        "The token's user, or the key that signed it, no longer exists, or its sessions were ended (a password "
        "change, a removal from the team, or signing out everywhere)."
    )


class Authenticator:
    """Resolves bearer credentials; holds the key ring, the optional external provider and what it remembers."""

    def __init__(self, settings: Settings, keyring: KeyRing, external: ExternalProvider | None) -> None:
        self._settings = settings
        self._keyring = keyring
        self._remembered = RememberedCredentials()
        self._external = external
        self._probing: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}

    async def authenticate(
        self, conn: Connection, authorization: str | None, probes: Mapping[str, str] = _NO_PROBES
    ) -> tuple[Credential, dict[str, Any]]:
        """The credential behind the header, looked up in the database now; and the values of `probes` (name →
        a scalar query), read in the same statement when the credential is remembered (else none: the
        procedure reads them itself)."""
        if not authorization:
            raise MissingCredentials()
        token = _bearer_token(authorization)
        if token is None:
            raise InvalidToken("Use the Bearer scheme: 'Authorization: Bearer <token>'.")
        digest = token_hash(token)
        memory = self._remembered.get(digest)
        if memory is not None:
            principal, probed = await self._look_up(conn, memory, probes)
            return (memory if principal == memory.principal else self._remember(memory, principal)), probed
        if apikeys.looks_like_key(token):
            credential = await self._api_key(conn, token, digest)
        else:
            credential = await self._jwt(conn, token, digest)
        self._remembered.put(digest, credential)
        return credential, {}

    async def prepare(self, authorization: str | None) -> None:
        """What the credential check needs from outside the database, done before the request takes a connection:
        the external identity provider's keys, when its token names one not yet fetched."""
        external = self._external
        if external is None or not authorization:
            return
        token = _bearer_token(authorization)
        if token is None or apikeys.looks_like_key(token) or self._remembered.get(token_hash(token)) is not None:
            return
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return  # refused by `authenticate`, with its reason
        if self._keyring.verification_key(header.get("kid")) is None:
            await external.prepare(header)

    async def confirm(self, conn: Connection, credential: Credential) -> Principal:
        """The credential's principal as the database has it now (its role, plan or scopes may have changed);
        401 when its lookup no longer finds it (revoked, user removed, key retired)."""
        principal, _ = await self._look_up(conn, credential, _NO_PROBES)
        return principal

    async def _look_up(
        self, conn: Connection, credential: Credential, probes: Mapping[str, str]
    ) -> tuple[Principal, dict[str, Any]]:
        cursor = await conn.execute(self._with_probes(credential.lookup, probes), credential.values)
        row = await cursor.fetchone()
        if row is None:
            self._remembered.forget(credential.digest)
            raise _gone(credential.principal.credential)
        return credential.resolve(row), {name: row[f"probe_{name}"] for name in probes}

    def _with_probes(self, lookup: str, probes: Mapping[str, str]) -> str:
        """The lookup, with each probe a column of its one row (composed once per lookup and set of probes)."""
        if not probes:
            return lookup
        key = (lookup, tuple(probes.items()))
        query = self._probing.get(key)
        if query is None:
            columns = "".join(f", ({sql}) AS probe_{name}" for name, sql in probes.items())
            query = self._probing[key] = f"SELECT credential.*{columns} FROM ({lookup}) AS credential"
        return query

    def _remember(self, memory: Credential, principal: Principal) -> Credential:
        changed = Credential(
            principal=principal,
            digest=memory.digest,
            lookup=memory.lookup,
            values=memory.values,
            token_scopes=memory.token_scopes,
            fresh_until=memory.fresh_until,
        )
        self._remembered.put(memory.digest, changed)
        return changed

    async def _api_key(self, conn: Connection, token: str, digest: bytes) -> Credential:
        mode = apikeys.parse_mode(token)
        if mode is None:
            raise InvalidApiKey("The API key looks mistyped: its checksum does not match. Copy it again.")
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
        return _credential("api_key", row, digest, _API_KEY, lookup, None, next_stamp)

    async def _jwt(self, conn: Connection, token: str, digest: bytes) -> Credential:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(NOT_A_CREDENTIAL) from exc
        kid = header.get("kid")
        await self._keyring.learn(conn, kid)
        public_key = self._keyring.verification_key(kid)
        if public_key is not None:  # signed by this service: an OAuth access token or a session token
            live_key = {"credential_kid": kid}
            if access_tokens.is_access_token(header):
                return await self._access_token(conn, token, header, digest, live_key)
            claims = _decode_builtin(token, public_key, self._settings.issuer)
            lookup = {
                "credential_user": claims["sub"],
                "credential_epoch": claims.get(SESSION_EPOCH_CLAIM, 0),
                **live_key,
            }
            return await self._user(conn, _USER_BY_ID, lookup, digest, claims["exp"])
        if self._external is None:
            raise InvalidToken("The token was not signed by a key this service knows.")
        claims = await self._external.verify(token, header)
        identity = {"credential_issuer": claims["iss"], "credential_subject": str(claims["sub"])}
        row = await _lookup(conn, _USER_BY_IDENTITY, identity)
        if row is None:
            row = await self._first_sight(conn, claims, identity)
        return _credential("session", row, digest, _USER_BY_IDENTITY, identity, None, claims["exp"])

    async def _access_token(
        self, conn: Connection, token: str, header: dict[str, Any], digest: bytes, live_key: dict[str, Any]
    ) -> Credential:
        """An OAuth access token: exactly the scopes it was granted, while its grant stands."""
        claims = access_tokens.verify(self._keyring, self._settings, token, header)
        lookup = {
            "credential_grant": claims.grant_id,
            "credential_user": claims.user_id,
            "credential_client": claims.client_id,
            **live_key,
        }
        row = await _lookup(conn, _USER_BY_GRANT, lookup)
        if row is None:
            raise _gone("oauth")
        return _credential("oauth", row, digest, _USER_BY_GRANT, lookup, claims.scopes, claims.expires)

    async def _user(
        self, conn: Connection, query: str, lookup: dict[str, Any], digest: bytes, expires: float
    ) -> Credential:
        row = await _lookup(conn, query, lookup)
        if row is None:
            raise _gone("session")
        return _credential("session", row, digest, query, lookup, None, expires)

    async def _first_sight(self, conn: Connection, claims: dict[str, Any], identity: dict[str, str]) -> dict[str, Any]:
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
            # The provider's word that the address is the person's (OpenID Connect's `email_verified`): what a
            # sign-up's link proves for people of the built-in provider (mail, such as job alerts, needs it).
            "email_verified": email is not None and claims.get("email_verified") is True,
            "account_name": (email or identity["credential_subject"])[:200],
            "display_name": claims["name"] if isinstance(claims.get("name"), str) else None,
        }
        try:
            async with conn.transaction():
                row = await _lookup(conn, _CREATE_EXTERNAL_USER, params)
                if row is None:
                    raise _LostRace()
        except _LostRace:  # a concurrent request created the user first; its account stands, ours rolled back
            row = await _lookup(conn, _USER_BY_IDENTITY, identity)
            if row is None:
                raise _gone("session") from None
        return row


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
        if not isinstance(claims.get(SESSION_EPOCH_CLAIM, 0), int):
            raise ValueError("the session epoch is not an integer")
    except jwt.ExpiredSignatureError as exc:
        raise TokenExpired() from exc
    except (jwt.PyJWTError, ValueError) as exc:
        raise InvalidToken() from exc
    return claims


def _credential(
    kind: CredentialKind,
    row: dict[str, Any],
    digest: bytes,
    lookup: str,
    values: dict[str, Any],
    token_scopes: frozenset[str] | None,
    fresh_until: float,
) -> Credential:
    return Credential(
        principal=principal_of(kind, row, token_scopes),
        digest=digest,
        lookup=lookup,
        values=values,
        token_scopes=token_scopes,
        fresh_until=fresh_until,
    )
