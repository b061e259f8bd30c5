"""The webhook worker (which also sends e-mail: `rpc.mail.postman`): one procrastinate job per attempt; our
tables are the record.

A job makes one HTTP attempt and records it in the same transaction that either finishes the delivery
(`succeeded`, or `failed` after the last attempt) or defers the job of the next attempt, due one wait
of WEBHOOK_RETRY_WAITS after the end of this one. Attempts are counted in `webhook_deliveries`, not by the
queue: a worker killed mid-attempt records nothing, and the periodic retry of stalled jobs repeats that
attempt without using up one of the five. Delivery is therefore at least once; receivers discard
duplicates by `idempotency_key`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import procrastinate
from procrastinate import JobContext
from psycopg.types.json import Jsonb

from rpc.auth import housekeeping
from rpc.core import idempotency
from rpc.core.crypto import Sealer
from rpc.db.pool import Pool
from rpc.mail.postman import Postman, send_mail
from rpc.ops.metrics import Metrics
from rpc.outbox.emit import Emitter
from rpc.outbox.periodic import Periodic
from rpc.outbox.queue import DELIVER_TASK, MAIL_TASK, QUEUE, Queue
from rpc.outbox.sender import Answer, Sender, describe_failure
from rpc.outbox.signatures import ENDPOINT_SEAL_PURPOSE, signed_headers
from rpc.outbox.ssrf import BlockedDestination
from rpc.settings import Settings

log = logging.getLogger(__name__)

USER_AGENT = "HireAPI-Webhooks/1.0"

_LOAD = """
SELECT d.status, d.attempts, d.endpoint_id::text AS endpoint_id, e.id::text AS event_id, e.kind, e.body,
       ep.url, ep.enabled, ep.secret_sealed, ep.previous_secret_sealed,
       coalesce(ep.overlap_until > now(), false) AS overlapping
FROM webhook_deliveries AS d
JOIN events AS e ON e.id = d.event_id
JOIN webhook_endpoints AS ep ON ep.id = d.endpoint_id
WHERE d.id = %(id)s
"""
# One statement records the attempt and its outcome. Only a delivery still pending at fewer attempts is
# changed (its row lock makes a concurrent duplicate of this attempt wait, then find nothing to do), and the
# attempt row is written only when the delivery was: a stalled job retried while the first still ran records
# its attempt once.
_RECORD = """
WITH recorded AS (
    UPDATE webhook_deliveries
    SET status = %(status)s, attempts = %(number)s, last_status_code = %(status_code)s, last_error = %(error)s,
        next_attempt_at = %(next_attempt_at)s, updated_at = now()
    WHERE id = %(id)s AND status = 'pending' AND attempts < %(number)s
    RETURNING id
)
INSERT INTO webhook_attempts
    (delivery_id, number, started_at, duration_ms, status_code, error, response_excerpt, request_headers)
SELECT id, %(number)s, %(started_at)s, %(duration_ms)s, %(status_code)s, %(error)s, %(excerpt)s, %(headers)s
FROM recorded
RETURNING delivery_id
"""
_DISABLED = """
UPDATE webhook_deliveries
SET status = 'failed', last_error = 'the endpoint is disabled', next_attempt_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'pending'
"""


# The framework's own periodic work, beside the business's.
FRAMEWORK_PERIODIC = {"forget_expired": housekeeping.PERIODIC, "forget_idempotency_keys": idempotency.PERIODIC}


def worker_app(periodic: Mapping[str, Periodic]) -> procrastinate.App:
    """A procrastinate app with the delivery task, the retry of stalled jobs, and the framework's and the
    business's `periodic` work; open it on our pool (`await app.open_async(pool)`) to run a worker.

    Built per call (not a module-level app), so that several can live in one process, as in the tests.
    """
    app = procrastinate.App(connector=procrastinate.PsycopgConnector())
    app.task(name=DELIVER_TASK, queue=QUEUE, pass_context=True)(deliver_webhook)
    app.task(name=MAIL_TASK, queue=QUEUE, pass_context=True)(send_mail)
    _schedule(app, "retry_stalled_jobs", "* * * * * */5", retry_stalled_jobs)  # every 5 seconds
    for name, job in {**FRAMEWORK_PERIODIC, **periodic}.items():
        _schedule(app, name, job.cron, _periodic(name, job))
    return app


def _schedule(app: procrastinate.App, name: str, cron: str, function: Callable[..., Awaitable[None]]) -> None:
    """A task run every `cron` by one of the workers (procrastinate defers each tick once)."""
    # Ahead of any backlog of deliveries: the stalled-job retry must not wait for the queue to drain.
    task = app.task(name=f"hire.{name}", queue=QUEUE, pass_context=True, queueing_lock=name, priority=100)(function)
    app.periodic(cron=cron, periodic_id=name)(task)


def _periodic(name: str, job: Periodic) -> Callable[[JobContext, int], Awaitable[None]]:
    async def run(context: JobContext, timestamp: int) -> None:
        deliverer: Deliverer = context.additional_context["deliverer"]
        async with deliverer.pool.connection() as conn, conn.transaction():
            await job.run(conn, context.additional_context["emitter"])
        log.debug("periodic %s done", name)

    return run


@dataclass(frozen=True, slots=True)
class _Target:
    endpoint_id: str
    event_id: str
    kind: str
    body: bytes
    url: str
    secret: str
    previous_secret: str | None
    number: int


class _Gates:
    """At most `limit` attempts in flight to one endpoint in this worker, so that a receiver that hangs
    cannot take every slot and delay the deliveries of all the other endpoints."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._busy: dict[str, int] = {}

    def enter(self, endpoint_id: str) -> bool:
        busy = self._busy.get(endpoint_id, 0)
        if busy >= self._limit:
            return False
        self._busy[endpoint_id] = busy + 1
        return True

    def leave(self, endpoint_id: str) -> None:
        busy = self._busy.pop(endpoint_id) - 1
        if busy:
            self._busy[endpoint_id] = busy


