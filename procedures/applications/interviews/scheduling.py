"""`interviews.create`, `.update` and `.cancel`: booking a time for an application's interview, moving it, and
calling it off, each with its invitations and its event.

A booking is refused (`409 conflict`, naming the interview it met) when it overlaps another interview, not
cancelled, of its candidate or of one of its interviewers: the exclusion constraints decide, so that it holds
when two are booked at once (`store`). One account's bookings, moves and cancellations take turns (`_turn`): a
booking and a move sharing interviewers each waited for the other's rows at their constraint, a deadlock that
cost a request its `503`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from procedures.applications import EMPLOYERS, FINAL
from procedures.applications.access import Found, find_owned, members
from procedures.applications.interviews import store
from procedures.applications.interviews.calendar import is_zone
from procedures.applications.interviews.cancelling import cancel
from procedures.applications.interviews.invitations import brief, tell
from procedures.applications.interviews.reminders import first_reminder
from procedures.applications.interviews.shapes import (
    CancelInterview,
    CreateInterview,
    Interview,
    InterviewRescheduled,
    InterviewScheduled,
    UpdateInterview,
)
from procedures.applications.moves import move
from rpc.api import (
    Conflict,
    Context,
    Id,
    InvalidParams,
    InvalidTransition,
    NotFound,
    moment,
    on_duplicate,
    one_row,
    parse_id,
    procedure,
)

LONGEST = dt.timedelta(hours=8)
# An application still early in the pipeline moves on when its first interview is booked.
_BEFORE_INTERVIEWS = ("pending", "reviewed")

_INSERT = """
INSERT INTO interviews (application_id, job_id, account_id, candidate_id, title, starts_at, ends_at, time_zone,
                        location, video_url, created_by)
VALUES (%(application_id)s, %(job_id)s, %(account_id)s, %(candidate_id)s, %(title)s, %(starts_at)s, %(ends_at)s,
        %(time_zone)s, %(location)s, %(video_url)s, %(created_by)s)
RETURNING id::text AS id
"""
# Each row takes its interview's time from the interview (a trigger), whatever path inserts it. Rows go in in
# the order of their ids, so that two bookings of the same people wait for each other instead of deadlocking.
_INTERVIEWERS = """
INSERT INTO interview_interviewers (interview_id, user_id, position, next_reminder_at)
SELECT %(interview_id)s, user_id, turn - 1, %(remind_at)s
FROM unnest(%(user_ids)s::uuid[]) WITH ORDINALITY AS interviewers (user_id, turn)
ORDER BY user_id
"""
_UPDATE = """
UPDATE interviews
SET starts_at = %(starts_at)s, ends_at = %(ends_at)s, time_zone = %(time_zone)s, title = %(title)s,
    location = %(location)s, video_url = %(video_url)s, sequence = sequence + 1, updated_at = now()
WHERE id = %(id)s
"""
_REMOVE = (
    "DELETE FROM interview_interviewers WHERE interview_id = %(interview_id)s AND user_id = ANY(%(user_ids)s::uuid[])"
)
_ORDER = """
UPDATE interview_interviewers AS o SET position = interviewers.turn - 1
FROM unnest(%(user_ids)s::uuid[]) WITH ORDINALITY AS interviewers (user_id, turn)
WHERE o.interview_id = %(interview_id)s AND o.user_id = interviewers.user_id
"""
# A moved interview reminds those who still owe a scorecard from its new end.
_REMIND_FROM = """
UPDATE interview_interviewers AS o SET next_reminder_at = %(remind_at)s, reminders_sent = 0
WHERE o.interview_id = %(interview_id)s
  AND NOT EXISTS (SELECT FROM scorecards AS s WHERE s.interview_id = o.interview_id AND s.interviewer_id = o.user_id)
