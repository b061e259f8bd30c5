"""Matching publishes against the alerts, driven by the durable side: the log of changes to the published set.

The tick is a periodic job of the workers, once a second. A tick that takes the cursor row's lock (a tick still
running elsewhere holds it; this one skips matching) reads the jobs published since the version the cursor
holds, matches them against the alerts, writes each (alert, job) once and moves the cursor, all in one
transaction: a publish committed is matched exactly once, whichever process dies when. Then every tick mails its
share of what is due (`procedures.alerts.mailing`: due alerts taken `SKIP LOCKED`), so ticks that outlast their
second, on other workers, share the mail; the due row a match writes waits for a mail holding it, so no match is
left without its alert due.

Should the log no longer reach back to the cursor (trimmed while no worker ran), the jobs published since the
cursor's time are matched instead; the key of `job_alert_matches` keeps each (alert, job) to one row whatever is
matched twice.

Each worker keeps the alerts as an index in memory (`procedures.alerts.index`): read whole at its first tick and
every `RELOAD_SECONDS` after (forgetting deleted alerts), and the alerts created lately at every tick. A deleted
alert still in memory matches nothing: matches are written only for alerts that exist.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from procedures.alerts.index import AlertIndex
from procedures.alerts.mailing import Mailer
from procedures.alerts.matching import matches
from procedures.alerts.shapes import AlertSettings, search_of
from procedures.jobs.search.corpus import COLUMNS
from procedures.jobs.search.request import Search
from rpc.api import Connection
from rpc.core.periodic import EventSink, Periodic
from rpc.settings import Settings

log = logging.getLogger(__name__)

RELOAD_SECONDS = 300.0
MOST_VERSIONS = 400  # versions of the published set matched in one tick: a worker behind catches up in steps
_LATELY = dt.timedelta(minutes=1)  # alerts read again at each tick: longer than any creating transaction
_MARGIN = "10 minutes"  # publishes matched again when the log no longer reaches back

_CURSOR = "SELECT version, matched_at FROM job_alert_cursor FOR UPDATE SKIP LOCKED"
_PUBLISHED = f"""
WITH now AS (
    SELECT least(coalesce((SELECT version FROM job_totals WHERE status = 'published'), 0),
                 %(since)s + %(most)s) AS version
),
published AS (
    SELECT c.id, max(c.version) AS version FROM published_changes AS c
    WHERE c.version > %(since)s AND c.version <= (SELECT version FROM now) AND c.entered
      AND NOT EXISTS (SELECT FROM published_changes AS l WHERE l.version = c.version AND l.id = c.id AND NOT l.entered)
    GROUP BY c.id
)
SELECT (SELECT version FROM now) AS _position,
    (SELECT count(DISTINCT version) FROM published_changes
     WHERE version > %(since)s AND version <= (SELECT version FROM now)) AS _logged,
    published.version AS _version,
    {COLUMNS}
FROM (SELECT 1) AS one
LEFT JOIN (published JOIN jobs ON jobs.id = published.id AND jobs.status = 'published') ON true
"""
_PUBLISHED_SINCE = f"""
SELECT NULL::bigint AS _version, {COLUMNS} FROM jobs
WHERE status = 'published' AND published_at >= %(matched_at)s - interval '{_MARGIN}'
"""
_VERSION = "SELECT coalesce((SELECT version FROM job_totals WHERE status = 'published'), 0) AS version"
_MOVE = "UPDATE job_alert_cursor SET version = %(version)s, matched_at = now()"
_ALERTS = "SELECT id::text AS id, q, location, company, employment_type FROM job_alerts"
_ALERTS_LATELY = f"{_ALERTS} WHERE created_at >= %(since)s"
_NOW = "SELECT now() AS now"
# The matches of alerts that still exist, each once; an alert with its first waiting match becomes due. An alert
# takes the jobs published after its creation: those of versions of the published set past the one its creation
# read (a publish committed before it, matched by a tick after it, is not sent).
_RECORD = """
WITH found AS (
    INSERT INTO job_alert_matches (alert_id, job_id)
    SELECT m.alert_id, m.job_id
    FROM unnest(%(alerts)s::uuid[], %(jobs)s::uuid[], %(versions)s::bigint[]) AS m (alert_id, job_id, version)
    JOIN job_alerts AS a ON a.id = m.alert_id AND m.version > a.since_version
    ON CONFLICT ON CONSTRAINT job_alert_matches_pkey DO NOTHING
    RETURNING alert_id
)
INSERT INTO job_alert_due (alert_id, frequency, due_at)
SELECT a.id, a.frequency, CASE a.frequency
    WHEN 'instant' THEN now() + make_interval(secs => %(instant)s)
    ELSE greatest(now(), coalesce(a.last_sent_at, a.created_at) + make_interval(secs => %(digest)s))
