"""The delivery worker's side of the queue: claiming delivery jobs in batches and settling them with the attempts.

procrastinate (3.10) fetches one job per statement (`procrastinate_fetch_job_v2` ends in `LIMIT 1`) and finishes
it in another, so its worker loop costs two round trips and a plpgsql call per event before any of our work.
Delivery jobs therefore live in a queue of their own (`DELIVERY_QUEUE`) that procrastinate's worker does not
fetch from: they are claimed here, many in one statement, with the same `FOR UPDATE SKIP LOCKED` and the same
columns procrastinate's fetch sets (`status = 'doing'`, `worker_id`), so its heartbeat-based retry of stalled
jobs requeues them as it does its own. Delivery jobs carry no procrastinate `lock`, so the lock check of its
fetch has nothing to do here. Deferring stays procrastinate's (`rpc/outbox/queue.py`).

Every outcome is settled in one statement for many deliveries: the attempt row, the delivery's new state and its
job (deleted when the delivery is finished, rescheduled for the next attempt otherwise) change together, which is
what keeps the attempt count exact across crashes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from rpc.core.types import Connection
from rpc.outbox.emit import DISABLED
from rpc.outbox.queue import DELIVERY_QUEUE

# The columns an attempt needs, from the claimed job's delivery, its event and its endpoint (LEFT JOINs: a
# delivery whose endpoint was deleted since has no row any more, and its job is only to be finished).
_TARGET = """
SELECT claimed.id AS job_id, d.id::text AS delivery_id, d.status, d.attempts, d.endpoint_id::text AS endpoint_id,
       e.id::text AS event_id, e.kind, e.body, ep.url, ep.enabled, ep.secret_sealed, ep.previous_secret_sealed,
       coalesce(ep.overlap_until > now(), false) AS overlapping
FROM claimed
LEFT JOIN webhook_deliveries AS d ON d.id = claimed.delivery_id
LEFT JOIN events AS e ON e.id = d.event_id
LEFT JOIN webhook_endpoints AS ep ON ep.id = d.endpoint_id
"""
# Due jobs in queue order, at most `room` of one endpoint (fewer for the endpoints in `lanes`, whose lanes in the
# worker hold some already; none of those in `full`, whose jobs are passed over), so that no endpoint takes the
# worker's room from the others (rpc/outbox/lanes.py). An endpoint's jobs beyond its room stay in the queue, locked
# by no one once the statement ends. A job whose delivery is gone (its endpoint was deleted) has no endpoint and is
# claimed, to be finished.
_CLAIM = (
    """
WITH candidate AS (
    -- In queue order through procrastinate's index, stopping at `limit`: the endpoint of a job is looked up only
    -- to pass over a full lane's (and only when a lane is full), never joined before the order and the limit.
    SELECT job.id, (job.args ->> 'delivery_id')::uuid AS delivery_id
    FROM procrastinate_jobs AS job
    WHERE job.queue_name = %(queue)s AND job.status = 'todo' AND (job.scheduled_at IS NULL OR job.scheduled_at <= now())
      AND (cardinality(%(full)s::uuid[]) = 0 OR NOT EXISTS (
          SELECT FROM webhook_deliveries AS d
          WHERE d.id = (job.args ->> 'delivery_id')::uuid AND d.endpoint_id = ANY(%(full)s::uuid[])
      ))
    ORDER BY job.priority DESC, job.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), due AS (
    SELECT ranked.id FROM (
        SELECT c.id, d.endpoint_id, row_number() OVER (PARTITION BY d.endpoint_id ORDER BY c.id) AS n
        FROM candidate AS c LEFT JOIN webhook_deliveries AS d ON d.id = c.delivery_id
    ) AS ranked
    LEFT JOIN unnest(%(lanes)s::uuid[], %(rooms)s::integer[]) AS lane (endpoint_id, room)
        ON lane.endpoint_id = ranked.endpoint_id
    WHERE ranked.endpoint_id IS NULL OR ranked.n <= coalesce(lane.room, %(room)s)
), claimed AS (
    UPDATE procrastinate_jobs AS job SET status = 'doing', worker_id = %(worker_id)s
    FROM due
    WHERE job.id = due.id
    RETURNING job.id, (job.args ->> 'delivery_id')::uuid AS delivery_id
)
"""
    + _TARGET
)
_CLAIM_DELIVERY = (
    """
