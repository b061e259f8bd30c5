"""A person's own data (CONTRACT.md §20): everything held about them in one document, and their erasure."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from typing import Annotated, Any

import msgspec

from procedures.common import NO_NUL, Moment, moment
from procedures.profile import Profile, me
from rpc.audit import log as audit_log
from rpc.core.context import Context
from rpc.core.envelope import Empty, FieldError, Params, Struct
from rpc.core.errors import Conflict, InvalidParams, NotFound
from rpc.core.registry import procedure
from rpc.privacy.erasure import LastMemberPaying, erase_user


class StatusChange(Struct, frozen=True, kw_only=True):
    status: str
    at: dt.datetime
    by: str | None


class ExportedApplication(Struct, frozen=True, kw_only=True):
    id: str
    job_id: str
    job_title: str
    status: str
    cover_letter: str | None
    resume_url: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    history: list[StatusChange]


class ExportedApiKey(Struct, frozen=True, kw_only=True):
    id: str
    name: str
    mode: str
    prefix: str
    scopes: list[str]
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    revoked_at: dt.datetime | None


class ExportedGrant(Struct, frozen=True, kw_only=True):
    id: str
    client_id: str
    client_name: str
    scopes: list[str]
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    expires_at: dt.datetime
    revoked_at: dt.datetime | None


class ExportedSession(Struct, frozen=True, kw_only=True):
    id: str
    kind: str  # "web" (the panel's and consent page's cookie) or "api" (a refresh-token family)
    created_at: dt.datetime
    expires_at: dt.datetime


class AuditEntry(Struct, frozen=True, kw_only=True):
    id: str
    at: dt.datetime
    actor_id: str | None
    actor_kind: str
    action: str
    target_id: str | None
    client_address: str | None
    user_agent: str | None


class Export(Struct, frozen=True, kw_only=True):
    """Everything held about the caller."""

    profile: Profile
    applications: list[ExportedApplication]
    api_keys: list[ExportedApiKey]
    oauth_grants: list[ExportedGrant]
    sessions: list[ExportedSession]
    audit: list[AuditEntry]


AUDIT_COLUMNS = """id::text AS id, at, actor_id, actor_kind, action, target_id, client_address, user_agent"""
_APPLICATIONS = """
SELECT a.id::text AS id, a.job_id::text AS job_id, j.title AS job_title, a.status, a.cover_letter, a.resume_url,
       a.created_at, a.updated_at,
       coalesce((SELECT json_agg(json_build_object('status', h.to_status, 'at', h.changed_at,
                                                   'by', h.changed_by::text) ORDER BY h.id)
                 FROM application_status_history AS h WHERE h.application_id = a.id), '[]') AS history
FROM applications AS a JOIN jobs AS j ON j.id = a.job_id
WHERE a.candidate_id = %(id)s
ORDER BY a.created_at DESC, a.id DESC
"""
_API_KEYS = """
SELECT id::text AS id, name, mode, prefix, scopes, created_at, last_used_at, revoked_at
FROM api_keys WHERE user_id = %(id)s ORDER BY created_at DESC, id
"""
_GRANTS = """
SELECT g.id::text AS id, g.client_id, c.name AS client_name, g.scopes, g.created_at, g.last_used_at, g.expires_at,
       g.revoked_at
FROM oauth_grants AS g JOIN oauth_clients AS c ON c.id = g.client_id
WHERE g.user_id = %(id)s ORDER BY g.created_at DESC, g.id
"""
_SESSIONS = """
SELECT id::text AS id, 'web' AS kind, created_at, expires_at FROM web_sessions
WHERE user_id = %(id)s AND expires_at > now()
UNION ALL
SELECT family_id::text, 'api', min(created_at), max(expires_at) FROM refresh_tokens
WHERE user_id = %(id)s AND revoked_at IS NULL GROUP BY family_id HAVING max(expires_at) > now()
ORDER BY created_at DESC
"""
# What the person did, and what was done to them (a sign-in, an erasure): both use an index.
_ABOUT = f"""
SELECT {AUDIT_COLUMNS} FROM audit_entries WHERE actor_kind = 'user' AND actor_id = %(id)s
UNION
SELECT {AUDIT_COLUMNS} FROM audit_entries WHERE target_id = %(id)s
ORDER BY at DESC, id DESC
"""


async def _rows(ctx: Context, query: str) -> list[dict[str, Any]]:
    cursor = await ctx.conn.execute(query, {"id": ctx.principal.user_id})
    return await cursor.fetchall()


@procedure("profile.export", scope="read:profile")
async def export(ctx: Context, params: Empty) -> Export:
    """Everything held about you, in one document (KVKK art. 11, GDPR arts. 15 and 20); the export is recorded
    in your account's audit log."""
    # A read runs outside a write transaction: the audit entry needs one of its own, committed with the export.
    async with ctx.conn.transaction():
        await ctx.audit("profile.exported", ctx.principal.user_id)
        return Export(
            profile=await me(ctx, Empty()),
            applications=[ExportedApplication(**row) for row in await _rows(ctx, _APPLICATIONS)],
            api_keys=[ExportedApiKey(**row) for row in await _rows(ctx, _API_KEYS)],
            oauth_grants=[ExportedGrant(**row) for row in await _rows(ctx, _GRANTS)],
            sessions=[ExportedSession(**row) for row in await _rows(ctx, _SESSIONS)],
            audit=[AuditEntry(**row) for row in await _rows(ctx, _ABOUT)],
        )