END
FROM job_alerts AS a WHERE a.id IN (SELECT alert_id FROM found)
ON CONFLICT ON CONSTRAINT job_alert_due_pkey DO UPDATE SET due_at = job_alert_due.due_at
"""  # DO UPDATE, not NOTHING: it waits for a mail holding the row, and writes it anew if that mail deleted it


@dataclass(frozen=True, slots=True)
class Tick:
    """What one tick did: the jobs matched, the matches written, the CPU seconds matching took, and the jobs of
    each alert mail queued (by the bench)."""

    jobs: int
    matched: int
    cpu: float
    mailed: Sequence[tuple[str, str, str]]  # (frequency, alert id, job id)


class Matcher:
    """The alerts of one worker process and the tick that matches and mails."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings.section("ALERT_", AlertSettings)
        self._secret_key = settings.secret_key  # the searches resolved as jobs.search resolves them
        self.mailer = Mailer(settings)
        self._alerts: AlertIndex | None = None
        self._loaded_at = 0.0
        self._lately: dt.datetime | None = None
        self._lock = asyncio.Lock()  # one tick at a time in a process (the cursor's lock: one in all)

    def periodic(self) -> Periodic:
        async def run(conn: Connection, emitter: EventSink) -> None:
            await self.tick(conn)

        return Periodic(cron="* * * * * *", run=run)

    async def tick(self, conn: Connection) -> Tick:
        """Match what was published since the cursor, then mail what is due; in the caller's transaction."""
        async with self._lock:
            cursor = await (await conn.execute(_CURSOR)).fetchone()
            jobs, matched, cpu = await self._match(conn, cursor) if cursor is not None else (0, 0, 0.0)
            mailed = await self.mailer.send_due(conn)
            return Tick(jobs, matched, cpu, mailed)

    async def _match(self, conn: Connection, cursor: Mapping[str, Any]) -> tuple[int, int, float]:
        since = cursor["version"]
        rows = await (await conn.execute(_PUBLISHED, {"since": since, "most": MOST_VERSIONS})).fetchall()
        position, logged = rows[0]["_position"], rows[0]["_logged"]
        if logged != position - since:
            log.warning("job alerts: the log of publishes no longer reaches version %d; matching by time", since)
            rows = await (await conn.execute(_PUBLISHED_SINCE, {"matched_at": cursor["matched_at"]})).fetchall()
            position = (await (await conn.execute(_VERSION)).fetchone() or {"version": since})["version"]
        published = [row for row in rows if row["_id"] is not None]
        # The version each job entered the published set at (matched by time: the current one, a lost log's best).
        versions = {row["_id"]: position if row["_version"] is None else row["_version"] for row in published}
        found: list[tuple[str, str]] = []
        cpu = 0.0
        if published:
            alerts = await self._current(conn)
            started = time.process_time()
            found = matches(alerts, published)
            cpu = time.process_time() - started
            await self._record(conn, found, versions)
        if position != since:
            await conn.execute(_MOVE, {"version": position})
        return len(published), len(found), cpu

    async def _record(self, conn: Connection, found: Sequence[tuple[str, str]], versions: Mapping[str, int]) -> None:
        if not found:
            return
        values = {
            "alerts": [alert for alert, _ in found],
            "jobs": [job for _, job in found],
            "versions": [versions[job] for _, job in found],
            "instant": self.settings.instant_seconds,
            "digest": self.settings.digest_seconds,
        }
        await conn.execute(_RECORD, values)

    async def _current(self, conn: Connection) -> AlertIndex:
        """The alerts now: read whole now and then, and those created lately at every tick."""
        now = (await (await conn.execute(_NOW)).fetchone() or {})["now"]
        if self._alerts is None or self._lately is None or time.monotonic() - self._loaded_at > RELOAD_SECONDS:
            alerts = AlertIndex(earlier=self._alerts)
            _file(alerts, await (await conn.execute(_ALERTS)).fetchall(), self._secret_key)
            alerts.settle()
            self._alerts, self._loaded_at = alerts, time.monotonic()
            log.info("job alerts: %d alerts in %d searches", len(alerts), alerts.groups)
        else:
            rows = await (await conn.execute(_ALERTS_LATELY, {"since": self._lately})).fetchall()
            _file(self._alerts, rows, self._secret_key)
        self._lately = now - _LATELY
        return self._alerts


def _file(alerts: AlertIndex, rows: Sequence[Mapping[str, Any]], secret_key: str) -> None:
    """Each alert of `rows` filed, its parameters resolved once per distinct search (thousands share one)."""
    resolved: dict[tuple[Any, ...], Search] = {}
    for row in rows:
        if row["id"] not in alerts:
            types = row["employment_type"]
            asked = (row["q"], row["location"], row["company"], tuple(types) if types else None)
            search = resolved.get(asked)
            if search is None:
                search = resolved[asked] = search_of(row, secret_key)
            alerts.add(row["id"], search)
