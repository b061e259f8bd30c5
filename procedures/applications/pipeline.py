"""The applications' procedures: applying, reading, following the changes, and moving along the pipeline
(`procedures.applications` has the shapes and the pipeline's order)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from procedures.applications import (
    EMPLOYERS,
    FINAL,
    PIPELINE,
    Application,
    ApplicationCreated,
    CreateApplication,
    ListApplications,
    Review,
    Reviewed,
    Status,
    StatusChanged,
    UpdateStatus,
)
from procedures.feed import Feed, FeedParams, FeedQuery, read_feed
from procedures.files import owned
from rpc.api import (
    Conflict,
    Context,
    Forbidden,
    Id,
    IdParams,
    InvalidTransition,
    NotFound,
    Page,
    Principal,
    on_conflict,
    one_row,
    page_and_total,
    parse_id,
    procedure,
)
from rpc.files.model import File, as_json, nested, nested_list

APPLIED_ONCE = "applications_job_candidate_key"
on_conflict(APPLIED_ONCE, "You have already applied to this job.")

_COLUMNS = f"""a.id::text AS id, a.job_id::text AS job_id, a.candidate_id::text AS candidate_id, a.status,
    a.cover_letter, a.resume_url, a.rating, a.notes, a.created_at, a.updated_at,
    (SELECT {as_json("f")} FROM application_files AS af JOIN files AS f ON f.id = af.file_id
     WHERE af.application_id = a.id AND af.kind = 'resume') AS resume,
    coalesce((SELECT json_agg({as_json("f")} ORDER BY af.position)
              FROM application_files AS af JOIN files AS f ON f.id = af.file_id
              WHERE af.application_id = a.id AND af.kind = 'attachment'), '[]') AS attachments"""
_ATTACH = """
INSERT INTO application_files (application_id, file_id, kind, position)
SELECT %(application_id)s, sent.file_id, sent.kind, sent.position
FROM unnest(%(file_ids)s::uuid[], %(kinds)s::text[], %(positions)s::smallint[]) AS sent(file_id, kind, position)
"""
_JOB = "SELECT status, account_id::text AS account_id FROM jobs WHERE id = %(id)s"
_INSERT = f"""
WITH a AS (
    INSERT INTO applications (job_id, candidate_id, candidate_account_id, cover_letter, resume_url)
    VALUES (%(job_id)s, %(candidate_id)s, %(candidate_account_id)s, %(cover_letter)s, %(resume_url)s)
    RETURNING *
)
SELECT {_COLUMNS} FROM a
"""
_LOCK = f"""
SELECT {_COLUMNS}, a.candidate_account_id::text AS candidate_account_id, j.account_id::text AS job_account_id
FROM applications AS a JOIN jobs AS j ON j.id = a.job_id
WHERE a.id = %(id)s
"""
_SET_STATUS = f"""
WITH a AS (
    UPDATE applications SET status = %(status)s, updated_at = now() WHERE id = %(id)s RETURNING *
)
SELECT {_COLUMNS} FROM a
"""
_SET_REVIEW = f"""
WITH a AS (
    UPDATE applications
    SET status = %(status)s, rating = %(rating)s, notes = %(notes)s, updated_at = now()
    WHERE id = %(id)s RETURNING *
)
SELECT {_COLUMNS} FROM a
"""
_HISTORY = """
INSERT INTO application_status_history (application_id, from_status, to_status, changed_by)
VALUES (%(application_id)s, %(from_status)s, %(to_status)s, %(changed_by)s)
"""
# Who sees which applications: a candidate their own, an employer those to their account's jobs, an admin all.
_SCOPE = {
    "candidate": "a.candidate_id = %(user_id)s",
    "employer": "j.account_id = %(account_id)s",
    "admin": "TRUE",
}
_FEED = FeedQuery(
    name="applications.changes",
    columns=f"{_COLUMNS}, j.account_id::text AS job_account_id",
    source="FROM applications AS a JOIN jobs AS j ON j.id = a.job_id",
    table="a",
)


@procedure(
    "applications.create", scope="write:applications", write=True, roles=("candidate",), emits=("application.created",)
)
async def create_application(ctx: Context, params: CreateApplication) -> Application:
    """Apply to a published job (event `application.created`); once per job."""
    job_id = parse_id(params.job_id, "job_id")
    cursor = await ctx.conn.execute(_JOB + " FOR SHARE", {"id": job_id})
    job = await cursor.fetchone()
    if job is None or (job["status"] == "draft" and job["account_id"] != ctx.principal.account_id):
        raise NotFound("No such job.")
    if job["status"] != "published":
        raise Conflict("This job does not take applications.", {"job_status": job["status"]})
    resume_ids: list[Id] = [] if params.resume_file_id is None else [params.resume_file_id]
    files = await owned(ctx, [*resume_ids, *params.attachment_file_ids])
    cursor = await ctx.conn.execute(
        _INSERT,
        {
            "job_id": job_id,
            "candidate_id": ctx.principal.user_id,
            "candidate_account_id": ctx.principal.account_id,
            "cover_letter": params.cover_letter,
            "resume_url": params.resume_url,
        },
    )
    application = _application(await one_row(cursor))
    if files:
        application = await _attach(ctx, application, files, resume_ids, params.attachment_file_ids)
    await _record(ctx, application, None)
    data = ApplicationCreated(
        application_id=application.id,
        job_id=application.job_id,
        candidate_id=application.candidate_id,
        status=application.status,
    )
    await ctx.emit("application.created", data, [job["account_id"], ctx.principal.account_id])
    return _as_seen_by(ctx.principal, application, job["account_id"])


@procedure("applications.list", scope="read:applications")
async def list_applications(ctx: Context, params: ListApplications) -> Page[Application]:
    """List applications, newest first: a candidate's own, or those to the employer's account's jobs."""
    principal = ctx.principal
    values: dict[str, Any] = {
        "user_id": principal.user_id,
        "account_id": principal.account_id,
        "limit": params.per_page,
        "offset": params.offset,
    }
    where = [_SCOPE[principal.role]]
    if params.job_id is not None:
        values["job_id"] = await _listable_job(ctx, params.job_id)
        where.append("a.job_id = %(job_id)s")
    if params.status is not None:
        values["status"] = params.status
        where.append("a.status = %(status)s")
    condition = " AND ".join(where)
    rows, total = await page_and_total(
        ctx,
        f"{_COLUMNS}, j.account_id::text AS job_account_id",
        f"FROM applications AS a JOIN jobs AS j ON j.id = a.job_id WHERE {condition}",
        "a.created_at DESC, a.id DESC",
        values,
    )
    return Page(data=_seen(principal, rows), total=total, page=params.page, per_page=params.per_page)


