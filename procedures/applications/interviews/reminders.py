"""Reminding interviewers of the scorecards they owe: `SCORECARD_REMINDER_SECONDS` (an hour) after the
interview's end, then every `SCORECARD_REMINDER_REPEAT_SECONDS` (a day), five times at most; none before the
end, none once submitted or cancelled. Each row of `interview_interviewers` says when its next reminder is due,
so the periodic work reads only the due ones (a partial index), and workers share them (`SKIP LOCKED`)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import msgspec

from procedures.applications.interviews.invitations import wall_time
from procedures.applications.letters import SUBJECTS, TEMPLATES, desk_link, mailable
from rpc.api import Connection
from rpc.core.periodic import EventSink, Periodic
from rpc.mail.outbox import Letter, Mail
from rpc.outbox.queue import Queue
from rpc.settings import Settings

MOST = 5
BATCH = 200  # reminders sent by one worker in one turn; the rest wait for the next second

_DUE = f"""
SELECT o.interview_id::text AS interview_id, o.user_id::text AS user_id, o.reminders_sent,
       CASE WHEN {mailable("u")} THEN u.email END AS email,
       i.application_id::text AS application_id, i.title, i.starts_at, i.ends_at, i.time_zone,
       j.title AS job_title, j.company, c.display_name AS candidate_name,
       i.cancelled_at IS NOT NULL
           OR EXISTS (SELECT FROM scorecards AS s
                      WHERE s.interview_id = o.interview_id AND s.interviewer_id = o.user_id) AS settled
FROM interview_interviewers AS o
JOIN interviews AS i ON i.id = o.interview_id
JOIN jobs AS j ON j.id = i.job_id
JOIN users AS u ON u.id = o.user_id
JOIN users AS c ON c.id = i.candidate_id
WHERE o.next_reminder_at <= now()
ORDER BY o.next_reminder_at
LIMIT %(batch)s
FOR UPDATE OF o SKIP LOCKED
"""
_ADVANCE = """
UPDATE interview_interviewers AS o
SET reminders_sent = o.reminders_sent + due.sent,
    next_reminder_at = CASE WHEN due.sent = 0 OR o.reminders_sent + 1 >= %(most)s THEN NULL
                            ELSE now() + make_interval(secs => %(repeat)s) END
FROM unnest(%(interview_ids)s::uuid[], %(user_ids)s::uuid[], %(sent)s::int[]) AS due (interview_id, user_id, sent)
WHERE o.interview_id = due.interview_id AND o.user_id = due.user_id
"""


class ReminderSettings(msgspec.Struct, frozen=True, kw_only=True):
    """`SCORECARD_*`: when an interviewer who owes a scorecard is first reminded after the interview's end, and
    how far apart the next reminders are (tests shrink both)."""

    reminder_seconds: Annotated[float, msgspec.Meta(ge=0)] = 3_600.0
    reminder_repeat_seconds: Annotated[float, msgspec.Meta(gt=0)] = 86_400.0

    @classmethod
    def of(cls, settings: Settings) -> ReminderSettings:
        return settings.section("SCORECARD_", cls)


def first_reminder(settings: Settings) -> dt.timedelta:
    """How long after an interview's end its interviewers are first reminded."""
    return dt.timedelta(seconds=ReminderSettings.of(settings).reminder_seconds)


class Reminders:
    """The periodic reminders of one worker."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._repeat = ReminderSettings.of(settings).reminder_repeat_seconds
        self._mail = Mail(settings, Queue(), SUBJECTS, (TEMPLATES,))

    def periodic(self) -> Periodic:
        async def run(conn: Connection, emitter: EventSink) -> None:
            await self.send_due(conn)

        return Periodic(cron="* * * * * *", run=run)

    async def send_due(self, conn: Connection) -> int:
        """Mail the reminders due (a batch), in the caller's transaction; how many were mailed."""
        due = await (await conn.execute(_DUE, {"batch": BATCH})).fetchall()
        if not due:
            return 0
        mailed = [row for row in due if not row["settled"] and row["email"]]
        await self._mail.send_many(conn, [self._letter(row) for row in mailed])
        sent = {(row["interview_id"], row["user_id"]) for row in mailed}
        await conn.execute(
            _ADVANCE,
            {
                "interview_ids": [row["interview_id"] for row in due],
                "user_ids": [row["user_id"] for row in due],
                "sent": [int((row["interview_id"], row["user_id"]) in sent) for row in due],
                "most": MOST,
                "repeat": self._repeat,
            },
        )
        return len(mailed)

    def _letter(self, row: dict[str, Any]) -> Letter:
        context = {
            "title": row["title"],
            "job_title": row["job_title"],
            "company": row["company"],
            "candidate_name": row["candidate_name"] or "a candidate",
            "when": wall_time(row["starts_at"], row["ends_at"], row["time_zone"]),
            "link": desk_link(self._settings, row["application_id"]),
        }
        return Letter("scorecard_reminder", row["email"], context)
