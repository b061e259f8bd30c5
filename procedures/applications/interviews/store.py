"""Interviews in the database: what a reader sees of one (its status as of the moment read), who may see which,
and the clash a double booking met.

Double bookings are refused by the database itself: exclusion constraints over `[starts_at, ends_at)` on the
candidate (`interviews`) and on each interviewer (`interview_interviewers`, whose copies of the time triggers
keep), so that of two bookings made at once exactly one commits. The later write learns which interview it met.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from procedures.applications.interviews.shapes import Interview, Interviewer
from rpc.api import Context, Principal, on_conflict

CANDIDATE_OVERLAP = "interviews_candidate_overlap"
INTERVIEWER_OVERLAP = "interview_interviewers_overlap"
on_conflict(CANDIDATE_OVERLAP, "The candidate already has an interview at that time.")
on_conflict(INTERVIEWER_OVERLAP, "An interviewer already has an interview at that time.")

# Every interviewer has submitted a scorecard: the interview is complete, whenever that happened.
_ALL_SUBMITTED = """NOT EXISTS (
    SELECT FROM interview_interviewers AS o
    WHERE o.interview_id = i.id
      AND NOT EXISTS (SELECT FROM scorecards AS s WHERE s.interview_id = i.id AND s.interviewer_id = o.user_id))"""
STATUS = f"""CASE WHEN i.cancelled_at IS NOT NULL THEN 'cancelled'
                  WHEN {_ALL_SUBMITTED} THEN 'completed'
                  WHEN i.ends_at <= now() THEN 'awaiting_feedback'
                  ELSE 'scheduled' END"""
COLUMNS = f"""i.id::text AS id, i.application_id::text AS application_id, i.job_id::text AS job_id,
    i.candidate_id::text AS candidate_id, i.title, i.starts_at, i.ends_at, i.time_zone, i.location, i.video_url,
    i.sequence, i.created_at, i.updated_at, {STATUS} AS status,
    (SELECT json_agg(json_build_object(
                'user_id', o.user_id::text, 'display_name', u.display_name,
                'scorecard_submitted',
                EXISTS (SELECT FROM scorecards AS s WHERE s.interview_id = i.id AND s.interviewer_id = o.user_id))
            ORDER BY o.position)
     FROM interview_interviewers AS o JOIN users AS u ON u.id = o.user_id
     WHERE o.interview_id = i.id) AS interviewers"""
# Who sees an interview: its candidate, the job's account's employers, a platform admin.
VISIBLE = {
    "candidate": "i.candidate_id = %(user_id)s",
    "employer": "i.account_id = %(account_id)s",
    "admin": "TRUE",
}
_ONE = f"SELECT {COLUMNS}, i.account_id::text AS account_id FROM interviews AS i WHERE i.id = %(id)s"
_CLASH = """
SELECT * FROM (
    SELECT i.id::text AS interview_id, i.account_id::text AS account_id, i.candidate_id::text AS user_id,
           i.starts_at, i.ends_at
    FROM interviews AS i
    WHERE i.candidate_id = %(candidate_id)s AND i.cancelled_at IS NULL AND i.id IS DISTINCT FROM %(id)s::uuid
      AND tstzrange(i.starts_at, i.ends_at) && tstzrange(%(starts_at)s, %(ends_at)s)
    UNION ALL
    SELECT o.interview_id::text, i.account_id::text, o.user_id::text, o.starts_at, o.ends_at
    FROM interview_interviewers AS o JOIN interviews AS i ON i.id = o.interview_id
    WHERE o.user_id = ANY(%(interviewer_ids)s::uuid[]) AND NOT o.cancelled
      AND o.interview_id IS DISTINCT FROM %(id)s::uuid
      AND tstzrange(o.starts_at, o.ends_at) && tstzrange(%(starts_at)s, %(ends_at)s)
) AS clashes
ORDER BY starts_at, interview_id
LIMIT 1
"""


class Clash(Exception):
    """A booking met another interview of one of its people (raised inside a savepoint, answered after it)."""


def interview_of(row: dict[str, Any]) -> Interview:
    """A row of `COLUMNS` as an Interview (its interviewers arrive as JSON)."""
    return Interview(**{**row, "interviewers": msgspec.convert(row["interviewers"] or [], list[Interviewer])})


def as_seen_by(principal: Principal, interview: Interview) -> Interview:
    """The candidate reads their interview without what is the employer's: who submitted a scorecard."""
    if principal.user_id != interview.candidate_id:
        return interview
    names = [Interviewer(user_id=one.user_id, display_name=one.display_name) for one in interview.interviewers]
    return msgspec.structs.replace(interview, interviewers=names)


async def read(ctx: Context, interview_id: Any, *, lock: bool = False) -> tuple[Interview, str] | None:
    """The interview (locked for a change with `lock`) and its job's account, whoever may see it (the caller
    decides)."""
    query = _ONE + (" FOR UPDATE OF i" if lock else "")
    row = await (await ctx.conn.execute(query, {"id": interview_id})).fetchone()
    if row is None:
        return None
    account_id = row.pop("account_id")
    return interview_of(row), account_id


async def clash(
    ctx: Context,
    *,
    interview_id: Any,
    candidate_id: str,
    interviewer_ids: list[str],
    starts_at: dt.datetime,
    ends_at: dt.datetime,
) -> dict[str, Any] | None:
    """The first interview that a booking of these people at this time overlaps: `{interview_id, user_id,
    starts_at, ends_at}` (the interview of another account is not named: only that its person is busy)."""
    values = {
        "id": interview_id,
        "candidate_id": candidate_id,
        "interviewer_ids": interviewer_ids,
        "starts_at": starts_at,
        "ends_at": ends_at,
    }
    row = await (await ctx.conn.execute(_CLASH, values)).fetchone()
    if row is None:
        return None
    own = row.pop("account_id") == ctx.principal.account_id or ctx.principal.is_admin
    return {
        "interview_id": row["interview_id"] if own else None,
        "user_id": row["user_id"],
        "starts_at": _utc(row["starts_at"]),
        "ends_at": _utc(row["ends_at"]),
    }


def _utc(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