@procedure("applications.changes", scope="read:applications")
async def application_changes(ctx: Context, params: FeedParams) -> Feed[Application]:
    """Every application you can see that changed after `cursor`, in its current state, oldest change first: a
    candidate's own, or those to the employer's account's jobs. Follow `next_cursor` while `has_more`; ask again
    later with the last one for what changed since. Nothing is ever skipped (docs/sync.md).
    """
    principal = ctx.principal
    values = {"user_id": principal.user_id, "account_id": principal.account_id}
    rows, next_cursor, has_more = await read_feed(ctx, _FEED, params, _SCOPE[principal.role], values)
    return Feed(data=_seen(principal, rows), next_cursor=next_cursor, has_more=has_more)


@procedure("applications.get", scope="read:applications")
async def get_application(ctx: Context, params: IdParams) -> Application:
    """Get one application: your own, or one to your account's jobs."""
    application, job_account, _ = await _find(ctx, params.id, lock=False)
    return _as_seen_by(ctx.principal, application, job_account)


@procedure(
    "applications.update_status",
    scope="write:applications",
    write=True,
    roles=EMPLOYERS,
    emits=("application.status_changed",),
)
async def update_status(ctx: Context, params: UpdateStatus) -> Application:
    """Move an application forward in the pipeline, or reject it (event `application.status_changed`)."""
    application, job_account, candidate_account = await _find_owned(ctx, params.id)
    if params.status == "withdrawn":
        raise Forbidden("Only the candidate may withdraw an application.")
    _check_move(application.status, params.status)
    changed = await _change(ctx, application, params.status, job_account, candidate_account)
    return _as_seen_by(ctx.principal, changed, job_account)