WITH claimed AS (
    UPDATE procrastinate_jobs AS job SET status = 'doing', worker_id = %(worker_id)s
    WHERE queue_name = %(queue)s AND status = 'todo' AND args ->> 'delivery_id' = %(delivery_id)s
    RETURNING job.id, (job.args ->> 'delivery_id')::uuid AS delivery_id
)
"""
    + _TARGET
)

# One statement settles a batch. An attempt is recorded only on a delivery still pending at fewer attempts (its
# row lock makes a concurrent duplicate of the attempt wait, then find nothing to do), and its job is then
# finished whoever holds it: deleted, or put back for the next attempt at `next_attempt_at`. A job whose attempt
# was not recorded (someone else recorded it, or the delivery was finished already), a job held too long for its
# endpoint's turn (`released`: back in the queue shortly, no attempt used up; rpc/outbox/lanes.py) and a job whose
# endpoint was disabled are touched only while this worker still holds them: a job requeued and claimed by another
# worker meanwhile is that worker's to settle.
_SETTLE = """
WITH outcome AS (
    SELECT * FROM unnest(
        %(job_ids)s::bigint[], %(delivery_ids)s::uuid[], %(statuses)s::text[], %(numbers)s::integer[],
        %(started_at)s::timestamptz[], %(durations)s::integer[], %(status_codes)s::integer[], %(errors)s::text[],
        %(excerpts)s::text[], %(headers)s::jsonb[], %(next_attempts)s::timestamptz[], %(endpoint_ids)s::uuid[]
    ) AS o (
        job_id, delivery_id, status, number, started_at, duration_ms, status_code, error, excerpt, request_headers,
        next_attempt_at, endpoint_id
    )
), recorded AS (
    UPDATE webhook_deliveries AS d
    SET status = o.status, attempts = o.number, last_status_code = o.status_code, last_error = o.error,
        next_attempt_at = o.next_attempt_at, updated_at = now()
    FROM outcome AS o
    WHERE d.id = o.delivery_id AND d.status = 'pending' AND d.attempts < o.number
    RETURNING o.*
), attempts AS (
    INSERT INTO webhook_attempts
        (delivery_id, number, started_at, duration_ms, status_code, error, response_excerpt, request_headers)
    SELECT delivery_id, number, started_at, duration_ms, status_code, error, excerpt, request_headers FROM recorded
), failing AS (
    -- The endpoints' clock of failures (rpc/worker/disabling.py): started by a failed attempt, stopped by a
    -- success; an endpoint's row is written only when its state turns.
    UPDATE webhook_endpoints AS ep
    SET failing_since = CASE WHEN turned.succeeded THEN NULL ELSE turned.first_failure END
    FROM (
        SELECT endpoint_id, bool_or(status_code = 200) AS succeeded, min(started_at) AS first_failure
        FROM recorded GROUP BY endpoint_id
    ) AS turned
    WHERE ep.id = turned.endpoint_id AND (ep.failing_since IS NULL) <> turned.succeeded
), disabled AS (
    UPDATE webhook_deliveries
    SET status = 'failed', last_error = %(disabled_error)s, next_attempt_at = NULL, updated_at = now()
    WHERE id = ANY(%(disabled)s::uuid[]) AND status = 'pending'
), retried AS (
    UPDATE procrastinate_jobs AS job SET status = 'todo', worker_id = NULL, scheduled_at = recorded.next_attempt_at
    FROM recorded WHERE job.id = recorded.job_id AND recorded.status = 'pending'
), released AS (
    UPDATE procrastinate_jobs SET status = 'todo', worker_id = NULL, scheduled_at = %(released_until)s
    WHERE id = ANY(%(released)s::bigint[]) AND status = 'doing' AND worker_id IS NOT DISTINCT FROM %(worker_id)s
), finished AS (
    DELETE FROM procrastinate_jobs AS job
    WHERE job.id IN (SELECT job_id FROM recorded WHERE status <> 'pending')
       OR (job.id = ANY(%(settled)s::bigint[]) AND job.status = 'doing'
           AND job.worker_id IS NOT DISTINCT FROM %(worker_id)s
           AND job.id NOT IN (SELECT job_id FROM recorded WHERE job_id IS NOT NULL))
)
SELECT delivery_id::text AS delivery_id, status, number, status_code, error FROM recorded
"""


# The deliverer is a procrastinate worker of its own (its jobs' `worker_id`), with its own heartbeat.
_REGISTER = "SELECT worker_id FROM procrastinate_register_worker_v1()"
_BEAT = "UPDATE procrastinate_workers SET last_heartbeat = now() WHERE id = %(id)s RETURNING id"
_UNREGISTER = "SELECT procrastinate_unregister_worker_v1(%(id)s)"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One attempt made, to be settled: what happened, and the delivery's state after it."""

    job_id: int | None
    delivery_id: str
    status: str  # `succeeded`, `failed` (the last attempt), or `pending` (another is due at `next_attempt_at`)
    number: int
    started_at: dt.datetime
    duration_ms: int
    status_code: int | None
    error: str | None
    excerpt: str | None
    headers: dict[str, str]  # as sent, for the panel's delivery page: the signatures are no secret
    next_attempt_at: dt.datetime | None
    endpoint_id: str  # whose clock of failures the attempt moves


