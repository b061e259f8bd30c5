"""`alerts.create`, `alerts.list`, `alerts.delete`: a person's own saved searches, at most 20 each."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

from procedures.alerts.shapes import COLUMNS, MAX_ALERTS, Alert, CreateAlert, unsubscribe_hash
from rpc.api import (
    EXAMPLE_ID,
    Conflict,
    Context,
    Forbidden,
    Id,
    NotFound,
    Page,
    PageParams,
    Params,
    Struct,
    one_row,
    page_and_total,
    parse_id,
    procedure,
)

# The person's row is locked, so that creations at once take turns; their alerts are counted by the next
# statement, which sees what the creation it waited for committed (a count beside the lock, in one statement,
# would read the snapshot taken before the wait, and let 40 creations at once make 28 alerts).
_PERSON = """
SELECT email_verified_at IS NOT NULL AND email IS NOT NULL AS mailable
FROM users WHERE id = %(user_id)s AND deleted_at IS NULL
FOR UPDATE
"""
_ALERTS = "SELECT count(*) AS n FROM job_alerts WHERE user_id = %(user_id)s"
_INSERT = f"""
INSERT INTO job_alerts (
    id, user_id, q, location, company, employment_type, frequency, unsubscribe_hash, since_version
)
VALUES (%(id)s, %(user_id)s, %(q)s, %(location)s, %(company)s, %(employment_type)s, %(frequency)s, %(hash)s,
        coalesce((SELECT version FROM job_totals WHERE status = 'published'), 0))
RETURNING {COLUMNS}
"""
_DELETE = "DELETE FROM job_alerts WHERE id = %(id)s AND user_id = %(user_id)s RETURNING id::text AS id"


class DeleteAlert(Params, frozen=True, kw_only=True):
    id: Id

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID}


class AlertDeleted(Struct, frozen=True, kw_only=True):
    id: str
    deleted: bool


@procedure("alerts.create", scope="write:profile", write=True)
async def create(ctx: Context, params: CreateAlert) -> Alert:
    """Save a search: the jobs published from now on that `jobs.search` would find with these parameters are
    mailed to you, within a minute (`instant`) or in a daily digest. At most 20 alerts per person."""
    user_id = ctx.principal.user_id
    person = await (await ctx.conn.execute(_PERSON, {"user_id": user_id})).fetchone()
    if person is None or not person["mailable"]:
        raise Forbidden("Alerts are mailed: verify your e-mail address first.")
    if (await one_row(await ctx.conn.execute(_ALERTS, {"user_id": user_id})))["n"] >= MAX_ALERTS:
        raise Conflict(f"You have {MAX_ALERTS} alerts, the most one person may keep: delete one first.")
    types = [params.employment_type] if isinstance(params.employment_type, str) else params.employment_type
    alert_id = str(uuid.uuid4())
    values = {
        "id": alert_id,
        "user_id": user_id,
        "q": params.q,
        "location": params.location,
        "company": params.company,
        "employment_type": sorted(set(types)) if types else None,
        "frequency": params.frequency,
        "hash": unsubscribe_hash(ctx.settings.secret_key, alert_id),
    }
    row = await (await ctx.conn.execute(_INSERT, values)).fetchone()
    assert row is not None
    return Alert(**row)


@procedure("alerts.list", scope="read:profile")
async def list_alerts(ctx: Context, params: PageParams) -> Page[Alert]:
    """Your alerts, oldest first."""
    rows, total = await page_and_total(
        ctx,
        COLUMNS,
        "FROM job_alerts WHERE user_id = %(user_id)s",
        "created_at, id",
        {"user_id": ctx.principal.user_id, "limit": params.per_page, "offset": params.offset},
    )
    return Page(data=[Alert(**row) for row in rows], total=total, page=params.page, per_page=params.per_page)


@procedure("alerts.delete", scope="write:profile", write=True)
async def delete(ctx: Context, params: DeleteAlert) -> AlertDeleted:
    """Delete one of your alerts: nothing more is mailed for it."""
    values = {"id": parse_id(params.id), "user_id": ctx.principal.user_id}
    row = await (await ctx.conn.execute(_DELETE, values)).fetchone()
    if row is None:
        raise NotFound("You have no alert with this id.")
    return AlertDeleted(id=row["id"], deleted=True)
