"""A person's authorized applications, as the panel and the sign-in pages show them, and "revoke access"."""

from __future__ import annotations

import datetime as dt

import msgspec

from rpc.core.types import Connection

_AUTHORIZED_APPS = """
SELECT c.id AS client_id, c.name, array_agg(DISTINCT s.scope) AS scopes,
       min(g.created_at) AS authorized_at, max(g.last_used_at) AS last_used_at
FROM oauth_grants AS g
JOIN oauth_clients AS c ON c.id = g.client_id
CROSS JOIN LATERAL unnest(g.scopes) AS s (scope)
WHERE g.user_id = %(user_id)s AND g.revoked_at IS NULL AND g.expires_at > now()
GROUP BY c.id, c.name
ORDER BY lower(c.name), c.id
"""
_REVOKE_ACCESS = """
UPDATE oauth_grants SET revoked_at = now()
WHERE user_id = %(user_id)s AND client_id = %(client_id)s AND revoked_at IS NULL
"""
_BURN_PENDING_CODES = """
UPDATE oauth_codes SET used_at = now()
WHERE user_id = %(user_id)s AND client_id = %(client_id)s AND used_at IS NULL
"""


class AuthorizedApp(msgspec.Struct, frozen=True, kw_only=True):
    """An application a person has authorized and not revoked: what it may do, since when, last refresh."""

    client_id: str
    name: str
    scopes: list[str]
    authorized_at: dt.datetime
    last_used_at: dt.datetime | None


async def authorized_apps(conn: Connection, user_id: str) -> list[AuthorizedApp]:
    """The applications a person has authorized, with the union of the scopes their live grants hold."""
    cursor = await conn.execute(_AUTHORIZED_APPS, {"user_id": user_id})
    return [
        AuthorizedApp(
            client_id=row["client_id"],
            name=row["name"],
            scopes=sorted(row["scopes"]),
            authorized_at=row["authorized_at"],
            last_used_at=row["last_used_at"],
        )
        for row in await cursor.fetchall()
    ]


async def revoke_access(conn: Connection, user_id: str, client_id: str) -> int:
    """ "Revoke access": every grant of this person to this client, and its codes not yet redeemed. Takes
    effect at the very next request of any token they issued. Returns how many grants were revoked."""
    async with conn.transaction():
        await conn.execute(_BURN_PENDING_CODES, {"user_id": user_id, "client_id": client_id})
        cursor = await conn.execute(_REVOKE_ACCESS, {"user_id": user_id, "client_id": client_id})
        return cursor.rowcount
