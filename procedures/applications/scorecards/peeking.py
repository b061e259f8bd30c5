"""The no-peeking rule, written once: every way a scorecard is read (`scorecards.list`, `.get`,
`applications.get`, the panel's application page, whatever credential acts for the reader) goes through
`readable`.

A member who interviews on an interview of the application that is not cancelled, and has not yet submitted
their own scorecard for it, sees everyone else's scorecards of that application only as `{id, interview_id,
interviewer_id, submitted_at}`: that they exist, not what they say. Everyone else of the job's account, and
platform admins, see them whole. The candidate sees none of them, ever (`404`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from procedures.applications.access import Found, employs
from procedures.applications.scorecards.shapes import Rating, Scorecard
from rpc.api import Context, NotFound

_COLUMNS = """s.id::text AS id, s.interview_id::text AS interview_id, s.application_id::text AS application_id,
    s.interviewer_id::text AS interviewer_id, s.recommendation, s.ratings, s.notes, s.submitted_at"""
_READ = f"""
SELECT {_COLUMNS},
       EXISTS (SELECT FROM interview_interviewers AS o JOIN interviews AS i ON i.id = o.interview_id
               WHERE i.application_id = %(application_id)s AND i.cancelled_at IS NULL AND o.user_id = %(reader)s
                 AND NOT EXISTS (SELECT FROM scorecards AS own
                                 WHERE own.interview_id = o.interview_id AND own.interviewer_id = o.user_id))
           AS reader_owes
FROM (SELECT 1) AS one
LEFT JOIN scorecards AS s
       ON s.application_id = %(application_id)s
      AND (%(interview_id)s::uuid IS NULL OR s.interview_id = %(interview_id)s::uuid)
      AND (%(scorecard_id)s::uuid IS NULL OR s.id = %(scorecard_id)s::uuid)
ORDER BY s.seq
"""


async def readable(
    ctx: Context, found: Found, *, interview_id: Any = None, scorecard_id: Any = None
) -> list[Scorecard]:
    """The application's scorecards (of one interview, or the one with an id) as the caller may read them, in
    the order submitted; `404` for anyone but the job's account's members and platform admins."""
    if not employs(ctx.principal, found.job_account):
        raise NotFound("No such scorecard.")
    values = {
        "application_id": found.application.id,
        "reader": ctx.principal.user_id,
        "interview_id": interview_id,
        "scorecard_id": scorecard_id,
    }
    rows = await (await ctx.conn.execute(_READ, values)).fetchall()
    return [_as_seen(row, ctx.principal.user_id) for row in rows if row["id"] is not None]


def _as_seen(row: dict[str, Any], reader: str) -> Scorecard:
    """A scorecard whole, or — to a reader who still owes theirs — only the fact of it."""
    if row["reader_owes"] and row["interviewer_id"] != reader:
        return Scorecard(
            id=row["id"],
            interview_id=row["interview_id"],
            interviewer_id=row["interviewer_id"],
            submitted_at=row["submitted_at"],
        )
    return Scorecard(
        id=row["id"],
        interview_id=row["interview_id"],
        application_id=row["application_id"],
        interviewer_id=row["interviewer_id"],
        recommendation=row["recommendation"],
        ratings=msgspec.convert(row["ratings"], list[Rating]),
        notes=row["notes"],
        submitted_at=row["submitted_at"],
    )
