"""Erasing a person (docs/privacy.md has the table-by-table account).

One transaction, shared by `profile.delete` and `bin/admin delete-user`: the user's row is emptied and kept as
the opaque id their applications and the audit log refer to; their applications lose every text they wrote or
that was written about them; every credential is deleted, so nothing they held works on the next request.
"""

from __future__ import annotations

import msgspec

from rpc.audit import log as audit_log
from rpc.core.types import Connection
from rpc.outbox.emit import Emitter

ERASED_ACCOUNT_NAME = "Erased account"


class LastMemberPaying(Exception):
    """The person is the last member of an account with an active subscription."""


class UserDeleted(msgspec.Struct, frozen=True):
    """Data of the `user.deleted` event."""

    user_id: str


_LOCK = """
SELECT u.id, u.account_id, u.email, u.display_name,
       NOT EXISTS (SELECT FROM users AS o
                   WHERE o.account_id = u.account_id AND o.id <> u.id AND o.deleted_at IS NULL) AS last_member,
       EXISTS (SELECT FROM subscriptions AS s WHERE s.account_id = u.account_id AND s.status = 'active') AS paying
FROM users AS u WHERE u.id = %(id)s AND u.deleted_at IS NULL
FOR UPDATE OF u
"""
# Each statement one indexed pass over the person's rows; credentials go (and with them their refresh tokens
# and codes), so the next request with any of them finds nothing.
_ERASE = (
    """UPDATE users SET email = NULL, password_hash = NULL, issuer = NULL, subject = NULL, display_name = NULL,
                        headline = NULL, location = NULL, bio = NULL, resume_file_id = NULL, deleted_at = now(),
                        updated_at = now()
       WHERE id = %(id)s""",
    """UPDATE applications SET cover_letter = NULL, resume_url = NULL, notes = NULL, updated_at = now()
       WHERE candidate_id = %(id)s""",
    # Their files, from their applications too; the rows' deletion queues the bytes for the files sweep.
    "DELETE FROM application_files WHERE file_id IN (SELECT id FROM files WHERE owner_id = %(id)s)",
    "DELETE FROM files WHERE owner_id = %(id)s",
    "DELETE FROM api_keys WHERE user_id = %(id)s",
    "DELETE FROM refresh_tokens WHERE user_id = %(id)s",
    "DELETE FROM web_sessions WHERE user_id = %(id)s",
    "DELETE FROM oauth_codes WHERE user_id = %(id)s",
    "DELETE FROM oauth_grants WHERE user_id = %(id)s",
    # People (docs/people.md): their links, the messages addressed to them (sent or not), invitations to them.
    "DELETE FROM email_links WHERE user_id = %(id)s",
    "DELETE FROM job_alerts WHERE user_id = %(id)s",
    "DELETE FROM mail_messages WHERE recipient = %(email)s",
    "DELETE FROM invitations WHERE email = %(email)s",
    # Kept answers of the person's writes may repeat what they wrote (a profile, a cover letter); other members'
    # keys stay, so their retries still answer what they first did. (Keys from before keys named their caller:
    # the account's.)
    "DELETE FROM idempotency_keys WHERE user_id = %(id)s OR (account_id = %(account_id)s AND user_id IS NULL)",
    # An account is named after its first member's e-mail unless named otherwise; one left without members
    # keeps its jobs, payments and invoices under a name that is no longer anyone's.
    """UPDATE accounts SET name = %(erased)s
       WHERE id = %(account_id)s AND (%(last_member)s OR name IN (%(email)s, %(display_name)s))""",
)


async def erase_user(
    conn: Connection,
    emitter: Emitter,
    user_id: str,
    *,
    actor: audit_log.Actor,
    origin: audit_log.Origin,
) -> bool:
    """Erase the user in `conn`'s open transaction, record `user.deleted` in their account's audit log and
    announce it to the account; False when there is no such (living) user."""
    cursor = await conn.execute(_LOCK, {"id": user_id})
    person = await cursor.fetchone()
    if person is None:
        return False
    if person["last_member"] and person["paying"]:
        raise LastMemberPaying()
    account_id = str(person["account_id"])
    values = {
        "id": user_id,
        "account_id": account_id,
        "last_member": person["last_member"],
        "email": person["email"] or "",
        "display_name": person["display_name"] or "",
        "erased": ERASED_ACCOUNT_NAME,
    }
    for statement in _ERASE:
        await conn.execute(statement, values)
    await audit_log.record(conn, "user.deleted", account_id=account_id, actor=actor, target_id=user_id, origin=origin)
    await emitter.emit(conn, "user.deleted", UserDeleted(user_id=user_id), [account_id])
    return True