@dataclass(frozen=True, slots=True)
class _Outcome:
    started_at: dt.datetime
    duration_ms: int
    status_code: int | None
    error: str | None
    excerpt: str | None
    headers: dict[str, str]  # as sent, for the panel: the signatures are no secret

    @property
    def succeeded(self) -> bool:
        return self.status_code == 200


class Deliverer:
    """Makes and records one attempt of one delivery."""

    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        queue: Queue,
        sender: Sender,
        metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics
        self._settings = settings
        self.pool = pool
        self._queue = queue
        self._sender = sender
        self._sealer = Sealer(settings.secret_key)
        self._gates = _Gates(settings.webhook_per_endpoint)

    async def attempt(self, delivery_id: str) -> None:
        target = await self._load(delivery_id)
        if target is None:
            return
        if not self._gates.enter(target.endpoint_id):
            await self._later(delivery_id)
            return
        try:
            outcome = await self._post(delivery_id, target)
        finally:
            self._gates.leave(target.endpoint_id)
        await self._record(delivery_id, target.number, outcome)

    async def _later(self, delivery_id: str) -> None:
        """This endpoint already holds its share of the worker (a slow or hanging receiver): leave the slot to
        other endpoints and come back shortly. No attempt is used up: our delivery row counts them."""
        later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=min(1.0, self._settings.webhook_timeout / 2))
        async with self.pool.connection() as conn, conn.transaction():
            await self._queue.enqueue(conn, [delivery_id], later)

    async def _load(self, delivery_id: str) -> _Target | None:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(_LOAD, {"id": delivery_id})
            row = await cursor.fetchone()
            if row is None or row["status"] != "pending":
                return None  # finished already: a duplicate job, or one retried after a crash
            if not row["enabled"]:
                await conn.execute(_DISABLED, {"id": delivery_id})
                return None
        previous = row["previous_secret_sealed"] if row["overlapping"] else None
        return _Target(
            endpoint_id=row["endpoint_id"],
            event_id=row["event_id"],
            kind=row["kind"],
            body=bytes(row["body"]),
            url=row["url"],
            secret=self._open(row["secret_sealed"]),
            previous_secret=self._open(previous) if previous else None,
            number=row["attempts"] + 1,
        )

    def _open(self, sealed: bytes) -> str:
        return self._sealer.open(bytes(sealed), ENDPOINT_SEAL_PURPOSE).decode()

    def _headers(self, delivery_id: str, target: _Target) -> dict[str, str]:
        """This attempt's headers, signed now (`webhook-timestamp` is when this attempt was signed)."""
        return {
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",  # the stored excerpt of the answer stays readable
            "User-Agent": USER_AGENT,
            "X-Service-Event": target.kind,
            "X-Service-Delivery": delivery_id,
            **signed_headers(
                event_id=target.event_id,
                timestamp=int(time.time()),
                body=target.body,
                secret=target.secret,
                previous_secret=target.previous_secret,
            ),
        }

    async def _post(self, delivery_id: str, target: _Target) -> _Outcome:
        started_at = dt.datetime.now(dt.UTC)
        clock = time.monotonic()
        answer: Answer | None = None
        error: str | None = None
        headers = self._headers(delivery_id, target)
        try:
            async with asyncio.timeout(self._settings.webhook_timeout):
                answer = await self._sender.post(target.url, target.body, headers)
        except TimeoutError:
            error = f"timed out after {self._settings.webhook_timeout:g} s"
        except BlockedDestination as exc:
            error = str(exc)
        except Exception as exc:  # whatever went wrong is this attempt's failure, recorded and retried
            error = describe_failure(exc)
        duration_ms = round((time.monotonic() - clock) * 1000)
        if answer is None:
            return _Outcome(started_at, duration_ms, None, error, None, headers)
        return _Outcome(started_at, duration_ms, answer.status_code, None, answer.excerpt, headers)

    async def _record(self, delivery_id: str, number: int, outcome: _Outcome) -> None:
        """The attempt and the delivery's new state; a retry's job is deferred in the same transaction."""
        waits = self._settings.webhook_retry_waits
        retry_at = None
        if outcome.succeeded:
            status = "succeeded"
        elif number >= len(waits):
            status = "failed"
        else:
            status = "pending"
            retry_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=waits[number])
        values = {
            "id": delivery_id,
            "status": status,
            "number": number,
            "started_at": outcome.started_at,
            "duration_ms": outcome.duration_ms,
            "status_code": outcome.status_code,
            "error": outcome.error,
            "excerpt": outcome.excerpt,
            "headers": Jsonb(outcome.headers),
            "next_attempt_at": retry_at,
        }
        async with self.pool.connection() as conn:
            if retry_at is None:  # one statement, its own transaction
                recorded = await (await conn.execute(_RECORD, values)).fetchone()
            else:
                async with conn.transaction():
                    recorded = await (await conn.execute(_RECORD, values)).fetchone()
                    if recorded is not None:
                        await self._queue.enqueue(conn, [delivery_id], retry_at)
        if recorded is None:
            return  # another worker recorded this attempt (a stalled job retried while it still ran)
        if self._metrics is not None:
            self._metrics.deliveries.labels("succeeded" if outcome.succeeded else "failed").inc()
        log.log(
            logging.DEBUG if outcome.succeeded else logging.INFO,
            "webhook delivery %s attempt %d: %s",
            delivery_id,
            number,
            outcome.status_code or outcome.error,
        )


