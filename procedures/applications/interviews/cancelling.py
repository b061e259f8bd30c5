"""Cancelling an interview, by its procedure or because its application reached a final status: the interview
keeps its row and its scorecards, its people are told (their calendars withdraw it), reminders stop, and
`interview.cancelled` goes to the job's account."""

from __future__ import annotations

from procedures.applications.interviews.invitations import brief, tell
from procedures.applications.interviews.shapes import InterviewCancelled
from rpc.api import Context

_CANCEL = """
UPDATE interviews SET cancelled_at = now(), cancel_reason = %(reason)s, sequence = sequence + 1, updated_at = now()
WHERE id = %(id)s
RETURNING id::text AS id, application_id::text AS application_id, job_id::text AS job_id
"""
_STOP_REMINDERS = "UPDATE interview_interviewers SET next_reminder_at = NULL WHERE interview_id = %(id)s"
_NOT_STARTED = """
SELECT id::text AS id FROM interviews
WHERE application_id = %(application_id)s AND cancelled_at IS NULL AND starts_at > now()
ORDER BY starts_at, id
FOR UPDATE
"""
KINDS = ("interview.cancelled",)


async def cancel(ctx: Context, interview_id: str, job_account: str, reason: str | None) -> None:
    """Cancel the interview (the caller checked that it may be): its people told, its event emitted."""
    row = await (await ctx.conn.execute(_CANCEL, {"id": interview_id, "reason": reason})).fetchone()
    assert row is not None, "a locked interview"
    await ctx.conn.execute(_STOP_REMINDERS, {"id": interview_id})
    await ctx.emit(
        "interview.cancelled",
        InterviewCancelled(interview_id=row["id"], application_id=row["application_id"], job_id=row["job_id"]),
        [job_account],
    )
    await tell(ctx, await brief(ctx, interview_id), "cancelled")


async def cancel_not_started(ctx: Context, application_id: str, job_account: str) -> None:
    """Cancel every interview of the application that has not started (its application is decided)."""
    rows = await (await ctx.conn.execute(_NOT_STARTED, {"application_id": application_id})).fetchall()
    for row in rows:
        await cancel(ctx, row["id"], job_account, "The application was closed.")
