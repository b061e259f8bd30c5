"""The OAuth 2.0 authorization server, without HTTP: codes, grants, tokens, refresh and revocation. Its errors
are `rpc.auth.oauth_errors`, its scope policy and PKCE `rpc.auth.oauth_policy`, a person's authorized
applications `rpc.auth.oauth_grants`.

RFC 6749 (authorization code and refresh token grants), RFC 7636 (PKCE, S256 only), RFC 7009 (revocation)
and the OAuth 2.0 Security BCP (RFC 9700). The HTTP endpoints (rpc/web/authorize.py, rpc/web/token.py)
only translate requests and answers.

- A consent gives a **code**: random, stored as its SHA-256, 10 minutes, one use, bound to the client, the
  redirect URI, the user, the scopes and the PKCE challenge. Any failed redemption (wrong verifier, wrong
  redirect URI, another client) burns it; a second redemption revokes the grant the first one created.
- Redeeming a code creates a **grant**: the refresh-token family and every access token carry its id, so
  revoking it (code reuse, refresh-token reuse, /oauth/revoke, "revoke access") stops them all at once.
- **Refresh tokens** rotate at every use; a used one presented again revokes its grant. A refresh may narrow
  the scopes of the new access token, never widen them; the refresh token keeps the grant's scopes.
- Granted scopes are always requested ∩ the client's allowed scopes ∩ what the user's role may use.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from typing import Any

import jwt
import msgspec

from rpc.auth import access_tokens
from rpc.auth.keyring import ACCESS_TOKEN_SECONDS, KeyRing
from rpc.auth.oauth_clients import Client, find_client
from rpc.auth.oauth_errors import InvalidClient, InvalidGrant, InvalidRequest, InvalidScope, OAuthError
from rpc.auth.oauth_policy import ScopePolicy, verifier_matches
from rpc.auth.rotation import Rotation, rotate
from rpc.auth.validity import still_valid
from rpc.core.crypto import random_token, token_hash
from rpc.core.errors import InvalidToken, TokenExpired
from rpc.core.types import Connection
from rpc.settings import Settings

CODE_LIFETIME = dt.timedelta(minutes=10)
REFRESH_TOKEN_LIFETIME = dt.timedelta(days=30)
USED_CODES_KEPT = dt.timedelta(days=1)  # long enough to catch a replay, then deleted

_INSERT_CODE = """
INSERT INTO oauth_codes (code_hash, client_id, user_id, redirect_uri, scopes, code_challenge, expires_at)
VALUES (%(hash)s, %(client_id)s, %(user_id)s, %(redirect_uri)s, %(scopes)s, %(challenge)s, now() + %(lifetime)s)
"""
_FORGET_OLD_CODES = "DELETE FROM oauth_codes WHERE expires_at < now() - %(kept)s"
_LOCK_CODE = """
SELECT id, client_id, user_id, redirect_uri, scopes, code_challenge, grant_id,
       expires_at < now() AS expired, used_at IS NOT NULL AS used
FROM oauth_codes WHERE code_hash = %(hash)s
FOR UPDATE
"""
_BURN_CODE = "UPDATE oauth_codes SET used_at = now() WHERE id = %(id)s AND used_at IS NULL"
_INSERT_GRANT = """
INSERT INTO oauth_grants (client_id, user_id, scopes, expires_at, last_used_at)
VALUES (%(client_id)s, %(user_id)s, %(scopes)s, now() + %(lifetime)s, now())
RETURNING id
"""
_LINK_CODE = "UPDATE oauth_codes SET grant_id = %(grant_id)s WHERE id = %(id)s"
_INSERT_REFRESH = """
INSERT INTO oauth_refresh_tokens (grant_id, token_hash, expires_at)
VALUES (%(grant_id)s, %(hash)s, now() + %(lifetime)s)
"""
# A grant is the refresh token's family: a token presented again revokes the whole authorization.
_ROTATION = Rotation(
    lock=f"""
SELECT r.id, r.grant_id, r.expires_at < now() AS expired, r.used_at IS NOT NULL AS used,
       g.client_id, g.user_id, g.scopes, g.revoked_at IS NOT NULL AS revoked, u.role
