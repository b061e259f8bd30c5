"""Mailing the alerts that are due: an instant alert `ALERT_INSTANT_SECONDS` after its first waiting match (so
the jobs of that stretch share one message), a daily one `ALERT_DIGEST_SECONDS` after its last digest.

At send time each waiting match is taken (`sent_at`), and only the jobs still published go in the message: a job
closed meanwhile is never sent. A person who is erased, or whose address is not verified, is sent nothing; their
matches are taken all the same, so nothing waits for them. Messages go through the durable mail queue, in this
transaction, each with its jobs' pages and a one-click unsubscribe (RFC 8058).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from procedures.alerts.shapes import unsubscribe_token
from rpc.api import Connection
from rpc.mail.outbox import Letter, Mail
from rpc.outbox.queue import Queue
from rpc.settings import Settings

KIND = "job_alert"
SUBJECTS = {KIND: "{headline} for your job alert"}  # our words and a count only: never the person's own text
MOST_ALERTS = 250  # mailed in one tick by one worker (its locks held meanwhile); the rest wait for the next

_DUE = """
SELECT a.id::text AS id, a.q, a.location, a.company, a.employment_type, a.frequency, u.email,
       u.email IS NOT NULL AND u.email_verified_at IS NOT NULL AND u.deleted_at IS NULL AS mailable
FROM job_alert_due AS d JOIN job_alerts AS a ON a.id = d.alert_id JOIN users AS u ON u.id = a.user_id
WHERE d.frequency = %(frequency)s AND d.due_at <= now()
ORDER BY d.due_at
LIMIT %(most)s
FOR UPDATE OF d SKIP LOCKED
"""
_TAKE = """
UPDATE job_alert_matches AS m SET sent_at = now()
FROM jobs AS j
WHERE m.alert_id = ANY(%(alerts)s::uuid[]) AND m.sent_at IS NULL AND j.id = m.job_id
RETURNING m.alert_id::text AS alert_id, j.id::text AS id, j.title, j.company, j.location, j.published_at,
          j.status = 'published' AS open
"""
_DONE = """
WITH done AS (DELETE FROM job_alert_due WHERE alert_id = ANY(%(alerts)s::uuid[]))
UPDATE job_alerts SET last_sent_at = now() WHERE id = ANY(%(digests)s::uuid[])
"""


class Mailer:
    """A worker's share of the due alerts, mailed in the caller's transaction."""

    def __init__(self, settings: Settings) -> None:
        self._mail = Mail(settings, Queue(), SUBJECTS, ("procedures.alerts",))
        self._public_url = settings.public_url
        self._secret_key = settings.secret_key

    async def send_due(self, conn: Connection) -> list[tuple[str, str, str]]:
        """Mail every due alert (up to `MOST_ALERTS`, instant ones first: a digest can wait a second, an instant
        alert has its minute); (frequency, alert id, job id) of each job mailed."""
        due = await (await conn.execute(_DUE, {"frequency": "instant", "most": MOST_ALERTS})).fetchall()
        if len(due) < MOST_ALERTS:
            values = {"frequency": "daily", "most": MOST_ALERTS - len(due)}
            due += await (await conn.execute(_DUE, values)).fetchall()
        if not due:
            return []
        ids = [row["id"] for row in due]
        taken: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        for job in await (await conn.execute(_TAKE, {"alerts": ids})).fetchall():
            if job["open"]:
                taken[job["alert_id"]].append(job)
        letters: list[Letter] = []
        mailed: list[tuple[str, str, str]] = []
        for alert in due:
            jobs = sorted(taken.get(alert["id"], ()), key=lambda job: (job["published_at"], job["id"]), reverse=True)
            if jobs and alert["mailable"]:
                letters.append(self._letter(alert, jobs))
                mailed.extend((alert["frequency"], alert["id"], job["id"]) for job in jobs)
        await self._mail.send_many(conn, letters)
        digests = sorted({alert_id for frequency, alert_id, _ in mailed if frequency == "daily"})
        await conn.execute(_DONE, {"alerts": ids, "digests": digests})
        return mailed

    def _letter(self, alert: dict[str, Any], jobs: Sequence[dict[str, Any]]) -> Letter:
        unsubscribe = f"{self._public_url}/alerts/unsubscribe/{unsubscribe_token(self._secret_key, alert['id'])}"
        count = len(jobs)
        headline = f"{count} new job" if count == 1 else f"{count} new jobs"
        # Every job taken is listed, newest first: a match left out of its message would never be sent at all.
        shown = [{**job, "url": f"{self._public_url}/jobs/{job['id']}"} for job in jobs]
        context = {
            "headline": headline,
            "daily": alert["frequency"] == "daily",
            "search": describe(alert),
            "jobs": shown,
            "unsubscribe": unsubscribe,
            "manage": f"{self._public_url}/panel/alerts",
        }
        headers = {"List-Unsubscribe": f"<{unsubscribe}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
        return Letter(KIND, alert["email"], context, headers)


def describe(alert: dict[str, Any]) -> str:
    """The alert's search in a line: `python developer · in Berlin · at Globex · full_time`."""
    parts = [f"“{alert['q']}”" if alert["q"] else "every job"]
    if alert["location"]:
        parts.append(f"in {alert['location']}")
    if alert["company"]:
        parts.append(f"at {alert['company']}")
    if alert["employment_type"]:
        parts.append(", ".join(alert["employment_type"]).replace("_", " "))
    return " · ".join(parts)