async def deliver_webhook(context: JobContext, delivery_id: str) -> None:
    """One attempt of one delivery."""
    deliverer: Deliverer = context.additional_context["deliverer"]
    await deliverer.attempt(delivery_id)


async def retry_stalled_jobs(context: JobContext, timestamp: int) -> None:
    """Requeue the jobs of workers whose heartbeat stopped (killed mid-attempt): nothing stays `doing`."""
    stalled_after: float = context.additional_context["stalled_after"]
    manager = context.app.job_manager
    for job in await manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after):
        log.warning("retrying stalled job %s of a worker that stopped", job.id)
        await manager.retry_job(job)


def polling_interval(waits: Sequence[float]) -> float:
    """How often a worker looks for due jobs: a retry is deferred with a future `schedule_at`, and the
    queue's notification comes when it is inserted, not when it falls due; only a poll finds it then.
    It polls every tenth of the shortest wait (between 50 ms and 1 s), so a retry is at most that late."""
    positive = [wait for wait in waits if wait > 0]
    return max(0.05, min(1.0, min(positive) / 10)) if positive else 1.0


async def run_worker(
    app: procrastinate.App,
    deliverer: Deliverer,
    emitter: Emitter,
    settings: Settings,
    *,
    concurrency: int,
    signals: bool,
) -> None:
    """Work the queue until stopped (SIGTERM, or cancellation): running attempts are drained."""
    heartbeat = settings.worker_heartbeat
    await app.run_worker_async(
        fetch_job_polling_interval=polling_interval(settings.webhook_retry_waits),
        queues=[QUEUE],
        concurrency=concurrency,
        additional_context={
            "deliverer": deliverer,
            "postman": Postman(settings, deliverer.pool, emitter.queue),
            "emitter": emitter,
            "stalled_after": 3 * heartbeat,
        },
        install_signal_handlers=signals,
        delete_jobs="successful",
        update_heartbeat_interval=heartbeat,
        stalled_worker_timeout=3 * heartbeat,
        shutdown_graceful_timeout=settings.webhook_timeout + 5,
        name="webhooks",
    )
