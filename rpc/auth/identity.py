"""The built-in identity provider: sign-in, refresh-token rotation, and session tokens (ES256, 1 hour).

Refresh tokens are random, stored as SHA-256 hashes, and rotate at every use. Each sign-in starts a
family; presenting an already rotated token again means it was stolen, so the whole family is revoked.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass

import msgspec

from rpc.audit import log as audit_log
from rpc.auth.authenticate import AUDIENCE, SESSION_EPOCH_CLAIM
from rpc.auth.keyring import ACCESS_TOKEN_SECONDS, KeyRing
from rpc.auth.passwords import Passwords
from rpc.auth.rotation import Rotation, rotate
from rpc.auth.validity import still_valid
from rpc.core.crypto import random_token, token_hash
from rpc.core.errors import EmailNotVerified, InvalidCredentials, InvalidToken
from rpc.core.types import Connection
from rpc.settings import Settings

REFRESH_TOKEN_LIFETIME = dt.timedelta(days=30)

_USER_BY_EMAIL = """
SELECT id, account_id, password_hash, session_epoch, email_verified_at IS NOT NULL AS verified
FROM users WHERE email = %(email)s AND issuer IS NULL
"""
_SIGNED_IN = "UPDATE users SET last_signin_at = now() WHERE id = %(id)s"
_INSERT_REFRESH = """
INSERT INTO refresh_tokens (family_id, user_id, token_hash, expires_at)
VALUES (%(family_id)s, %(user_id)s, %(hash)s, now() + %(lifetime)s)
"""
_ROTATION = Rotation(
    lock=f"""
SELECT r.id, r.family_id, r.user_id, r.expires_at < now() AS expired, r.used_at IS NOT NULL AS used,
       r.revoked_at IS NOT NULL AS revoked, u.session_epoch
FROM refresh_tokens AS r JOIN users AS u ON u.id = r.user_id
WHERE r.token_hash = %(hash)s AND {still_valid()}
FOR UPDATE OF r
""",
    mark_used="UPDATE refresh_tokens SET used_at = now() WHERE id = %(id)s",
    revoke_family="UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = %(family)s AND revoked_at IS NULL",
    family="family_id",
)


@dataclass(frozen=True, slots=True)
class Person:
    """Who a right e-mail and password belong to."""

    user_id: str
    session_epoch: int
    verified: bool


class TokenPair(msgspec.Struct, frozen=True, kw_only=True):
    """The answer of /auth/login and /auth/refresh."""

    access_token: str
    refresh_token: str
    token_type: str = "Bearer"
    expires_in: int = ACCESS_TOKEN_SECONDS


class IdentityProvider:
    """Issues and rotates the built-in provider's tokens."""

    def __init__(self, settings: Settings, keyring: KeyRing, passwords: Passwords) -> None:
        self._settings = settings
        self._keyring = keyring
        self.passwords = passwords

    def access_token(self, user_id: str, session_epoch: int, expires_in: int = ACCESS_TOKEN_SECONDS) -> str:
        """A session JWT for `user_id`, valid while the user's session epoch stays `session_epoch` (claim `sep`);
        a negative `expires_in` gives an already expired one (tests, support)."""
        now = int(time.time())
        claims = {
            "iss": self._settings.issuer,
            "aud": AUDIENCE,
            "sub": user_id,
            "iat": min(now, now + expires_in),
            "exp": now + expires_in,
            "jti": uuid.uuid4().hex,
            SESSION_EPOCH_CLAIM: session_epoch,
        }
        return self._keyring.sign(claims)

    async def check_password(self, conn: Connection, email: str, password: str, origin: audit_log.Origin) -> Person:
        """The built-in provider's user with this e-mail and password; `InvalidCredentials` otherwise, in the same
        time whether or not the e-mail is known. Whether the e-mail is verified is told only to the password.
        Either way the attempt is audited: in the user's account, or (an unknown e-mail, which is not kept) in the
        platform's log."""
        cursor = await conn.execute(_USER_BY_EMAIL, {"email": email.strip().lower()})
        row = await cursor.fetchone()
        valid = await self.passwords.verify(row["password_hash"] if row else None, password) and row is not None
        async with conn.transaction():
            await audit_log.record(
                conn,
                "signin.succeeded" if valid else "signin.failed",
                account_id=str(row["account_id"]) if row else None,
                actor=audit_log.Actor("user", str(row["id"]) if row else None),
                target_id=str(row["id"]) if row else None,
                origin=origin,
            )
        if not valid or row is None:
            raise InvalidCredentials()
        return Person(user_id=str(row["id"]), session_epoch=row["session_epoch"], verified=row["verified"])

    async def signed_in(self, conn: Connection, person: Person) -> None:
        """Refuse an unverified e-mail (`403 email_not_verified`); else note the sign-in (Settings > Team)."""
        if not person.verified:
            raise EmailNotVerified()
        await conn.execute(_SIGNED_IN, {"id": person.user_id})

    async def login(self, conn: Connection, email: str, password: str, origin: audit_log.Origin) -> TokenPair:
        person = await self.check_password(conn, email, password, origin)
        async with conn.transaction():
            await self.signed_in(conn, person)
            return await self._issue(conn, person.user_id, person.session_epoch, uuid.uuid4())

    async def refresh(self, conn: Connection, refresh_token: str) -> TokenPair:
        return await rotate(
            conn,
            _ROTATION,
            refresh_token,
            belongs=lambda row: True,
            invalid=InvalidToken("The refresh token is not valid."),
            reused=InvalidToken("The refresh token was already used; every token of its sign-in is revoked."),
            issue=lambda row: self._issue(conn, str(row["user_id"]), row["session_epoch"], row["family_id"]),
        )

    async def _issue(self, conn: Connection, user_id: str, session_epoch: int, family_id: uuid.UUID) -> TokenPair:
        refresh_token = random_token()
        await conn.execute(
            _INSERT_REFRESH,
            {
                "family_id": family_id,
                "user_id": user_id,
                "hash": token_hash(refresh_token),
                "lifetime": REFRESH_TOKEN_LIFETIME,
            },
        )
        return TokenPair(access_token=self.access_token(user_id, session_epoch), refresh_token=refresh_token)
