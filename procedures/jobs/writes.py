"""The jobs' writes: `jobs.create` (a draft), `jobs.update`, and the moves `draft → published → closed`, each
announced to the account's systems as an event."""

from __future__ import annotations

import msgspec

from procedures.jobs.reads import owned
from procedures.jobs.shapes import EMPLOYERS, JOB_COLUMNS, CreateJob, Job, JobEvent, JobStatus, UpdateJob
from rpc.api import Context, Id, IdParams, InvalidTransition, changes, procedure, set_clause

_EDITABLE = ("title", "company", "location", "description", "employment_type", "scorecard_attributes")
_INSERT = f"""
INSERT INTO jobs (account_id, created_by, title, company, location, description, employment_type,
                  scorecard_attributes)
VALUES (%(account_id)s, %(user_id)s, %(title)s, %(company)s, %(location)s, %(description)s, %(employment_type)s,
        %(scorecard_attributes)s)
RETURNING {JOB_COLUMNS}
"""
_PUBLISH = f"""
UPDATE jobs SET status = 'published', published_at = now(), updated_at = now()
WHERE id = %(id)s RETURNING {JOB_COLUMNS}
"""
_CLOSE = f"""
UPDATE jobs SET status = 'closed', closed_at = now(), updated_at = now()
WHERE id = %(id)s RETURNING {JOB_COLUMNS}
"""


@procedure("jobs.create", scope="write:jobs", write=True, roles=EMPLOYERS)
async def create_job(ctx: Context, params: CreateJob) -> Job:
    """Create a job in your account as a `draft`."""
    cursor = await ctx.conn.execute(
        _INSERT,
        {
            "account_id": ctx.principal.account_id,
            "user_id": ctx.principal.user_id,
            **msgspec.structs.asdict(params),
            "scorecard_attributes": list(params.scorecard_attributes),
        },
    )
    return Job(**await cursor.fetchone())  # type: ignore[arg-type]


@procedure("jobs.update", scope="write:jobs", write=True, roles=EMPLOYERS, emits=("job.updated",))
async def update_job(ctx: Context, params: UpdateJob) -> Job:
    """Change any of a job's title, company, location, description and employment type (event `job.updated`)."""
    job, account_id = await owned(ctx, params.id)
    changed = changes(params, _EDITABLE)
    if "scorecard_attributes" in changed:
        changed["scorecard_attributes"] = list(changed["scorecard_attributes"])
    if not changed:
        return job
    cursor = await ctx.conn.execute(
        f"UPDATE jobs SET {set_clause(changed)} WHERE id = %(id)s RETURNING {JOB_COLUMNS}",
        {**changed, "id": job.id},
    )
    updated = Job(**await cursor.fetchone())  # type: ignore[arg-type]
    await _announce(ctx, "job.updated", updated, account_id)
    return updated


@procedure("jobs.publish", scope="write:jobs", write=True, roles=EMPLOYERS, emits=("job.published",))
async def publish_job(ctx: Context, params: IdParams) -> Job:
    """Publish a draft (`draft → published`, event `job.published`)."""
    return await _transition(ctx, params.id, "draft", "published", _PUBLISH)


@procedure("jobs.close", scope="write:jobs", write=True, roles=EMPLOYERS, emits=("job.closed",))
async def close_job(ctx: Context, params: IdParams) -> Job:
    """Close a published job (`published → closed`, event `job.closed`)."""
    return await _transition(ctx, params.id, "published", "closed", _CLOSE)


async def _transition(ctx: Context, job_id: Id, source: JobStatus, target: JobStatus, query: str) -> Job:
    job, account_id = await owned(ctx, job_id)
    if job.status != source:
        raise InvalidTransition(job.status, target)
    cursor = await ctx.conn.execute(query, {"id": job.id})
    changed = Job(**await cursor.fetchone())  # type: ignore[arg-type]
    await _announce(ctx, f"job.{target}", changed, account_id)
    return changed


async def _announce(ctx: Context, kind: str, job: Job, account_id: str) -> None:
    await ctx.emit(kind, JobEvent(job_id=job.id, title=job.title, status=job.status), [account_id])