class DeleteProfile(Params, frozen=True, kw_only=True):
    confirm: str

    def __post_init__(self) -> None:
        if not self.confirm.strip():
            raise FieldError("confirm", "Type your e-mail address to confirm.")


class Deleted(Struct, frozen=True, kw_only=True):
    id: str
    deleted: bool


@procedure("profile.delete", scope="write:profile", write=True, emits=("user.deleted",))
async def delete(ctx: Context, params: DeleteProfile) -> Deleted:
    """Erase yourself: your profile, credentials and what you wrote in applications go; the applications stay
    for the employers, anonymized. `confirm` must be your e-mail address."""
    profile = await me(ctx, Empty())
    if profile.email is None or params.confirm.strip().lower() != profile.email:
        raise InvalidParams([{"field": "confirm", "message": "Type your e-mail address exactly to confirm."}])
    try:
        erased = await erase_user(
            ctx.conn,
            ctx.emitter,
            profile.id,
            actor=audit_log.Actor.of(ctx.principal),
            origin=audit_log.Origin(ctx.client_address, ctx.user_agent),
        )
    except LastMemberPaying as exc:
        raise Conflict(
            "You are the last member of an account with an active subscription: cancel it or add a member first."
        ) from exc
    if not erased:
        raise NotFound("Your user no longer exists.")
    return Deleted(id=profile.id, deleted=True)


Action = Annotated[str, msgspec.Meta(max_length=100, pattern=NO_NUL)]
PerPage = Annotated[int, msgspec.Meta(ge=1, le=100)]
Cursor = Annotated[str, msgspec.Meta(max_length=200)]


class ListAudit(Params, frozen=True, kw_only=True):
    action: Action | None = None
    actor_id: Action | None = None
    since: Moment | None = None
    cursor: Cursor | None = None
    per_page: PerPage = 20


class AuditPage(Struct, frozen=True, kw_only=True):
    data: list[AuditEntry]
    next_cursor: str | None


def _query_key(params: ListAudit, principal_account: str | None) -> str:
    """What a cursor is bound to: every parameter but `cursor` and `per_page`, and whose log it walks."""
    query = [params.action, params.actor_id, params.since, principal_account]
    return hashlib.sha256(msgspec.json.encode(query)).hexdigest()[:16]


def _after(params: ListAudit, bound_to: str) -> int | None:
    """The id a cursor continues after; a cursor malformed or of another query is `422` (field `cursor`)."""
    if params.cursor is None:
        return None
    try:
        decoded = msgspec.json.decode(base64.urlsafe_b64decode(params.cursor.encode() + b"=="), type=tuple[int, str])
    except (ValueError, msgspec.DecodeError):
        decoded = None
    if decoded is None or decoded[1] != bound_to:
        raise InvalidParams([{"field": "cursor", "message": "Not a cursor of this query: start again without it."}])
    return decoded[0]


@procedure("audit.list", scope="read:audit", roles=("employer", "admin"))
async def list_audit(ctx: Context, params: ListAudit) -> AuditPage:
    """Your account's audit log, newest first (a platform admin's: every account's), filtered by `action`,
    `actor_id` and `since`, a page at a time."""
    account = None if ctx.principal.is_admin else ctx.principal.account_id
    bound_to = _query_key(params, account)
    values = {
        "account_id": account,
        "action": params.action,
        "actor_id": params.actor_id,
        "since": moment("since", params.since),
        "after": _after(params, bound_to),
        "limit": params.per_page + 1,
    }
    cursor = await ctx.conn.execute(
        f"""SELECT {AUDIT_COLUMNS} FROM audit_entries
            WHERE (%(account_id)s::uuid IS NULL OR account_id = %(account_id)s::uuid)
              AND (%(action)s::text IS NULL OR action = %(action)s)
              AND (%(actor_id)s::text IS NULL OR actor_id = %(actor_id)s)
              AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)
              AND (%(after)s::bigint IS NULL OR id < %(after)s)
            ORDER BY id DESC LIMIT %(limit)s""",
        values,
    )
    rows = await cursor.fetchall()
    page = [AuditEntry(**row) for row in rows[: params.per_page]]
    more = len(rows) > params.per_page
    next_cursor = (
        base64.urlsafe_b64encode(msgspec.json.encode((int(page[-1].id), bound_to))).rstrip(b"=").decode()
        if more
        else None
    )
    return AuditPage(data=page, next_cursor=next_cursor)
