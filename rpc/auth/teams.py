"""Teams: the members of a hiring account, invitations into it, and removal from it (docs/people.md).

An invitation is a single-use link valid INVITE_LINK_LIFETIME (7 days); only its SHA-256 is kept, resending
replaces it (the old link dies). Accepting makes a verified `employer` of the account. Removing a member takes
them out of the account — they keep their person (and what they did stays theirs), now a `candidate` with an
account of their own — and stops every credential they held: session and refresh tokens, web sessions, API
keys and OAuth grants, each at its next use. Admins (platform operators) are changed with `bin/admin` only.

Inviting an address that already has a user answers as inviting any other does (the invitation is sent, and
its page tells the invitee why they cannot accept), so that nobody learns from Settings > Team which addresses
have accounts; only `bin/admin invite`, an operator's tool, refuses them. Removing a member also revokes the
invitations they sent that are still open, so that a removed member cannot come back through one.

Each action the audit log will record (`member.invited`, `member.joined`, `member.removed`) is one function here,
recorded with the request's origin.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from rpc.audit import log as audit_log
from rpc.auth import links
from rpc.auth.passwords import Passwords
from rpc.auth.people import (
    EMAIL_TAKEN,
    MAX_NAME_LENGTH,
    email_problem,
    end_sessions,
    invalid,
    name_problem,
    normal_email,
    password_problem,
)
from rpc.core.crypto import random_token, token_hash
from rpc.core.database_errors import on_duplicate
from rpc.core.errors import Conflict, InvalidLink, NotFound
from rpc.core.types import Connection
from rpc.db.pool import one_row
from rpc.mail.outbox import Mail
from rpc.settings import Settings

TEAM_ROLES = frozenset({"employer", "admin"})
MAX_OPEN_INVITATIONS = 100  # per account: invitations send mail, so an account may not send without bound

_MEMBERS = """
SELECT id::text AS id, email, display_name, role, created_at, last_signin_at
FROM users WHERE account_id = %(account_id)s
ORDER BY created_at, id
"""
_OPEN_INVITATIONS = """
SELECT i.id::text AS id, i.email, i.created_at, i.expires_at, i.expires_at <= now() AS expired,
       coalesce(u.display_name, u.email) AS invited_by
