"""Retention (docs/privacy.md): personal data kept no longer than needed, removed by the delivery workers.

Each run does one bounded batch per kind of data (`BATCH` rows, the oldest first, through an index), in the
periodic job's single short transaction: a table of millions of rows is worked down over successive runs, and
no run holds locks on more than `BATCH` rows of it. Rows another transaction holds are skipped, not waited for.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import msgspec

from rpc.core.periodic import EventSink, Periodic
from rpc.core.types import Connection
from rpc.settings import Settings

log = logging.getLogger(__name__)

BATCH = 1_000
SCHEDULE = "* * * * *"  # every minute: up to 60 000 rows of each kind an hour
AUDIT_RETENTION_DAYS = 400  # schema.sql's trigger refuses to delete younger entries


class RetentionSettings(msgspec.Struct, frozen=True):
    """`RETENTION_WEBHOOK_DAYS` and `RETENTION_APPLICATION_DAYS`."""

    webhook_days: int = 30
    application_days: int = 730

    def __post_init__(self) -> None:
        if self.webhook_days < 1 or self.application_days < 1:
            raise ValueError("retention periods are at least one day")


_STATEMENTS = {
    "webhook attempts": """
        DELETE FROM webhook_attempts WHERE id IN (
            SELECT id FROM webhook_attempts WHERE started_at < now() - make_interval(days => %(webhook_days)s)
            ORDER BY started_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED)""",
    # The deliveries (and their status) stay: only the bytes sent go.
    "event bodies": """
        UPDATE events SET body = ''::bytea WHERE id IN (
            SELECT id FROM events
            WHERE body <> ''::bytea AND created_at < now() - make_interval(days => %(webhook_days)s)
            ORDER BY created_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED)""",
    # The oldest entries, in chain order, up to the first one still within the period; the anchor moves to the
    # last one deleted, so that what stays verifies from it.
    "audit entries": """
        WITH gone AS (
            DELETE FROM audit_entries WHERE id IN (
                SELECT id FROM audit_entries
                WHERE id < coalesce((SELECT min(id) FROM audit_entries
                                     WHERE at >= now() - make_interval(days => %(audit_days)s)), 'infinity'::numeric)
                ORDER BY id LIMIT %(batch)s)
            RETURNING id, hash)
        UPDATE audit_chain SET anchor_hash = (SELECT hash FROM gone ORDER BY id DESC LIMIT 1)
        WHERE EXISTS (SELECT FROM gone)""",
}


async def retain(
    conn: Connection, settings: RetentionSettings, business: Mapping[str, str], batch: int = BATCH
) -> dict[str, int]:
    """One batch of each kind, the framework's and the `business`'s (`PrivacySteps.retention`); how many rows of
    each were removed or emptied."""
    values = {
        "webhook_days": settings.webhook_days,
        "application_days": settings.application_days,
        "audit_days": AUDIT_RETENTION_DAYS,
        "batch": batch,
    }
    done = {}
    for kind, statement in {**_STATEMENTS, **business}.items():
        cursor = await conn.execute(statement, values)
        done[kind] = max(cursor.rowcount, 0)
    return done


def periodic(settings: Settings, business: Mapping[str, str]) -> Periodic:
    """The retention job with the deployment's periods and the business's statements."""
    periods = settings.section("RETENTION_", RetentionSettings)

    async def run(conn: Connection, emitter: EventSink) -> None:
        done = await retain(conn, periods, business)
        if any(done.values()):  # a line a minute saying nothing was done is noise
            log.info("retention: %s", done)

    return Periodic(cron=SCHEDULE, run=run)
