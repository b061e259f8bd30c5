"""`scorecards.submit`, `.list` and `.get`: an interviewer's feedback, given once per interview from its start,
read under the no-peeking rule (`peeking.readable`)."""

from __future__ import annotations

import msgspec

from procedures.applications import EMPLOYERS
from procedures.applications.access import employs, find
from procedures.applications.scorecards.peeking import readable
from procedures.applications.scorecards.shapes import ListScorecards, Scorecard, ScorecardSubmitted, SubmitScorecard
from rpc.api import (
    Conflict,
    Context,
    Forbidden,
    Id,
    IdParams,
    InvalidParams,
    NotFound,
    Page,
    on_conflict,
    one_row,
    parse_id,
    procedure,
)

ONCE = "scorecards_interviewer_key"
on_conflict(ONCE, "You have already submitted your scorecard for this interview; it cannot be changed.")

_INTERVIEW = """
SELECT i.id::text AS id, i.application_id::text AS application_id, i.job_id::text AS job_id,
       i.account_id::text AS account_id, i.starts_at, i.starts_at <= now() AS begun,
       i.cancelled_at IS NOT NULL AS cancelled, j.scorecard_attributes,
       EXISTS (SELECT FROM interview_interviewers AS o WHERE o.interview_id = i.id AND o.user_id = %(user_id)s)
           AS interviewer
FROM interviews AS i JOIN jobs AS j ON j.id = i.job_id
WHERE i.id = %(id)s
FOR SHARE OF i
"""
_INSERT = """
INSERT INTO scorecards (interview_id, application_id, interviewer_id, recommendation, ratings, notes)
VALUES (%(interview_id)s, %(application_id)s, %(interviewer_id)s, %(recommendation)s, %(ratings)s::jsonb, %(notes)s)
RETURNING id::text AS id, submitted_at
"""
_STOP_REMINDING = """
UPDATE interview_interviewers SET next_reminder_at = NULL
WHERE interview_id = %(interview_id)s AND user_id = %(user_id)s
"""
_APPLICATION_OF_INTERVIEW = "SELECT application_id::text AS application_id FROM interviews WHERE id = %(id)s"
_APPLICATION_OF_SCORECARD = "SELECT application_id::text AS application_id FROM scorecards WHERE id = %(id)s"


@procedure("scorecards.submit", scope="write:applications", write=True, roles=EMPLOYERS, emits=("scorecard.submitted",))
async def submit(ctx: Context, params: SubmitScorecard) -> Scorecard:
    """Submit your scorecard for an interview you are on, once, from its start: a recommendation, ratings of the
    job's scorecard attributes (1..4) and notes. Event `scorecard.submitted` (who, on which interview: never the
    verdict). Until you have, the others' scorecards of that application show you only that they exist."""
    interview_id = parse_id(params.interview_id, "interview_id")
    values = {"id": interview_id, "user_id": ctx.principal.user_id}
    interview = await (await ctx.conn.execute(_INTERVIEW, values)).fetchone()
    if interview is None or not employs(ctx.principal, interview["account_id"]):
        raise NotFound("No such interview.")
    if not interview["interviewer"]:
        raise Forbidden("Only the interviewers of this interview submit its scorecards.")
    unknown = sorted({rating.attribute for rating in params.ratings} - set(interview["scorecard_attributes"]))
    if unknown:
        named = ", ".join(interview["scorecard_attributes"]) or "none: rate nothing, or add them with jobs.update"
        raise InvalidParams(
            [{"field": "ratings", "message": f"{unknown[0]!r} is not one of the job's attributes ({named})."}]
        )
    if interview["cancelled"]:
        raise Conflict("This interview was cancelled: it takes no scorecard.", {"interview_status": "cancelled"})
    if not interview["begun"]:
        starts = interview["starts_at"].strftime("%Y-%m-%dT%H:%M:%SZ")
        raise Conflict(f"This interview has not begun: submit your scorecard from {starts} on.", {"starts_at": starts})
    row = await one_row(
        await ctx.conn.execute(
            _INSERT,
            {
                "interview_id": interview_id,
                "application_id": interview["application_id"],
                "interviewer_id": ctx.principal.user_id,
                "recommendation": params.recommendation,
                "ratings": msgspec.json.encode(params.ratings).decode(),
                "notes": params.notes,
            },
        )
    )
    await ctx.conn.execute(_STOP_REMINDING, {"interview_id": interview_id, "user_id": ctx.principal.user_id})
    event = ScorecardSubmitted(
        scorecard_id=row["id"],
        interview_id=interview["id"],
        application_id=interview["application_id"],
        job_id=interview["job_id"],
        interviewer_id=ctx.principal.user_id,
    )
    await ctx.emit("scorecard.submitted", event, [interview["account_id"]])
    return Scorecard(
        id=row["id"],
        interview_id=interview["id"],
        application_id=interview["application_id"],
        interviewer_id=ctx.principal.user_id,
        recommendation=params.recommendation,
        ratings=list(params.ratings),
        notes=params.notes,
        submitted_at=row["submitted_at"],
    )


@procedure("scorecards.list", scope="read:applications")
async def list_scorecards(ctx: Context, params: ListScorecards) -> Page[Scorecard]:
    """The scorecards of an application (`application_id`) or of one interview (`interview_id`), in the order
    submitted. While you owe your own scorecard on an interview of that application, the others' show only that
    they were submitted."""
    interview_id = None
    application_id: Id = params.application_id
    if params.interview_id is not None:
        application_id = await _application_of(ctx, _APPLICATION_OF_INTERVIEW, params.interview_id, "interview_id")
        interview_id = parse_id(params.interview_id, "interview_id")
    found = await find(ctx, application_id, lock=False, field="application_id")
    every = await readable(ctx, found, interview_id=interview_id)
    shown = every[params.offset : params.offset + params.per_page]
    return Page(data=shown, total=len(every), page=params.page, per_page=params.per_page)


@procedure("scorecards.get", scope="read:applications")
async def get_scorecard(ctx: Context, params: IdParams) -> Scorecard:
    """One scorecard, as the no-peeking rule lets you read it."""
    scorecard_id = parse_id(params.id)
    application_id = await _application_of(ctx, _APPLICATION_OF_SCORECARD, params.id, "id")
    found = await find(ctx, application_id, lock=False)
    shown = await readable(ctx, found, scorecard_id=scorecard_id)
    if not shown:
        raise NotFound("No such scorecard.")
    return shown[0]


async def _application_of(ctx: Context, query: str, object_id: Id, field: str) -> str:
    row = await (await ctx.conn.execute(query, {"id": parse_id(object_id, field)})).fetchone()
    if row is None:
        raise NotFound("No such interview." if field == "interview_id" else "No such scorecard.")
    return str(row["application_id"])
