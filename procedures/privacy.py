"""A person's own data (docs/privacy.md): everything held about them in one document, their erasure, and the
account's audit log. The mechanisms are the framework's (`rpc.privacy`, `rpc.audit.entries`), shared with the
panel and `bin/admin`; these are their API faces, and the business's share of them (`PRIVACY`: what an erasure
empties and retention lets go of in the business's tables, and the export's document), handed in at assembly."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import msgspec

from procedures.alerts.shapes import COLUMNS as ALERT_COLUMNS
from procedures.alerts.shapes import Alert
from procedures.files import files_of
from rpc.api import (
    NO_NUL,
    Conflict,
    Connection,
    Context,
    Empty,
    FieldError,
    InvalidParams,
    Moment,
    NotFound,
    Params,
    Struct,
    moment,
    procedure,
)
from rpc.audit import entries
from rpc.audit.entries import AuditEntry
from rpc.privacy.erasure import LastMemberPaying, erase_user
from rpc.privacy.export import ExportedApiKey, ExportedFile, ExportedGrant, ExportedSession, Held, held
from rpc.privacy.profile import Profile, read_profile
from rpc.privacy.steps import PrivacySteps


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


class ExportedAlert(Alert, frozen=True, kw_only=True):
    last_sent_at: dt.datetime | None


class ExportedInterview(Struct, frozen=True, kw_only=True):
    """An interview the person was in, as its candidate or as an interviewer."""

    id: str
    application_id: str
    job_title: str
    company: str
    role: str
    title: str
    starts_at: dt.datetime
    ends_at: dt.datetime
    time_zone: str
    location: str | None
    video_url: str | None
    cancelled_at: dt.datetime | None


class ExportedOffer(Struct, frozen=True, kw_only=True):
    """An offer the person received (and their answer)."""

    id: str
    application_id: str
    job_title: str
    company: str
    version: int
    status: str
    title: str
    start_date: dt.date
    salary: dict[str, str]
    expires_at: dt.datetime
    sent_at: dt.datetime | None
    responded_at: dt.datetime | None
    response_note: str | None


class ExportedScorecard(Struct, frozen=True, kw_only=True):
    """A scorecard the person wrote as an interviewer."""

    id: str
    interview_id: str
    application_id: str
    recommendation: str
    ratings: list[dict[str, Any]]
    notes: str | None
    submitted_at: dt.datetime


class Export(Struct, frozen=True, kw_only=True):
    """Everything held about the caller."""

    profile: Profile
    applications: list[ExportedApplication]
    interviews: list[ExportedInterview]
    offers: list[ExportedOffer]
    scorecards: list[ExportedScorecard]
    alerts: list[ExportedAlert]
    files: list[ExportedFile]
    api_keys: list[ExportedApiKey]
    oauth_grants: list[ExportedGrant]
    sessions: list[ExportedSession]
    audit: list[AuditEntry]


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

_ALERTS = f"SELECT {ALERT_COLUMNS}, last_sent_at FROM job_alerts WHERE user_id = %(id)s ORDER BY created_at, id"
_INTERVIEWS = """
SELECT i.id::text AS id, i.application_id::text AS application_id, j.title AS job_title, j.company,
       CASE WHEN i.candidate_id = %(id)s THEN 'candidate' ELSE 'interviewer' END AS role, i.title, i.starts_at,
       i.ends_at, i.time_zone, i.location, i.video_url, i.cancelled_at
FROM interviews AS i JOIN jobs AS j ON j.id = i.job_id
WHERE i.candidate_id = %(id)s
   OR EXISTS (SELECT FROM interview_interviewers AS o WHERE o.interview_id = i.id AND o.user_id = %(id)s)
ORDER BY i.starts_at, i.id
"""
# What reached the candidate: offers sent to them, answered or not (the employer's drafts are the employer's).
_OFFERS = """
SELECT o.id::text AS id, o.application_id::text AS application_id, j.title AS job_title, j.company, o.version,
       o.status, o.title, o.start_date,
       json_build_object('amount', o.salary_amount::text, 'currency', o.salary_currency, 'period', o.salary_period)
           AS salary,
       o.expires_at, o.sent_at, o.responded_at, o.response_note
FROM offers AS o JOIN jobs AS j ON j.id = o.job_id
WHERE o.candidate_id = %(id)s AND o.sent_at IS NOT NULL
ORDER BY o.created_at, o.id
"""
_SCORECARDS = """
SELECT id::text AS id, interview_id::text AS interview_id, application_id::text AS application_id, recommendation,
       ratings, notes, submitted_at
FROM scorecards WHERE interviewer_id = %(id)s ORDER BY submitted_at, id
"""


async def document(conn: Connection, held: Held) -> Export:
    """The export: what the framework holds of the person, their applications with their history, their
    interviews, the offers they received, the scorecards they wrote, and their job alerts."""
    person = {"id": held.profile.id}

    async def rows(query: str) -> list[dict[str, Any]]:
        return await (await conn.execute(query, person)).fetchall()

    return Export(
        profile=held.profile,
        applications=[ExportedApplication(**row) for row in await rows(_APPLICATIONS)],
        interviews=[ExportedInterview(**row) for row in await rows(_INTERVIEWS)],
        offers=[ExportedOffer(**row) for row in await rows(_OFFERS)],
        scorecards=[ExportedScorecard(**row) for row in await rows(_SCORECARDS)],
        alerts=[ExportedAlert(**row) for row in await rows(_ALERTS)],
        files=held.files,
        api_keys=held.api_keys,
        oauth_grants=held.oauth_grants,
        sessions=held.sessions,
        audit=held.audit,
    )


@procedure("profile.export", scope="read:profile")
async def export_profile(ctx: Context, params: Empty) -> Export:
    """Everything held about you, in one document (KVKK art. 11, GDPR arts. 15 and 20); the export is recorded
    in your account's audit log."""
    # A read runs outside a write transaction: the audit entry needs one of its own, committed with the export.
    async with ctx.conn.transaction():
        framework = await held(
            ctx.conn,
            ctx.principal.user_id,
            account_id=ctx.principal.account_id,
            actor=ctx.actor,
            origin=ctx.origin,
            links=files_of(ctx).links,
        )
        return await document(ctx.conn, framework)


