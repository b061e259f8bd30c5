"""Disabling the endpoints that always fail (the Svix rule): an endpoint whose every attempt has failed for
WEBHOOK_DISABLE_AFTER_DAYS is disabled by this periodic work, its account's employers and admins are told by
e-mail (its URL and its last error), and `webhook.disabled` goes into the account's audit log.

The clock is `webhook_endpoints.failing_since`, kept by the settlement of attempts (`rpc/outbox/claims.py`): set
by a failed attempt when it is not running, cleared by any success. So an endpoint that succeeded even once since
its failures began is judged only by the failures after that success. While disabled, no attempt is made to it:
its queued jobs are settled `failed` unattempted, and new events are kept as `failed` deliveries (`emit`), to be
recovered once it is enabled again (which restarts the clock).
"""

from __future__ import annotations

import logging

from rpc.audit import log as audit_log
from rpc.core.periodic import EventSink, Periodic
from rpc.core.types import Connection
from rpc.mail.outbox import Mail
from rpc.outbox.queue import Queue
from rpc.settings import Settings

log = logging.getLogger(__name__)

SCHEDULE = "* * * * *"  # every minute: an endpoint is disabled within a minute of its period
BATCH = 100
ACTOR = audit_log.automated("webhook-disabling")
MAIL_KIND = "endpoint_disabled"

# The failing endpoints, disabled, with their last error: the newest delivery that had an attempt.
_DISABLE = """
UPDATE webhook_endpoints AS ep SET enabled = false, disabled_at = now(), updated_at = now()
FROM webhook_endpoints AS failing
LEFT JOIN LATERAL (
    SELECT d.last_status_code, d.last_error FROM webhook_deliveries AS d
    WHERE d.endpoint_id = failing.id AND d.attempts > 0 ORDER BY d.created_at DESC, d.id DESC LIMIT 1
) AS last ON true
WHERE ep.id = failing.id AND failing.id IN (
    SELECT id FROM webhook_endpoints
    WHERE enabled AND failing_since < now() - make_interval(secs => %(seconds)s)
    ORDER BY failing_since LIMIT %(batch)s FOR UPDATE SKIP LOCKED
)
RETURNING ep.id::text AS id, ep.account_id::text AS account_id, ep.url, ep.failing_since, last.last_status_code,
    last.last_error
"""
_RECIPIENTS = """
SELECT email FROM users
WHERE account_id = %(account_id)s AND role IN ('employer', 'admin') AND deleted_at IS NULL
  AND email IS NOT NULL AND email_verified_at IS NOT NULL
ORDER BY email
"""


def last_error(status_code: int | None, error: str | None) -> str:
    """The last failure in words, as the panel words an attempt's."""
    if error:
        return error
    if status_code is not None:
        return f"the receiver answered {status_code} (only 200 counts as success)"
    return "no attempt was recorded"


async def disable_failing(conn: Connection, settings: Settings, mail: Mail) -> list[str]:
    """Disable the endpoints failing for longer than the period, each with its e-mails and audit entry, in the
    caller's transaction; their ids."""
    seconds = settings.webhook_disable_after_days * 86_400
    rows = await (await conn.execute(_DISABLE, {"seconds": seconds, "batch": BATCH})).fetchall()
    for row in rows:
        error = last_error(row["last_status_code"], row["last_error"])
        await audit_log.record(conn, "webhook.disabled", account_id=row["account_id"], actor=ACTOR, target_id=row["id"])
        recipients = await (await conn.execute(_RECIPIENTS, {"account_id": row["account_id"]})).fetchall()
        for recipient in recipients:
            await mail.send(
                conn,
                MAIL_KIND,
                recipient["email"],
                url=row["url"],
                last_error=error,
                failing_since=row["failing_since"].strftime("%Y-%m-%d %H:%M UTC"),
                days=f"{settings.webhook_disable_after_days:g}",
                link=f"{settings.public_url}/panel/webhooks/{row['id']}",
            )
        log.warning("webhook endpoint %s disabled: every attempt failed since %s", row["id"], row["failing_since"])
    return [row["id"] for row in rows]


def periodic(settings: Settings) -> Periodic:
    """The disabling, every minute, with the deployment's period and mail."""

    mail = Mail(settings, Queue())

    async def run(conn: Connection, emitter: EventSink) -> None:
        await disable_failing(conn, settings, mail)

    return Periodic(cron=SCHEDULE, run=run)