@dataclass(slots=True)
class Settlement:
    """What one statement settles: attempts made, jobs of deliveries finished or gone, jobs given back unattempted
    and deliveries to disabled endpoints (with their jobs)."""

    outcomes: list[Outcome]
    finished_jobs: list[int]
    released_jobs: list[int]
    disabled: list[tuple[int | None, str]]

    @classmethod
    def empty(cls) -> Settlement:
        return cls([], [], [], [])

    def __bool__(self) -> bool:
        return bool(self.outcomes or self.finished_jobs or self.released_jobs or self.disabled)


async def register(conn: Connection) -> int:
    """A new worker id, its heartbeat now."""
    row = await (await conn.execute(_REGISTER)).fetchone()
    assert row is not None
    return int(row["worker_id"])


async def beat(conn: Connection, worker_id: int) -> bool:
    """The worker's heartbeat; false when it is gone (pruned as stalled after missing its beats)."""
    return await (await conn.execute(_BEAT, {"id": worker_id})).fetchone() is not None


async def unregister(conn: Connection, worker_id: int) -> None:
    await conn.execute(_UNREGISTER, {"id": worker_id})


async def claim(
    conn: Connection,
    worker_id: int | None,
    limit: int,
    *,
    room: int | None = None,
    rooms: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Up to `limit` due delivery jobs, now held by `worker_id`, with what their attempts need: at most `room` of
    one endpoint, or what `rooms` leaves to it."""
    lanes = {endpoint: left for endpoint, left in (rooms or {}).items() if left > 0}
    params = {
        "worker_id": worker_id,
        "queue": DELIVERY_QUEUE,
        "limit": limit,
        "room": limit if room is None else room,
        "full": [endpoint for endpoint, left in (rooms or {}).items() if left <= 0],
        "lanes": list(lanes),
        "rooms": list(lanes.values()),
    }
    return await (await conn.execute(_CLAIM, params)).fetchall()


async def claim_delivery(conn: Connection, worker_id: int | None, delivery_id: str) -> list[dict[str, Any]]:
    """The waiting job of one delivery, due or not (an attempt asked for by name, as the SSRF tests make)."""
    params = {"worker_id": worker_id, "queue": DELIVERY_QUEUE, "delivery_id": delivery_id}
    return await (await conn.execute(_CLAIM_DELIVERY, params)).fetchall()


async def settle(
    conn: Connection, worker_id: int | None, settlement: Settlement, released_until: dt.datetime
) -> list[dict[str, Any]]:
    """Settle everything in `settlement` in one statement; the attempts that were recorded."""
    outcomes: Sequence[Outcome] = settlement.outcomes
    params = {
        "worker_id": worker_id,
        "job_ids": [o.job_id for o in outcomes],
        "delivery_ids": [o.delivery_id for o in outcomes],
        "statuses": [o.status for o in outcomes],
        "numbers": [o.number for o in outcomes],
        "started_at": [o.started_at for o in outcomes],
        "durations": [o.duration_ms for o in outcomes],
        "status_codes": [o.status_code for o in outcomes],
        "errors": [o.error for o in outcomes],
        "excerpts": [o.excerpt for o in outcomes],
        "headers": [Jsonb(o.headers) for o in outcomes],
        "next_attempts": [o.next_attempt_at for o in outcomes],
        "endpoint_ids": [o.endpoint_id for o in outcomes],
        "disabled": [delivery_id for _, delivery_id in settlement.disabled],
        "disabled_error": DISABLED,
        "released": settlement.released_jobs,
        "released_until": released_until,
        "settled": [
            *settlement.finished_jobs,
            *(o.job_id for o in outcomes if o.job_id is not None),
            *(job_id for job_id, _ in settlement.disabled if job_id is not None),
        ],
    }
    return await (await conn.execute(_SETTLE, params)).fetchall()