FROM oauth_refresh_tokens AS r
JOIN oauth_grants AS g ON g.id = r.grant_id
JOIN users AS u ON u.id = g.user_id
WHERE r.token_hash = %(hash)s AND {still_valid()}
FOR UPDATE OF r, g
""",
    mark_used="UPDATE oauth_refresh_tokens SET used_at = now() WHERE id = %(id)s",
    revoke_family="UPDATE oauth_grants SET revoked_at = now() WHERE id = %(family)s AND revoked_at IS NULL",
    family="grant_id",
)
_FORGET_EXPIRED_REFRESH = "DELETE FROM oauth_refresh_tokens WHERE grant_id = %(grant_id)s AND expires_at < now()"
_TOUCH_GRANT = "UPDATE oauth_grants SET last_used_at = now(), expires_at = now() + %(lifetime)s WHERE id = %(id)s"
_REVOKE_GRANT = "UPDATE oauth_grants SET revoked_at = now() WHERE id = %(id)s AND revoked_at IS NULL"
_REFRESH_GRANT = """
SELECT g.id, g.client_id FROM oauth_refresh_tokens AS r JOIN oauth_grants AS g ON g.id = r.grant_id
WHERE r.token_hash = %(hash)s
"""
# --- answers -------------------------------------------------------------------------------------------


class TokenResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A successful token response (RFC 6749 section 5.1)."""

    access_token: str
    token_type: str
    expires_in: int
    refresh_token: str
    scope: str


# --- the server ------------------------------------------------------------------------------------------


