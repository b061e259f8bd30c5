"""The single-use links mailed to a person (e-mail verification, password reset): 256 random bits, of which
only the SHA-256 is kept, valid for a set time, and only while the person still has the address it was sent
to. Using one voids every other open link of the same purpose for that person. A verification link sent for a
sign-up keeps that sign-up's password hash and what it asked to be (role, names), so that it confirms that
sign-up and no other."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from psycopg.types.json import Jsonb

from rpc.core.crypto import random_token, token_hash
from rpc.core.errors import InvalidLink
from rpc.core.types import Connection

Purpose = Literal["verify", "reset"]

_INSERT = """
INSERT INTO email_links (purpose, user_id, email, token_hash, expires_at, password_hash, sign_up, next_path)
VALUES (%(purpose)s, %(user_id)s, %(email)s, %(hash)s, now() + %(lifetime)s, %(password_hash)s, %(sign_up)s,
        %(next_path)s)
"""
# The link's own row, only if it is open and its person still has the address (and signs in here).
_USE = """
UPDATE email_links AS l SET used_at = now()
FROM users AS u
WHERE l.token_hash = %(hash)s AND l.purpose = %(purpose)s AND l.used_at IS NULL AND l.expires_at > now()
  AND u.id = l.user_id AND u.email = l.email AND u.issuer IS NULL
RETURNING l.user_id::text AS user_id, l.password_hash, l.sign_up, l.next_path
"""
_VOID = """
UPDATE email_links SET used_at = now()
WHERE user_id = %(user_id)s AND used_at IS NULL AND (%(purpose)s::text IS NULL OR purpose = %(purpose)s)
"""


@dataclass(frozen=True, slots=True)
class Used:
    """The person whose link was used, the password and the asks (`role`, `display_name`, `account_name`) of
    the sign-up it was sent for (verification only), and the page of this site the person was on when the link
    was asked for (the job they were applying to), where signing in takes them afterwards."""

    user_id: str
    password_hash: str | None
    sign_up: dict[str, Any] | None = None
    next_path: str | None = None


async def issue(
    conn: Connection,
    purpose: Purpose,
    user_id: str,
    email: str,
    lifetime_seconds: float,
    password_hash: str | None = None,
    sign_up: dict[str, Any] | None = None,
    next_path: str | None = None,
) -> str:
    """A new link's token (for the mail only; the database keeps its hash); `next_path`, a path of this site,
    is where the person goes on once it is followed."""
    token = random_token()
    values = {
        "purpose": purpose,
        "user_id": user_id,
        "email": email,
        "hash": token_hash(token),
        "lifetime": dt.timedelta(seconds=lifetime_seconds),
        "password_hash": password_hash,
        "sign_up": Jsonb(sign_up) if sign_up is not None else None,
        "next_path": next_path,
    }
    await conn.execute(_INSERT, values)
    return token


async def use(conn: Connection, purpose: Purpose, token: str) -> Used:
    """The person whose open link this is, marking it and their other open links of this purpose used;
    `InvalidLink` for an unknown, used or expired token. Call it inside the transaction of what the link does."""
    cursor = await conn.execute(_USE, {"hash": token_hash(token), "purpose": purpose})
    row = await cursor.fetchone()
    if row is None:
        raise InvalidLink()
    await void(conn, row["user_id"], purpose)
    return Used(str(row["user_id"]), row["password_hash"], row["sign_up"], row["next_path"])


async def void(conn: Connection, user_id: str, purpose: Purpose | None = None) -> None:
    """End the person's open links (of one purpose, or all)."""
    await conn.execute(_VOID, {"user_id": user_id, "purpose": purpose})


_OPEN = """
SELECT 1 FROM email_links AS l JOIN users AS u ON u.id = l.user_id
WHERE l.token_hash = %(hash)s AND l.purpose = %(purpose)s AND l.used_at IS NULL AND l.expires_at > now()
  AND u.email = l.email AND u.issuer IS NULL
"""


async def is_open(conn: Connection, purpose: Purpose, token: str) -> bool:
    """Whether `token` would work now (the page that asks for a new password checks before showing its form)."""
    return await (await conn.execute(_OPEN, {"hash": token_hash(token), "purpose": purpose})).fetchone() is not None
