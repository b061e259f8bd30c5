"""`interviews.get`, `interviews.list` and `interviews.calendar_url`: interviews as their reader may see them —
the job's account sees them whole, the candidate their own without what is the employer's."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from procedures.applications.access import employs
from procedures.applications.interviews import feed, store
from procedures.applications.interviews.shapes import (
    CalendarUrl,
    CalendarUrlParams,
    Interview,
    InterviewPage,
    ListInterviews,
)
from procedures.jobs.search import cursor as codec
from rpc.api import Context, IdParams, InsufficientScope, NotFound, moment, one_row, parse_id, procedure
from rpc.core.cursor import CursorCodec

# Driven by the interviewer's own rows when a list is of one interviewer: their week is one index range.
_SOURCES = {
    False: ("FROM interviews AS i", "i.starts_at", "i.id"),
    True: (
        "FROM interview_interviewers AS o JOIN interviews AS i ON i.id = o.interview_id",
        "o.starts_at",
        "o.interview_id",
    ),
}
_FILTERS = {
    "application_id": "i.application_id = %(application_id)s",
    "job_id": "i.job_id = %(job_id)s",
    "interviewer_id": "o.user_id = %(interviewer_id)s",
    "status": f"({store.STATUS}) = %(status)s",
    "from": "{start} >= %(from)s",
    "to": "{start} < %(to)s",
}
_EPOCH = "SELECT calendar_epoch FROM users WHERE id = %(id)s"
_ROTATE = "UPDATE users SET calendar_epoch = calendar_epoch + 1 WHERE id = %(id)s RETURNING calendar_epoch"


class _Place(msgspec.Struct, frozen=True, array_like=True):
    """Where a page of interviews stopped: its query's fingerprint, the next page's number, and the last one's
    start and id."""

    query: str
    page: int
    starts_at: dt.datetime
    id: str


_place = msgspec.json.Decoder(_Place)


@procedure("interviews.get", scope="read:applications")
async def get_interview(ctx: Context, params: IdParams) -> Interview:
    """One interview: of your account's applications, or your own as a candidate."""
    read = await store.read(ctx, parse_id(params.id))
    if read is None or not _sees(ctx, *read):
        raise NotFound("No such interview.")
    return store.as_seen_by(ctx.principal, read[0])


@procedure("interviews.list", scope="read:applications")
async def list_interviews(ctx: Context, params: ListInterviews) -> InterviewPage:
    """Interviews in order of `starts_at`, filtered by `application_id`, `job_id`, `interviewer_id` (`me`: yours),
    `status`, and `from`/`to` (on `starts_at`: from inclusive, to exclusive), a page at a time (`next_cursor`).
    An employer sees their account's, a candidate their own."""
    values: dict[str, Any] = {"user_id": ctx.principal.user_id, "account_id": ctx.principal.account_id}
    sent = {
        "application_id": _id(params.application_id, "application_id"),
        "job_id": _id(params.job_id, "job_id"),
        "interviewer_id": ctx.principal.user_id
        if params.interviewer_id == "me"
        else _id(params.interviewer_id, "interviewer_id"),
        "status": params.status,
        "from": moment("from", params.from_),
        "to": moment("to", params.to),
    }
    by_interviewer = sent["interviewer_id"] is not None
    source, start, key = _SOURCES[by_interviewer]
    where = [store.VISIBLE[ctx.principal.role]]
    for name, value in sent.items():
        if value is not None:
            values[name] = value
            where.append(_FILTERS[name].format(start=start))
    query = codec.fingerprint({name: str(value) if value is not None else None for name, value in sent.items()})
    cursors = CursorCodec(ctx.settings.secret_key, "interviews.list")
    matching = " AND ".join(where)
    place = codec.opened(cursors, params.cursor, query, _place) if params.cursor is not None else None
    if place is not None:
        values |= {"after_at": place.starts_at, "after_id": place.id}
        where.append(f"({start}, {key}) > (%(after_at)s, %(after_id)s::uuid)")
    values["limit"] = params.per_page + 1
    total = f"SELECT count(*) {source} WHERE {matching}"
    sql = f"""SELECT page.*, ({total}) AS _total FROM (SELECT 1) AS one LEFT JOIN LATERAL (
        SELECT {store.COLUMNS} {source} WHERE {" AND ".join(where)} ORDER BY {start}, {key} LIMIT %(limit)s
    ) AS page ON true"""
    rows = await (await ctx.conn.execute(sql, values)).fetchall()
    found = [row for row in rows if row["id"] is not None]
    shown = [
        store.as_seen_by(ctx.principal, store.interview_of(_without_total(row))) for row in found[: params.per_page]
    ]
    page = place.page if place else 1
    next_cursor = None
    if len(found) > params.per_page:
        last = shown[-1]
        next_cursor = cursors.encode(msgspec.json.encode(_Place(query, page + 1, last.starts_at, last.id)))
    return InterviewPage(
        data=shown, total=int(rows[0]["_total"]), page=page, per_page=params.per_page, next_cursor=next_cursor
    )


@procedure("interviews.calendar_url", scope="read:applications")
async def calendar_url(ctx: Context, params: CalendarUrlParams) -> CalendarUrl:
    """The address of your private calendar feed (`{PUBLIC_URL}/calendar/{token}.ics`): every interview of yours
    not cancelled, from 30 days back, for a calendar to subscribe to. `rotate: true` (a change: it needs
    `write:applications`) gives a new address, and the old one stops answering at once."""
    user_id = ctx.principal.user_id
    if not params.rotate:
        epoch = (await one_row(await ctx.conn.execute(_EPOCH, {"id": user_id})))["calendar_epoch"]
        return CalendarUrl(url=feed.url(ctx.settings, user_id, epoch))
    if not ctx.principal.has_scope("write:applications"):
        raise InsufficientScope("write:applications", ctx.principal.scopes or ())
    async with ctx.transaction() as conn:
        epoch = (await one_row(await conn.execute(_ROTATE, {"id": user_id})))["calendar_epoch"]
    return CalendarUrl(url=feed.url(ctx.settings, user_id, epoch))


def _without_total(row: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in row.items() if name != "_total"}


def _sees(ctx: Context, interview: Interview, account_id: str) -> bool:
    return interview.candidate_id == ctx.principal.user_id or employs(ctx.principal, account_id)


def _id(value: Any, field: str) -> str | None:
    return None if value is None else str(parse_id(value, field))