class AuthorizationServer:
    """Issues codes and tokens, rotates refresh tokens, revokes grants."""

    def __init__(self, settings: Settings, keyring: KeyRing, policy: ScopePolicy) -> None:
        self._settings = settings
        self._keyring = keyring
        self.policy = policy

    @property
    def issuer(self) -> str:
        return access_tokens.issuer(self._settings)

    # client authentication (RFC 6749 section 2.3) ----------------------------------------------------------------

    async def authenticate_client(self, conn: Connection, client_id: str | None, secret: str | None) -> Client:
        """The client making a token or revocation request; a confidential one must show its secret, a public
        one may not send any."""
        if not client_id:
            raise InvalidClient("Identify the client: client_id (and client_secret) or HTTP Basic.")
        client = await find_client(conn, client_id)
        if client is None:
            raise InvalidClient("Client authentication failed.")
        if client.confidential:
            if secret is None or not client.secret_matches(secret):
                raise InvalidClient("Client authentication failed.")
        elif secret is not None:
            raise InvalidClient("A public client has no secret; send client_id alone.")
        return client

    # the authorization endpoint's part ---------------------------------------------------------------------

    async def issue_code(
        self,
        conn: Connection,
        *,
        client: Client,
        user_id: str,
        redirect_uri: str,
        scopes: Collection[str],
        challenge: str,
    ) -> str:
        code = random_token()
        await conn.execute(
            _INSERT_CODE,
            {
                "hash": token_hash(code),
                "client_id": client.id,
                "user_id": user_id,
                "redirect_uri": redirect_uri,
                "scopes": list(scopes),
                "challenge": challenge,
                "lifetime": CODE_LIFETIME,
            },
        )
        await conn.execute(_FORGET_OLD_CODES, {"kept": USED_CODES_KEPT})
        return code

    # the token endpoint ----------------------------------------------------------------------------------

    async def exchange_code(
        self, conn: Connection, client: Client, code: str | None, redirect_uri: str | None, verifier: str | None
    ) -> TokenResponse:
        """`grant_type=authorization_code`."""
        if not code:
            raise InvalidRequest("code is required.")
        if not redirect_uri:
            raise InvalidRequest("redirect_uri is required, the same as in the authorization request.")
        failure: OAuthError | None = None
        async with conn.transaction():
            cursor = await conn.execute(_LOCK_CODE, {"hash": token_hash(code)})
            row = await cursor.fetchone()
            if row is None:
                raise InvalidGrant("The authorization code is not valid.")
            if row["used"]:
                if row["grant_id"] is not None:
                    await conn.execute(_REVOKE_GRANT, {"id": row["grant_id"]})
                failure = InvalidGrant("The authorization code was already used; what it issued is revoked.")
            else:
                await conn.execute(_BURN_CODE, {"id": row["id"]})  # one attempt per code, successful or not
                failure = _code_failure(row, client, redirect_uri, verifier)
            if failure is None:
                return await self._grant(conn, row, client)
        raise failure  # after the commit: the burn or the revocation stands

    async def _grant(self, conn: Connection, code: Mapping[str, Any], client: Client) -> TokenResponse:
        scopes = self.policy.ordered(code["scopes"])
        cursor = await conn.execute(
            _INSERT_GRANT,
            {
                "client_id": client.id,
                "user_id": code["user_id"],
                "scopes": scopes,
                "lifetime": REFRESH_TOKEN_LIFETIME,
            },
        )
        grant = await cursor.fetchone()
        assert grant is not None
        await conn.execute(_LINK_CODE, {"grant_id": grant["id"], "id": code["id"]})
        return await self._tokens(conn, str(grant["id"]), str(code["user_id"]), client, scopes)

    async def refresh(
        self, conn: Connection, client: Client, refresh_token: str | None, scope: str | None
    ) -> TokenResponse:
        """`grant_type=refresh_token`: rotation, reuse detection, narrowing (never widening) of scopes."""
        if not refresh_token:
            raise InvalidRequest("refresh_token is required.")

        async def issue(row: dict[str, Any]) -> TokenResponse:
            scopes = self._refreshed_scopes(row, client, scope)
            await conn.execute(_FORGET_EXPIRED_REFRESH, {"grant_id": row["grant_id"]})
            await conn.execute(_TOUCH_GRANT, {"id": row["grant_id"], "lifetime": REFRESH_TOKEN_LIFETIME})
            return await self._tokens(conn, str(row["grant_id"]), str(row["user_id"]), client, scopes)

        return await rotate(
            conn,
            _ROTATION,
            refresh_token,
            belongs=lambda row: bool(row["client_id"] == client.id),
            invalid=InvalidGrant("The refresh token is not valid."),
            reused=InvalidGrant("The refresh token was already used; its whole authorization is revoked."),
            issue=issue,
        )

    def _refreshed_scopes(self, row: Mapping[str, Any], client: Client, scope: str | None) -> list[str]:
        granted = list(row["scopes"])
        if scope is not None:
            requested = scope.split(" ")
            if not scope or any(not name for name in requested):
                raise InvalidScope("Ask for one or more scopes, separated by single spaces.")
            wider = sorted(set(requested) - set(granted))
            if wider:
                raise InvalidScope(f"A refresh cannot widen the authorization: {', '.join(wider)} not granted.")
            granted = requested
        scopes = self.policy.grantable(granted, client, row["role"])  # the role and the client as they are now
        if not scopes:
            raise InvalidGrant("None of these scopes is available to the user any more.")
        return scopes

    async def _tokens(
        self, conn: Connection, grant_id: str, user_id: str, client: Client, scopes: list[str]
    ) -> TokenResponse:
        refresh_token = random_token()
        await conn.execute(
            _INSERT_REFRESH,
            {"grant_id": grant_id, "hash": token_hash(refresh_token), "lifetime": REFRESH_TOKEN_LIFETIME},
        )
        access_token = access_tokens.issue(
            self._keyring, self._settings, user_id=user_id, client_id=client.id, grant_id=grant_id, scopes=scopes
        )
        return TokenResponse(
            access_token=access_token,
            token_type="Bearer",  # noqa: S106 - the token type, not a password
            expires_in=ACCESS_TOKEN_SECONDS,
            refresh_token=refresh_token,
            scope=" ".join(scopes),
        )

    # revocation (RFC 7009) ----------------------------------------------------------------------------------

    async def revoke(self, conn: Connection, client: Client, token: str | None) -> None:
        """Revoke the grant behind a refresh or access token of this client. Unknown tokens, other clients'
        tokens and expired ones change nothing (and the endpoint answers 200 all the same)."""
        if not token:
            raise InvalidRequest("token is required.")
        grant_id = await self._refresh_token_grant(conn, client, token) or self._access_token_grant(client, token)
        if grant_id is not None:
            await conn.execute(_REVOKE_GRANT, {"id": grant_id})

    async def _refresh_token_grant(self, conn: Connection, client: Client, token: str) -> str | None:
        cursor = await conn.execute(_REFRESH_GRANT, {"hash": token_hash(token)})
        row = await cursor.fetchone()
        return str(row["id"]) if row and row["client_id"] == client.id else None

    def _access_token_grant(self, client: Client, token: str) -> str | None:
        try:
            header = jwt.get_unverified_header(token)
            claims = access_tokens.verify(self._keyring, self._settings, token, header)
        except (jwt.PyJWTError, InvalidToken, TokenExpired):
            return None
        return claims.grant_id if claims.client_id == client.id else None


def _code_failure(row: Mapping[str, Any], client: Client, redirect_uri: str, verifier: str | None) -> OAuthError | None:
    """Why an unused code cannot be redeemed by this request, or None."""
    if row["expired"]:
        return InvalidGrant("The authorization code has expired.")
    if row["client_id"] != client.id:
        return InvalidGrant("The authorization code was issued to another client.")
    if row["redirect_uri"] != redirect_uri:
        return InvalidGrant("redirect_uri differs from the one of the authorization request.")
    if not verifier_matches(verifier, row["code_challenge"]):
        return InvalidGrant("The code_verifier does not match the code_challenge (PKCE).")
    return None
