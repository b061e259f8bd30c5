"""Server-side sessions of the web sign-in, and the CSRF tokens of every form.

A session is a random 256-bit id in a cookie (`HttpOnly`, `SameSite=Lax`, `Secure` and `__Host-` prefixed when
the service is reached over HTTPS); the database keeps only its SHA-256, the user and an absolute expiry
(12 hours). Signing in always starts a new session (no fixation); signing out deletes the row.

CSRF tokens are HMAC-SHA256 of the session id under a key derived from `SERVICE_SECRET_KEY`: one per session,
nothing stored, compared in constant time. The sign-in form, shown before there is a session, is bound the
same way to a short-lived random pre-session cookie (the signed double-submit pattern), so that a login CSRF
cannot sign a victim into the attacker's account.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from starlette.requests import Request
from starlette.responses import Response

from rpc.auth.validity import still_valid
from rpc.core.crypto import random_token, token_hash
from rpc.core.types import Connection, Role
from rpc.settings import Settings

SESSION_LIFETIME = dt.timedelta(hours=12)
SIGNIN_COOKIE_LIFETIME = dt.timedelta(hours=1)
MAX_COOKIE_LENGTH = 256

_INSERT = """
INSERT INTO web_sessions (token_hash, user_id, expires_at) VALUES (%(hash)s, %(user_id)s, now() + %(lifetime)s)
"""
_FORGET_EXPIRED = "DELETE FROM web_sessions WHERE user_id = %(user_id)s AND expires_at < now()"
_CURRENT = f"""
SELECT u.id AS user_id, u.email, u.role, u.account_id, u.display_name
FROM web_sessions AS s JOIN users AS u ON u.id = s.user_id
WHERE s.token_hash = %(hash)s AND s.expires_at > now() AND {still_valid()}
"""
_DELETE = "DELETE FROM web_sessions WHERE token_hash = %(hash)s"


@dataclass(frozen=True, slots=True)
class WebUser:
    """The person signed in to this browser, and the CSRF token of their session's forms."""

    user_id: str
    email: str | None
    role: Role
    account_id: str
    display_name: str | None
    csrf_token: str
    session: str  # the raw id, only to end the session


class SessionStore:
    """Starts, finds and ends sessions; makes and checks CSRF tokens; sets the cookies."""

    def __init__(self, settings: Settings) -> None:
        self.secure = settings.production or settings.public_url.startswith("https://")
        prefix = "__Host-" if self.secure else ""  # __Host-: Secure, Path=/, no Domain — cannot be planted
        self.cookie = f"{prefix}hire_session"
        self.signin_cookie = f"{prefix}hire_signin"
        self._key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"hire-api csrf v1").derive(
            settings.secret_key.encode()
        )

    # sessions -------------------------------------------------------------------------------------------

    async def current(self, conn: Connection, request: Request) -> WebUser | None:
        """The signed-in person, or None (no cookie, an unknown or expired session)."""
        session = _cookie(request, self.cookie)
        if session is None:
            return None
        cursor = await conn.execute(_CURRENT, {"hash": token_hash(session)})
        row = await cursor.fetchone()
        if row is None:
            return None
        return WebUser(
            user_id=str(row["user_id"]),
            email=row["email"],
            role=row["role"],
            account_id=str(row["account_id"]),
            display_name=row["display_name"],
            csrf_token=self.csrf_token("session", session),
            session=session,
        )

    async def start(self, conn: Connection, user_id: str) -> str:
        """A new session for `user_id`; returns its id, for the cookie only."""
        session = random_token()
        async with conn.transaction():
            await conn.execute(_FORGET_EXPIRED, {"user_id": user_id})
            await conn.execute(_INSERT, {"hash": token_hash(session), "user_id": user_id, "lifetime": SESSION_LIFETIME})
        return session

    async def end(self, conn: Connection, session: str) -> None:
        await conn.execute(_DELETE, {"hash": token_hash(session)})

    # CSRF -----------------------------------------------------------------------------------------------

    def csrf_token(self, purpose: str, binding: str) -> str:
        mac = hmac.new(self._key, f"{purpose}\x00{binding}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    def csrf_valid(self, purpose: str, binding: str | None, sent: str | None) -> bool:
        """Whether `sent` is the token of this binding (session or pre-session id); constant time."""
        if not binding or not sent:
            return False
        return hmac.compare_digest(self.csrf_token(purpose, binding).encode(), sent.encode("utf-8", "replace"))

    def signin_binding(self, request: Request) -> tuple[str, bool]:
        """The pre-session id that the sign-in form's CSRF token is bound to, and whether it is new."""
        existing = _cookie(request, self.signin_cookie)
        return (existing, False) if existing else (random_token(), True)

    def signin_cookie_value(self, request: Request) -> str | None:
        return _cookie(request, self.signin_cookie)

    # cookies --------------------------------------------------------------------------------------------

    def set_session_cookie(self, response: Response, session: str) -> None:
        self._set(response, self.cookie, session, SESSION_LIFETIME)

    def set_signin_cookie(self, response: Response, binding: str) -> None:
        self._set(response, self.signin_cookie, binding, SIGNIN_COOKIE_LIFETIME)

    def clear_session_cookie(self, response: Response) -> None:
        response.delete_cookie(self.cookie, path="/", secure=self.secure, httponly=True, samesite="lax")

    def _set(self, response: Response, name: str, value: str, lifetime: dt.timedelta) -> None:
        response.set_cookie(
            name,
            value,
            max_age=int(lifetime.total_seconds()),
            path="/",
            secure=self.secure,
            httponly=True,
            samesite="lax",
        )


def _cookie(request: Request, name: str) -> str | None:
    value = request.cookies.get(name)
    return value if value and len(value) <= MAX_COOKIE_LENGTH else None