"""
_APPLICATION_OF = "SELECT application_id::text AS application_id FROM interviews WHERE id = %(id)s"
# The job's account's turn at its interviews, until the transaction ends. Every interviewer of an interview is a
# member of that account, so its writes that could wait on each other's rows (an interviewer's time written by two
# transactions in different orders) take turns; a candidate's interviews with other accounts wait on this one's
# rows but never the other way round. Taken before the application's row lock, which every such write takes next.
_TURN = """
SELECT pg_advisory_xact_lock(hashtextextended('interviews of ' || j.account_id::text, 0))
FROM applications AS a JOIN jobs AS j ON j.id = a.job_id
WHERE a.id = %(id)s
"""


@dataclass(frozen=True, slots=True)
class Slot:
    """When an interview is, checked: `ends_at` after `starts_at`, at most 8 hours later, in a known zone."""

    starts_at: dt.datetime
    ends_at: dt.datetime
    time_zone: str

    @classmethod
    def of(cls, starts_at: dt.datetime, ends_at: dt.datetime, time_zone: str) -> Slot:
        errors = []
        if not is_zone(time_zone):
            errors.append({"field": "time_zone", "message": "Give an IANA time zone name, e.g. Europe/Istanbul."})
        for field, value in (("starts_at", starts_at), ("ends_at", ends_at)):
            if value.microsecond:
                errors.append({"field": field, "message": "Interviews are booked to the second: drop the fraction."})
        if ends_at <= starts_at:
            errors.append({"field": "ends_at", "message": "The interview must end after it starts."})
        elif ends_at - starts_at > LONGEST:
            errors.append({"field": "ends_at", "message": "An interview lasts at most 8 hours."})
        if errors:
            raise InvalidParams(errors)
        return cls(starts_at.astimezone(dt.UTC), ends_at.astimezone(dt.UTC), time_zone)


@procedure(
    "interviews.create",
    scope="write:applications",
    write=True,
    roles=EMPLOYERS,
    emits=("interview.scheduled", "application.status_changed"),
)
async def create_interview(ctx: Context, params: CreateInterview) -> Interview:
    """Book an interview for an application: a time in a time zone, 1 to 10 interviewers from the job's account.
    Each interviewer and the candidate get an invitation their calendar understands; a `pending` or `reviewed`
    application moves to `interview_scheduled`. Event `interview.scheduled`. Overlapping another interview of
    the candidate or of an interviewer is `409 conflict`, naming it."""
    await _turn(ctx, params.application_id)
    found = await find_owned(ctx, params.application_id, field="application_id")
    if found.application.status in FINAL:
        raise InvalidTransition(found.application.status, "interview_scheduled")
    slot = Slot.of(_time("starts_at", params.starts_at), _time("ends_at", params.ends_at), params.time_zone)
    interviewers = await members(ctx, found.job_account, params.interviewer_ids, "interviewer_ids")
    application = found.application
    values = {
        "application_id": application.id,
        "job_id": application.job_id,
        "account_id": found.job_account,
        "candidate_id": application.candidate_id,
        "title": params.title or f"Interview for {found.job_title}",
        "starts_at": slot.starts_at,
        "ends_at": slot.ends_at,
        "time_zone": slot.time_zone,
        "location": params.location,
        "video_url": params.video_url,
        "created_by": ctx.principal.user_id,
    }

    async def book() -> str:
        interview_id = str((await one_row(await ctx.conn.execute(_INSERT, values)))["id"])
        await _add(ctx, interview_id, interviewers, slot)
        return interview_id

    interview_id = await _booked(ctx, found, None, interviewers, slot, book)
    if application.status in _BEFORE_INTERVIEWS:
        await move(ctx, found, "interview_scheduled")
    await ctx.emit(
        "interview.scheduled",
        _scheduled(interview_id, application.id, application.job_id, slot, interviewers),
        [found.job_account],
    )
    await tell(ctx, await brief(ctx, interview_id), "scheduled")
    return await _read(ctx, interview_id)


@procedure(
    "interviews.update",
    scope="write:applications",
    write=True,
    roles=EMPLOYERS,
    emits=("interview.rescheduled", "interview.updated"),
)
async def update_interview(ctx: Context, params: UpdateInterview) -> Interview:
    """Change a `scheduled` interview: its time (event `interview.rescheduled`) or anything else (event
    `interview.updated`). Everyone still invited gets the invitation again with a higher `sequence`; an
    interviewer taken off it gets a cancellation, one added an invitation."""
    interview, found = await _locked(ctx, params.id)
    if interview.status != "scheduled":
        raise InvalidTransition(interview.status, "scheduled")
    starts_at = interview.starts_at if params.starts_at is msgspec.UNSET else _time("starts_at", params.starts_at)
    ends_at = interview.ends_at if params.ends_at is msgspec.UNSET else _time("ends_at", params.ends_at)
    time_zone = interview.time_zone if params.time_zone is msgspec.UNSET else params.time_zone
    slot = Slot.of(starts_at, ends_at, time_zone)
    before = [one.user_id for one in interview.interviewers]
    after = before
    if params.interviewer_ids is not msgspec.UNSET:
        after = await members(ctx, found.job_account, params.interviewer_ids, "interviewer_ids")
    changes = {
        "title": interview.title if params.title is msgspec.UNSET else params.title,
        "location": interview.location if params.location is msgspec.UNSET else params.location,
        "video_url": interview.video_url if params.video_url is msgspec.UNSET else params.video_url,
    }
    moved = (slot.starts_at, slot.ends_at) != (interview.starts_at, interview.ends_at)
    edited = (
        after != before
        or slot.time_zone != interview.time_zone
        or any(value != getattr(interview, name) for name, value in changes.items())
    )
    if not moved and not edited:
        return store.as_seen_by(ctx.principal, interview)
    old = await brief(ctx, interview.id)
    removed = [user_id for user_id in before if user_id not in after]

    async def change() -> str:
        if removed:  # first: an interviewer taken off is not booked at the new time
            await ctx.conn.execute(_REMOVE, {"interview_id": interview.id, "user_ids": removed})
        values = {"id": interview.id, "starts_at": slot.starts_at, "ends_at": slot.ends_at, "time_zone": slot.time_zone}
        await ctx.conn.execute(_UPDATE, values | changes)
        await _add(ctx, interview.id, [user_id for user_id in after if user_id not in before], slot)
        await ctx.conn.execute(_ORDER, {"interview_id": interview.id, "user_ids": after})
        if moved:
            await ctx.conn.execute(_REMIND_FROM, {"interview_id": interview.id, "remind_at": _remind_at(ctx, slot)})
        return interview.id

    await _booked(ctx, found, interview.id, after, slot, change)
    application = found.application
    if moved:
        event = InterviewRescheduled(
            interview_id=interview.id,
            application_id=application.id,
            job_id=application.job_id,
            old_starts_at=interview.starts_at,
            old_ends_at=interview.ends_at,
            starts_at=slot.starts_at,
            ends_at=slot.ends_at,
        )
        await ctx.emit("interview.rescheduled", event, [found.job_account])
    if edited:
        data = _scheduled(interview.id, application.id, application.job_id, slot, after)
        await ctx.emit("interview.updated", data, [found.job_account])
    taken_off = [one for one in old.interviewers if one.id in removed]
    await tell(ctx, await brief(ctx, interview.id), "rescheduled" if moved else "updated", taken_off)
    return await _read(ctx, interview.id)


@procedure("interviews.cancel", scope="write:applications", write=True, roles=EMPLOYERS, emits=("interview.cancelled",))
async def cancel_interview(ctx: Context, params: CancelInterview) -> Interview:
    """Call off a `scheduled` interview (`cancelled`, event `interview.cancelled`): everyone on it gets a
    cancellation their calendar understands. Its scorecards, if any, stay."""
    interview, found = await _locked(ctx, params.id)
    if interview.status != "scheduled":
        raise InvalidTransition(interview.status, "cancelled")
    await cancel(ctx, interview.id, found.job_account, params.reason)
    return await _read(ctx, interview.id)


async def _locked(ctx: Context, interview_id: Id) -> tuple[Interview, Found]:
    """The interview and its application, locked in that order (as a booking locks them), for an action of the
    job's account: `404` for anyone who may not see it."""
    parsed = parse_id(interview_id)
    row = await (await ctx.conn.execute(_APPLICATION_OF, {"id": parsed})).fetchone()
    if row is None:
        raise NotFound("No such interview.")
    await _turn(ctx, row["application_id"])
    found = await find_owned(ctx, row["application_id"])
    read = await store.read(ctx, parsed, lock=True)
    assert read is not None, "interviews go only with their application"
    return read[0], found