class DeleteProfile(Params, frozen=True, kw_only=True):
    confirm: str

    example: ClassVar[Mapping[str, Any]] = {"confirm": "ada@example.com"}

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
    profile = await read_profile(ctx.conn, ctx.principal.user_id)
    if profile.email is None or params.confirm.strip().lower() != profile.email:
        raise InvalidParams([{"field": "confirm", "message": "Type your e-mail address exactly to confirm."}])
    try:
        erased = await erase_user(
            ctx.conn,
            ctx.emitter,
            PRIVACY,
            profile.id,
            actor=ctx.actor,
            origin=ctx.origin,
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

    example: ClassVar[Mapping[str, Any]] = {
        "action": "api_key.created",
        "since": "2026-11-01T00:00:00Z",
        "per_page": 20,
    }


@procedure("audit.list", scope="read:audit", roles=entries.AUDIT_ROLES)
async def list_audit(ctx: Context, params: ListAudit) -> entries.AuditPage:
    """Your account's audit log, newest first (a platform admin's: every account's), filtered by `action`,
    `actor_id` and `since`, a page at a time."""
    filters = entries.Filters(
        account_id=None if ctx.principal.is_admin else ctx.principal.account_id,
        action=params.action,
        actor_id=params.actor_id,
        since=moment("since", params.since),
    )
    return await entries.page(
        ctx.conn, filters, cursor=params.cursor, per_page=params.per_page, secret_key=ctx.settings.secret_key
    )


# The business's share of a person's privacy, handed to rpc/privacy at assembly (`Business.privacy`).
PRIVACY = PrivacySteps(
    erase=(
        # What they wrote, or was written about them, in their applications; the applications stay, anonymized.
        """UPDATE applications SET cover_letter = NULL, resume_url = NULL, notes = NULL, updated_at = now()
           WHERE candidate_id = %(id)s""",
        # Their files leave their applications; the framework then deletes the files (the sweep, their bytes).
        "DELETE FROM application_files WHERE file_id IN (SELECT id FROM files WHERE owner_id = %(id)s)",
        # Their saved searches (job alerts): nothing of them is kept.
        "DELETE FROM job_alerts WHERE user_id = %(id)s",
        # Their interviews (with the scorecards written on them) and the offers made to them go with what their
        # applications held.
        "DELETE FROM interviews WHERE candidate_id = %(id)s",
        "DELETE FROM offers WHERE candidate_id = %(id)s",
        # `application.created` named them (name, e-mail, headline, location) to the job's account: its stored
        # body goes, as retention would empty it, and a delivery of it still waiting is not attempted.
        """WITH named AS (
               UPDATE events SET body = ''::bytea
               WHERE account_ids @> ARRAY[%(account_id)s::uuid] AND kind = 'application.created'
                 AND body <> ''::bytea AND convert_from(body, 'UTF8')::jsonb #>> '{data,candidate_id}' = %(id)s::text
               RETURNING id)
           UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,
                                         last_error = 'its event named a person since erased'
           WHERE event_id IN (SELECT id FROM named) AND status = 'pending'""",
    ),
    keeps_last_member="EXISTS (SELECT FROM subscriptions WHERE account_id = %(account_id)s AND status = 'active')",
    retention={
        # The files sent with finished applications are let go; the files sweep deletes each one (and its
        # bytes) once no application or profile refers to it.
        "application files": """
            DELETE FROM application_files WHERE application_id IN (
                SELECT a.id FROM applications AS a
                WHERE a.status IN ('hired', 'rejected', 'withdrawn')
                  AND a.updated_at < now() - make_interval(days => %(application_days)s)
                  AND EXISTS (SELECT FROM application_files AS af WHERE af.application_id = a.id)
                ORDER BY a.updated_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED)""",
        # The interviews (with their scorecards) and offers of finished applications go with their texts.
        "interviews": """
            DELETE FROM interviews WHERE id IN (
                SELECT i.id FROM applications AS a JOIN interviews AS i ON i.application_id = a.id
                WHERE a.status IN ('hired', 'rejected', 'withdrawn')
                  AND a.updated_at < now() - make_interval(days => %(application_days)s)
                ORDER BY a.updated_at LIMIT %(batch)s FOR UPDATE OF i SKIP LOCKED)""",
        "offers": """
            DELETE FROM offers WHERE id IN (
                SELECT o.id FROM applications AS a JOIN offers AS o ON o.application_id = a.id
                WHERE a.status IN ('hired', 'rejected', 'withdrawn')
                  AND a.updated_at < now() - make_interval(days => %(application_days)s)
                ORDER BY a.updated_at LIMIT %(batch)s FOR UPDATE OF o SKIP LOCKED)""",
        "applications": """
            UPDATE applications SET cover_letter = NULL, resume_url = NULL, notes = NULL WHERE id IN (
                SELECT id FROM applications
                WHERE status IN ('hired', 'rejected', 'withdrawn')
                  AND (cover_letter IS NOT NULL OR resume_url IS NOT NULL OR notes IS NOT NULL)
                  AND updated_at < now() - make_interval(days => %(application_days)s)
                ORDER BY updated_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED)""",
    },
    document=document,
)