FROM invitations AS i LEFT JOIN users AS u ON u.id = i.invited_by
WHERE i.account_id = %(account_id)s AND i.accepted_at IS NULL AND i.revoked_at IS NULL
ORDER BY i.created_at DESC, i.id
"""
_HAS_USER = "SELECT 1 FROM users WHERE email = %(email)s AND issuer IS NULL"
_ACCOUNT = "SELECT name FROM accounts WHERE id = %(account_id)s FOR UPDATE"
_COUNT_OPEN = """
SELECT count(*) AS n FROM invitations
WHERE account_id = %(account_id)s AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()
"""
# A new invitation, or a fresh token and expiry for the open one to the same address (resending it).
_UPSERT = """
INSERT INTO invitations (account_id, email, invited_by, token_hash, expires_at)
VALUES (%(account_id)s, %(email)s, %(invited_by)s, %(hash)s, now() + %(lifetime)s)
ON CONFLICT (account_id, email) WHERE accepted_at IS NULL AND revoked_at IS NULL
DO UPDATE SET token_hash = excluded.token_hash, expires_at = excluded.expires_at, invited_by = excluded.invited_by
RETURNING id::text AS id
"""
_RENEW = """
UPDATE invitations SET token_hash = %(hash)s, expires_at = now() + %(lifetime)s
WHERE id = %(id)s AND account_id = %(account_id)s AND accepted_at IS NULL AND revoked_at IS NULL
RETURNING email
"""
_REVOKE = """
UPDATE invitations SET revoked_at = now()
WHERE id = %(id)s AND account_id = %(account_id)s AND accepted_at IS NULL AND revoked_at IS NULL
RETURNING id
"""
_INVITATION = """
SELECT i.id, i.account_id::text AS account_id, i.email, a.name AS account_name
FROM invitations AS i JOIN accounts AS a ON a.id = i.account_id
WHERE i.token_hash = %(hash)s AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > now()
"""
_ACCEPT = """
UPDATE invitations SET accepted_at = now()
WHERE token_hash = %(hash)s AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()
RETURNING account_id::text AS account_id, email
"""
_JOIN = """
INSERT INTO users (account_id, role, email, password_hash, display_name, email_verified_at)
VALUES (%(account_id)s, 'employer', %(email)s, %(password_hash)s, %(display_name)s, now())
RETURNING id::text AS id
"""
_LOCK_MEMBERS = "SELECT id::text AS id, role, email FROM users WHERE account_id = %(account_id)s FOR UPDATE"
_DETACH = """
WITH own AS (INSERT INTO accounts (name) VALUES (%(account_name)s) RETURNING id)
UPDATE users SET account_id = (SELECT id FROM own), role = 'candidate', updated_at = now() WHERE id = %(id)s
"""
_REVOKE_SENT_BY = """
UPDATE invitations SET revoked_at = now()
WHERE account_id = %(account_id)s AND invited_by = %(id)s AND accepted_at IS NULL AND revoked_at IS NULL
"""
_REVOKE_KEYS_AND_GRANTS = """
WITH keys AS (
    UPDATE api_keys SET revoked_at = now() WHERE user_id = %(id)s AND revoked_at IS NULL
)
UPDATE oauth_grants SET revoked_at = now() WHERE user_id = %(id)s AND revoked_at IS NULL
"""


class InviteeHasAccount(Conflict):
    """The invited address already belongs to a person: they cannot join another account."""

    default_message = (
        "This e-mail address already has an account, and a person belongs to one account only. Invite another "
        "address, or ask them to use a new one."
    )


@dataclass(frozen=True, slots=True)
class Invitation:
    """What the invitation page shows before it is accepted."""

    email: str
    account_name: str


@dataclass(frozen=True, slots=True)
class Sent:
    invitation_id: str
    link: str


class Teams:
    def __init__(self, settings: Settings, passwords: Passwords, mail: Mail) -> None:
        self._lifetime = dt.timedelta(seconds=settings.invite_link_lifetime)
        self._passwords = passwords
        self._mail = mail

    async def members(self, conn: Connection, account_id: str) -> list[dict[str, Any]]:
        return await (await conn.execute(_MEMBERS, {"account_id": account_id})).fetchall()

    async def open_invitations(self, conn: Connection, account_id: str) -> list[dict[str, Any]]:
        return await (await conn.execute(_OPEN_INVITATIONS, {"account_id": account_id})).fetchall()

    async def invite_member(
        self,
        conn: Connection,
        account_id: str,
        inviter: dict[str, Any],
        email: str,
        *,
        origin: audit_log.Origin = audit_log.NO_ORIGIN,
        refuse_known: bool = False,
    ) -> Sent:
        """Invite `email` into the account (audit: `member.invited`); `inviter` has `id` and a name or e-mail
        (`name`), or no `id` for an operator. Inviting an address again resends its open invitation. An address
        that has a user is invited like any other (its page explains), unless `refuse_known` (`bin/admin`)."""
        email = normal_email(email)
        invalid({"email": email_problem(email)})
        token = random_token()
        async with conn.transaction():
            account = await one_row(await conn.execute(_ACCOUNT, {"account_id": account_id}))
            if refuse_known and await (await conn.execute(_HAS_USER, {"email": email})).fetchone() is not None:
                raise InviteeHasAccount()
            if (await one_row(await conn.execute(_COUNT_OPEN, {"account_id": account_id})))[
                "n"
            ] >= MAX_OPEN_INVITATIONS:
                raise Conflict(f"An account may have at most {MAX_OPEN_INVITATIONS} open invitations; revoke some.")
            values = {
                "account_id": account_id,
                "email": email,
                "invited_by": inviter.get("id"),
                "hash": token_hash(token),
                "lifetime": self._lifetime,
            }
            invitation_id = (await one_row(await conn.execute(_UPSERT, values)))["id"]
            link = await self._mail_invitation(conn, email, token, account["name"], inviter["name"])
            actor = audit_log.Actor("user", inviter["id"]) if inviter.get("id") else audit_log.OPERATOR
            await audit_log.record(
                conn, "member.invited", account_id=account_id, actor=actor, target_id=str(invitation_id), origin=origin
            )
        return Sent(invitation_id=invitation_id, link=link)

    async def resend(self, conn: Connection, account_id: str, invitation_id: str, inviter_name: str) -> None:
        """A fresh link (valid the full time again) for an open invitation; the old link dies."""
        token = random_token()
        async with conn.transaction():
            values = {
                "id": invitation_id,
                "account_id": account_id,
                "hash": token_hash(token),
                "lifetime": self._lifetime,
            }
            row = await (await conn.execute(_RENEW, values)).fetchone()
            if row is None:
                raise NotFound()
            account = await one_row(await conn.execute(_ACCOUNT, {"account_id": account_id}))
            await self._mail_invitation(conn, row["email"], token, account["name"], inviter_name)

    async def revoke(self, conn: Connection, account_id: str, invitation_id: str) -> None:
        if await (await conn.execute(_REVOKE, {"id": invitation_id, "account_id": account_id})).fetchone() is None:
            raise NotFound()

    async def invitation(self, conn: Connection, token: str) -> Invitation:
        """The open invitation of `token`; `InvalidLink` if used, revoked, expired or unknown;
        `InviteeHasAccount` if its address has a person by now."""
        row = await (await conn.execute(_INVITATION, {"hash": token_hash(token)})).fetchone()
        if row is None:
            raise InvalidLink()
        if await (await conn.execute(_HAS_USER, {"email": row["email"]})).fetchone() is not None:
            raise InviteeHasAccount()
        return Invitation(email=row["email"], account_name=row["account_name"])

    async def accept_invitation(
        self, conn: Connection, token: str, display_name: str, password: str, origin: audit_log.Origin
    ) -> str:
        """The invitee joins (audit: `member.joined`, from `origin`) as a verified employer; their user id."""
        invitation = await self.invitation(conn, token)
        name = display_name.strip()
        invalid(
            {
                "display_name": "Enter your name." if not name else name_problem(name),
                "password": password_problem(password, invitation.email),
            }
        )
        password_hash = await self._passwords.hash(password)
        with on_duplicate(EMAIL_TAKEN, InviteeHasAccount()):
            async with conn.transaction():
                row = await (await conn.execute(_ACCEPT, {"hash": token_hash(token)})).fetchone()
                if row is None:  # accepted or revoked while the password was hashed
                    raise InvalidLink()
                values = {**row, "password_hash": password_hash, "display_name": name[:MAX_NAME_LENGTH]}
                user_id = str((await one_row(await conn.execute(_JOIN, values)))["id"])
                await audit_log.record(
                    conn,
                    "member.joined",
                    account_id=row["account_id"],
                    actor=audit_log.Actor("user", user_id),
                    target_id=user_id,
                    origin=origin,
                )
                return user_id

    async def remove_member(
        self, conn: Connection, account_id: str, actor_id: str, member_id: str, origin: audit_log.Origin
    ) -> None:
        """Take `member_id` out of the account (audit: `member.removed`, from `origin`): not oneself, not an
        admin, never the last member; every credential they held stops at its next use, and every invitation
        they sent that is still open is revoked."""
        async with conn.transaction():
            members = {
                m["id"]: m for m in await (await conn.execute(_LOCK_MEMBERS, {"account_id": account_id})).fetchall()
            }
            member = members.get(member_id)
            if member is None:
                raise NotFound()
            if member_id == actor_id:
                raise Conflict("You cannot remove yourself; ask another member of the team.")
            if member["role"] == "admin":
                raise Conflict("Platform administrators are changed by the operator (bin/admin), not here.")
            if len(members) <= 1:
                raise Conflict("An account keeps at least one member.")
            await conn.execute(_DETACH, {"id": member_id, "account_name": (member["email"] or member_id)[:200]})
            await conn.execute(_REVOKE_KEYS_AND_GRANTS, {"id": member_id})
            await conn.execute(_REVOKE_SENT_BY, {"id": member_id, "account_id": account_id})
            await links.void(conn, member_id)
            await end_sessions(conn, member_id)
            await audit_log.record(
                conn,
                "member.removed",
                account_id=account_id,
                actor=audit_log.Actor("user", actor_id),
                target_id=member_id,
                origin=origin,
            )

    async def _mail_invitation(self, conn: Connection, email: str, token: str, account_name: str, inviter: str) -> str:
        link = self._mail.composer.link("/web/invite", token)
        await self._mail.send(conn, "invite", email, link=link, account_name=account_name, inviter=inviter)
        return link