async def _turn(ctx: Context, application_id: Id) -> None:
    """Wait for the turn of the application's job's account at its interviews (`_TURN`); an id that names no
    application takes none, and is refused by the lookup that follows."""
    with contextlib.suppress(NotFound):
        await ctx.conn.execute(_TURN, {"id": parse_id(application_id, "application_id")})


async def _booked(
    ctx: Context,
    found: Found,
    interview_id: str | None,
    interviewers: list[str],
    slot: Slot,
    write: Callable[[], Awaitable[str]],
) -> str:
    """`write` the booking in a savepoint; when it overlaps another interview of its people, `409` naming that
    interview (read once the other booking has committed: the constraint waited for it)."""
    try:
        async with ctx.conn.transaction():
            with (
                on_duplicate(store.CANDIDATE_OVERLAP, store.Clash()),
                on_duplicate(store.INTERVIEWER_OVERLAP, store.Clash()),
            ):
                return await write()
    except store.Clash:
        clash = await store.clash(
            ctx,
            interview_id=interview_id,
            candidate_id=found.application.candidate_id,
            interviewer_ids=interviewers,
            starts_at=slot.starts_at,
            ends_at=slot.ends_at,
        )
        raise Conflict(_clash_message(found, clash), clash) from None


def _clash_message(found: Found, clash: dict[str, Any] | None) -> str:
    if clash is None:  # the other booking was cancelled or moved meanwhile: trying again may pass
        return "Another interview took this time at the same moment; try again."
    who = "The candidate" if clash["user_id"] == found.application.candidate_id else "An interviewer"
    return f"{who} already has an interview from {clash['starts_at']} to {clash['ends_at']}: choose another time."


async def _add(ctx: Context, interview_id: str, user_ids: list[str], slot: Slot) -> None:
    if user_ids:
        values = {"interview_id": interview_id, "user_ids": user_ids, "remind_at": _remind_at(ctx, slot)}
        await ctx.conn.execute(_INTERVIEWERS, values)


def _remind_at(ctx: Context, slot: Slot) -> dt.datetime:
    return slot.ends_at + first_reminder(ctx.settings)


def _scheduled(
    interview_id: str, application_id: str, job_id: str, slot: Slot, interviewers: list[str]
) -> InterviewScheduled:
    return InterviewScheduled(
        interview_id=interview_id,
        application_id=application_id,
        job_id=job_id,
        starts_at=slot.starts_at,
        ends_at=slot.ends_at,
        interviewer_ids=interviewers,
    )


def _time(field: str, text: str) -> dt.datetime:
    parsed = moment(field, text)
    assert parsed is not None
    return parsed


async def _read(ctx: Context, interview_id: str) -> Interview:
    read = await store.read(ctx, interview_id)
    assert read is not None
    return store.as_seen_by(ctx.principal, read[0])
