"""The applications' procedures: applying, reading, following the changes, and moving along the pipeline
(`procedures.applications` has the shapes and the pipeline's order, `moves` what a move does)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from procedures.applications import (
    EMPLOYERS,
    FINAL,
    Application,
    ApplicationCreated,
    CreateApplication,
    ListApplications,
    Review,
    Reviewed,
    Status,
    UpdateStatus,
)
from procedures.applications.access import (
    COLUMNS,
    Found,
    application_of,
    as_seen_by,
    find,
    find_owned,
    seen,
)
from procedures.applications.moves import KINDS, announce, check_move, move, record
from procedures.applications.notices import new_application
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
    on_conflict,
    one_row,
    page_and_total,
    parse_id,
    procedure,
)
from rpc.files.model import File

APPLIED_ONCE = "applications_job_candidate_key"
on_conflict(APPLIED_ONCE, "You have already applied to this job.")

_ATTACH = """
INSERT INTO application_files (application_id, file_id, kind, position)
SELECT %(application_id)s, sent.file_id, sent.kind, sent.position
FROM unnest(%(file_ids)s::uuid[], %(kinds)s::text[], %(positions)s::smallint[]) AS sent(file_id, kind, position)
"""
_JOB = "SELECT status, account_id::text AS account_id, title, company FROM jobs WHERE id = %(id)s"
_INSERT = f"""
WITH a AS (
    INSERT INTO applications (job_id, candidate_id, candidate_account_id, cover_letter, resume_url)
    VALUES (%(job_id)s, %(candidate_id)s, %(candidate_account_id)s, %(cover_letter)s, %(resume_url)s)
    RETURNING *
)
SELECT {COLUMNS} FROM a
"""
_SET_REVIEW = f"""
WITH a AS (
    UPDATE applications
    SET status = %(status)s, rating = %(rating)s, notes = %(notes)s, updated_at = now()
    WHERE id = %(id)s RETURNING *
)
SELECT {COLUMNS} FROM a
"""
# Who sees which applications: a candidate their own, an employer those to their account's jobs, an admin all.
_SCOPE = {
    "candidate": "a.candidate_id = %(user_id)s",
    "employer": "j.account_id = %(account_id)s",
    "admin": "TRUE",
}
_FEED = FeedQuery(
    name="applications.changes",
    columns=f"{COLUMNS}, j.account_id::text AS job_account_id",
    source="FROM applications AS a JOIN jobs AS j ON j.id = a.job_id",
    table="a",
)


@procedure(
    "applications.create", scope="write:applications", write=True, roles=("candidate",), emits=("application.created",)
)
async def create_application(ctx: Context, params: CreateApplication) -> Application:
    """Apply to a published job (event `application.created`, naming who applied); once per job. The job's
    account's members are told by e-mail (unless they turned it off)."""
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
    application = application_of(await one_row(cursor))
    if files:
        application = await _attach(ctx, application, files, resume_ids, params.attachment_file_ids)
    await record(ctx, application, None)
    found = Found(application, job["account_id"], ctx.principal.account_id, job["title"], job["company"])
    data = ApplicationCreated(
        application_id=application.id,
        job_id=application.job_id,
        candidate_id=application.candidate_id,
        status=application.status,
        candidate=found.candidate,
    )
    await ctx.emit("application.created", data, [job["account_id"], ctx.principal.account_id])
    await new_application(ctx, found)
    return as_seen_by(ctx.principal, application, job["account_id"])


@procedure("applications.list", scope="read:applications")
async def list_applications(ctx: Context, params: ListApplications) -> Page[Application]:
    """List applications, newest first: a candidate's own, or those to the employer's account's jobs (with who
    applied)."""
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
        f"{COLUMNS}, j.account_id::text AS job_account_id",
        f"FROM applications AS a JOIN jobs AS j ON j.id = a.job_id WHERE {condition}",
        "a.created_at DESC, a.id DESC",
        values,
    )
    return Page(data=seen(principal, rows), total=total, page=params.page, per_page=params.per_page)


@procedure("applications.changes", scope="read:applications")
async def application_changes(ctx: Context, params: FeedParams) -> Feed[Application]:
    """Every application you can see that changed after `cursor`, in its current state, oldest change first: a
    candidate's own, or those to the employer's account's jobs. Follow `next_cursor` while `has_more`; ask again
    later with the last one for what changed since. Nothing is ever skipped (docs/sync.md).
    """
    principal = ctx.principal
    values = {"user_id": principal.user_id, "account_id": principal.account_id}
    rows, next_cursor, has_more = await read_feed(ctx, _FEED, params, _SCOPE[principal.role], values)
    return Feed(data=seen(principal, rows), next_cursor=next_cursor, has_more=has_more)


@procedure("applications.get", scope="read:applications")
async def get_application(ctx: Context, params: IdParams) -> Application:
    """Get one application: your own, or one to your account's jobs (with who applied). Its scorecards are read
    with `scorecards.list`, under the no-peeking rule."""
    found = await find(ctx, params.id, lock=False)
    return as_seen_by(ctx.principal, found.application, found.job_account)


@procedure("applications.update_status", scope="write:applications", write=True, roles=EMPLOYERS, emits=KINDS)
async def update_status(ctx: Context, params: UpdateStatus) -> Application:
    """Move an application forward in the pipeline, or reject it (event `application.status_changed`). A
    rejected or hired candidate is told by e-mail; a decision cancels the interviews that have not started
    (`interview.cancelled`) and withdraws open offers (`offer.cancelled`)."""
    found = await find_owned(ctx, params.id)
    if params.status == "withdrawn":
        raise Forbidden("Only the candidate may withdraw an application.")
    check_move(found.application.status, params.status)
    moved = await move(ctx, found, params.status)
    return as_seen_by(ctx.principal, moved.application, moved.job_account)


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
    found = await find_owned(ctx, params.id)
    application = found.application
    if application.status in FINAL:
        raise InvalidTransition(application.status, "reviewed")
    status: Status = "reviewed" if application.status == "pending" else application.status
    rating = application.rating if params.rating is msgspec.UNSET else params.rating
    notes = application.notes if params.notes is msgspec.UNSET else params.notes
    cursor = await ctx.conn.execute(
        _SET_REVIEW, {"id": application.id, "status": status, "rating": rating, "notes": notes}
    )
    reviewed = found.replaced(application_of(await one_row(cursor)))
    event = Reviewed(
        application_id=application.id, job_id=application.job_id, reviewed_by=ctx.principal.user_id, rating=rating
    )
    await ctx.emit("application.reviewed", event, [found.job_account])
    if status != application.status:
        await record(ctx, reviewed.application, application.status)
        await announce(ctx, reviewed, application.status)
    return as_seen_by(ctx.principal, reviewed.application, found.job_account)


@procedure("applications.withdraw", scope="write:applications", write=True, roles=("candidate",), emits=KINDS)
async def withdraw(ctx: Context, params: IdParams) -> Application:
    """Withdraw your own application (event `application.status_changed`); its interviews that have not started
    are cancelled and its open offers withdrawn."""
    found = await find(ctx, params.id, lock=True)
    if found.application.candidate_id != ctx.principal.user_id:
        raise Forbidden("Only the candidate may withdraw an application.")
    if found.application.status in FINAL:
        raise InvalidTransition(found.application.status, "withdrawn")
    moved = await move(ctx, found, "withdrawn")
    return as_seen_by(ctx.principal, moved.application, moved.job_account)


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