@procedure(
    "applications.review",
    scope="write:applications",
    write=True,
    roles=EMPLOYERS,
    emits=("application.reviewed", "application.status_changed"),
)
async def review(ctx: Context, params: Review) -> Application:
    """Rate (1..5) and annotate an application; a pending one becomes `reviewed`.

    Emits `application.reviewed`, and `application.status_changed` when the status moves.
    """
    application, job_account, candidate_account = await _find_owned(ctx, params.id)
    if application.status in FINAL:
        raise InvalidTransition(application.status, "reviewed")
    status: Status = "reviewed" if application.status == "pending" else application.status
    rating = application.rating if params.rating is msgspec.UNSET else params.rating
    notes = application.notes if params.notes is msgspec.UNSET else params.notes
    cursor = await ctx.conn.execute(
        _SET_REVIEW, {"id": application.id, "status": status, "rating": rating, "notes": notes}
    )
    reviewed = _application(await one_row(cursor))
    event = Reviewed(
        application_id=reviewed.id, job_id=reviewed.job_id, reviewed_by=ctx.principal.user_id, rating=rating
    )
    await ctx.emit("application.reviewed", event, [job_account])
    if status != application.status:
        await _record(ctx, reviewed, application.status)
        await _announce_change(ctx, reviewed, application.status, job_account, candidate_account)
    return _as_seen_by(ctx.principal, reviewed, job_account)


@procedure(
    "applications.withdraw",
    scope="write:applications",
    write=True,
    roles=("candidate",),
    emits=("application.status_changed",),
)
async def withdraw(ctx: Context, params: IdParams) -> Application:
    """Withdraw your own application (event `application.status_changed`)."""
    application, job_account, candidate_account = await _find(ctx, params.id, lock=True)
    if application.candidate_id != ctx.principal.user_id:
        raise Forbidden("Only the candidate may withdraw an application.")
    if application.status in FINAL:
        raise InvalidTransition(application.status, "withdrawn")
    changed = await _change(ctx, application, "withdrawn", job_account, candidate_account)
    return _as_seen_by(ctx.principal, changed, job_account)


async def _attach(
    ctx: Context,
    application: Application,
    files: dict[str, File],
    resume_ids: Sequence[Id],
    attachment_ids: Sequence[Id],
) -> Application:
    """Hold the résumé and the attachments (in the order sent) with the application."""
    resume = [str(parse_id(value)) for value in resume_ids]
    attachments = [str(parse_id(value)) for value in attachment_ids]
    await ctx.conn.execute(
        _ATTACH,
        {
            "application_id": application.id,
            "file_ids": resume + attachments,
            "kinds": ["resume"] * len(resume) + ["attachment"] * len(attachments),
            "positions": [0] * len(resume) + list(range(len(attachments))),
        },
    )
    return msgspec.structs.replace(
        application,
        resume=files[resume[0]] if resume else None,
        attachments=[files[file_id] for file_id in attachments],
    )


def _application(row: dict[str, Any]) -> Application:
    """A row of `_COLUMNS` as an Application (its files arrive as JSON)."""
    return Application(**{**row, "resume": nested(row["resume"]), "attachments": nested_list(row["attachments"])})


def _check_move(current: Status, target: Status) -> None:
    """Forward along the pipeline (skipping allowed) or to `rejected`, from any non-final status."""
    if current not in FINAL:
        if target == "rejected":
            return
        if target in PIPELINE and PIPELINE.index(target) > PIPELINE.index(current):
            return
    raise InvalidTransition(current, target)


async def _change(
    ctx: Context, application: Application, target: Status, job_account: str, candidate_account: str
) -> Application:
    cursor = await ctx.conn.execute(_SET_STATUS, {"id": application.id, "status": target})
    changed = _application(await one_row(cursor))
    await _record(ctx, changed, application.status)
    await _announce_change(ctx, changed, application.status, job_account, candidate_account)
    return changed


async def _record(ctx: Context, application: Application, previous: Status | None) -> None:
    await ctx.conn.execute(
        _HISTORY,
        {
            "application_id": application.id,
            "from_status": previous,
            "to_status": application.status,
            "changed_by": ctx.principal.user_id,
        },
    )


async def _announce_change(
    ctx: Context, application: Application, previous: Status, job_account: str, candidate_account: str
) -> None:
    event = StatusChanged(
        application_id=application.id,
        job_id=application.job_id,
        old_status=previous,
        new_status=application.status,
        updated_by=ctx.principal.user_id,
    )
    await ctx.emit("application.status_changed", event, [job_account, candidate_account])


async def _find(ctx: Context, application_id: Id, *, lock: bool) -> tuple[Application, str, str]:
    """The application and the accounts of its job and candidate, if the caller may see it; else `404`."""
    query = _LOCK + (" FOR UPDATE OF a" if lock else "")
    cursor = await ctx.conn.execute(query, {"id": parse_id(application_id)})
    row = await cursor.fetchone()
    if row is None:
        raise NotFound("No such application.")
    job_account, candidate_account = row.pop("job_account_id"), row.pop("candidate_account_id")
    application = _application(row)
    principal = ctx.principal
    visible = application.candidate_id == principal.user_id or _employs(principal, job_account)
    if not visible:
        raise NotFound("No such application.")
    return application, job_account, candidate_account


async def _find_owned(ctx: Context, application_id: Id) -> tuple[Application, str, str]:
    """The application, locked, for an action of the employer: only the job's account may take it (admins:
    any), whoever its candidate is — applying to a job is no way into its pipeline. `404` unseen, `403` seen
    but not owned."""
    application, job_account, candidate_account = await _find(ctx, application_id, lock=True)
    if not _employs(ctx.principal, job_account):
        raise Forbidden("Only the account that owns the job may act on its applications.")
    return application, job_account, candidate_account


def _employs(principal: Principal, job_account: str) -> bool:
    """Whether `principal` acts for the job's account: an employer of it, or an admin."""
    return principal.is_admin or (principal.role == "employer" and principal.account_id == job_account)


async def _listable_job(ctx: Context, job_id: Id) -> str:
    """A job whose applications the caller may list: `404` if unseen, `403` if an employer does not own it."""
    cursor = await ctx.conn.execute(_JOB, {"id": parse_id(job_id, "job_id")})
    job = await cursor.fetchone()
    principal = ctx.principal
    owns = principal.is_admin or (job is not None and job["account_id"] == principal.account_id)
    if job is None or (job["status"] == "draft" and not owns):
        raise NotFound("No such job.")
    if principal.role == "employer" and not owns:
        raise Forbidden("Only the account that owns this job may list its applications.")
    return str(parse_id(job_id))


def _seen(principal: Principal, rows: list[dict[str, Any]]) -> list[Application]:
    """Rows carrying their job's account, as `principal` may see them."""
    seen = []
    for row in rows:
        job_account = row.pop("job_account_id")
        seen.append(_as_seen_by(principal, _application(row), job_account))
    return seen


def _as_seen_by(principal: Principal, application: Application, job_account: str) -> Application:
    """What `principal` may see: the employer's rating and notes only for those who act for the job's account."""
    if _employs(principal, job_account):
        return application
    return msgspec.structs.replace(application, rating=None, notes=None)
