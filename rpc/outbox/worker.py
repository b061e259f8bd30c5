"""The webhook worker (which also sends e-mail: `rpc.mail.postman`): delivery jobs claimed in batches, attempts
made concurrently, outcomes settled in batches; our tables are the record.

A worker claims up to half its free attempt slots of due delivery jobs in one statement (`rpc/outbox/claims.py`),
posts them concurrently (at most WEBHOOK_PER_ENDPOINT at once to one endpoint; the others of that endpoint wait in
its lane, `rpc/outbox/lanes.py`, and start as its attempts end), and settles every outcome that has
come in since its last settlement in one statement: the attempt row, the delivery's new state (`succeeded`, `failed`
after the last attempt, or `pending` with its next attempt due one wait of WEBHOOK_RETRY_WAITS after the end of
this one) and the job (deleted, or rescheduled for that next attempt) change together. Attempts are counted in
`webhook_deliveries`, not by the queue: a worker killed before it settles an attempt records nothing, its jobs are
still `doing` under its id, and the periodic retry of stalled jobs repeats those attempts without using up one of
the five. Delivery is therefore at least once; receivers discard duplicates by `idempotency_key`.

procrastinate's own worker runs beside, for the periodic work (the stalled-job retry among it) and e-mail.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import procrastinate
import psycopg
from procrastinate import JobContext
from procrastinate.exceptions import ConnectorException
from procrastinate.jobs import Notification

from rpc.auth import housekeeping
from rpc.core import idempotency
from rpc.core.crypto import Sealer, SealError
from rpc.db.pool import Pool
from rpc.mail.postman import Postman, send_mail
from rpc.ops.metrics import Metrics
from rpc.outbox.claims import Outcome, Settlement, beat, claim, claim_delivery, register, settle, unregister
from rpc.outbox.emit import Emitter
from rpc.outbox.lanes import Lanes, Row
from rpc.outbox.periodic import Periodic
from rpc.outbox.queue import DELIVERY_QUEUE, MAIL_TASK, QUEUE
from rpc.outbox.sender import Sender, describe_failure
from rpc.outbox.signatures import ENDPOINT_SEAL_PURPOSE, signed_headers
from rpc.outbox.ssrf import BlockedDestination
from rpc.settings import Settings

log = logging.getLogger(__name__)

USER_AGENT = "HireAPI-Webhooks/1.0"
PERIODIC_CONCURRENCY = 4  # procrastinate's worker runs only the periodic work now

# The framework's own periodic work, beside the business's.
FRAMEWORK_PERIODIC = {"forget_expired": housekeeping.PERIODIC, "forget_idempotency_keys": idempotency.PERIODIC}


def worker_app(periodic: Mapping[str, Periodic]) -> procrastinate.App:
    """A procrastinate app with the retry of stalled jobs and the framework's and the business's `periodic` work;
    open it on our pool (`await app.open_async(pool)`) to run a worker.

    Built per call (not a module-level app), so that several can live in one process, as in the tests.
    """
    app = procrastinate.App(connector=procrastinate.PsycopgConnector())
    app.task(name=MAIL_TASK, queue=QUEUE, pass_context=True)(send_mail)
    _schedule(app, "retry_stalled_jobs", "* * * * * */5", retry_stalled_jobs)  # every 5 seconds
    for name, job in {**FRAMEWORK_PERIODIC, **periodic}.items():
        _schedule(app, name, job.cron, _periodic(name, job))
    return app


def _schedule(app: procrastinate.App, name: str, cron: str, function: Callable[..., Awaitable[None]]) -> None:
    """A task run every `cron` by one of the workers (procrastinate defers each tick once)."""
    # Ahead of the rest of the periodic work: the stalled-job retry must not wait behind it.
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
    delivery_id: str
    event_id: str
    kind: str
    body: bytes
    url: str
    secret: str
    previous_secret: str | None


class Deliverer:
    """Claims due delivery jobs, makes their attempts and settles them; `run` until stopped."""

    def __init__(
        self, settings: Settings, pool: Pool, sender: Sender, metrics: Metrics | None = None, *, concurrency: int = 10
    ) -> None:
        self._metrics = metrics
        self._settings = settings
        self.pool = pool
        self._sender = sender
        self._sealer = Sealer(settings.secret_key)
        self._concurrency = concurrency
        self._batch = max(1, concurrency // 4)  # claim no fewer at once while the queue is full
        # A lane holds what its endpoint starts within HOLD_FOR at its pace, and always leaves a batch's room to
        # the other endpoints.
        per_endpoint = settings.webhook_per_endpoint
        self._lanes = Lanes(per_endpoint, hold_at_most=max(0, concurrency - per_endpoint - self._batch))
        self._worker_id: int | None = None
        self._stopped = False
        self._running: set[asyncio.Task[None]] = set()
        self._in_flight: set[str] = set()  # deliveries being attempted or held here
        self._unsettled = Settlement.empty()
        self.released = 0  # jobs sent back to the queue unattempted (held too long, or at a stop)
        self._slot_freed = asyncio.Event()
        self._room_made = asyncio.Event()  # a lane started most of what it held: more of its jobs may be claimed
        self._to_settle = asyncio.Event()
        self.notified = asyncio.Event()  # a new job was deferred (set by the queue's notifications)

    async def attempt(self, delivery_id: str) -> None:
        """One attempt of one delivery, due or not, if its job is waiting; settled before returning."""
        async with self.pool.connection() as conn:
            claimed = await claim_delivery(conn, self._worker_id, delivery_id)
        self._start(claimed)
        await self._drain()

    async def run(self, stopping: asyncio.Event) -> None:
        """Deliver until `stopping` is set; then make the attempts in flight and settle them before returning.

        It registers as a queue worker of its own and keeps its heartbeat, so that the jobs it holds are requeued
        if it dies."""
        async with self.pool.connection() as conn:
            self._worker_id = await register(conn)
        poll = polling_interval(self._settings.webhook_retry_waits)
        settling = asyncio.create_task(self._settle_forever())
        beating = asyncio.create_task(self._beat_forever())
        try:
            while not stopping.is_set():
                self._release(self._lanes.expired(time.monotonic()))
                free = self._concurrency - len(self._running) - self._lanes.held
                if free < self._batch:
                    self._slot_freed.clear()
                    await _first(self._slot_freed.wait(), stopping.wait(), asyncio.sleep(poll))
                    continue
                self.notified.clear()
                try:
                    async with self.pool.connection() as conn:
                        claimed = await claim(
                            conn, self._worker_id, free, room=self._lanes.room, rooms=self._lanes.rooms()
                        )
                except psycopg.Error as exc:
                    log.warning("claiming delivery jobs failed, trying again in %g s: %s", poll, exc)
                    claimed = []
                self._start(claimed)
                if len(claimed) < free:
                    # Nothing more is due, or only for lanes that are full: wait for a new job, room in a lane, a
                    # retry falling due or a stop, rather than sweep the queue.
                    self._room_made.clear()
                    waits = (self._room_made.wait(), self.notified.wait(), stopping.wait())
                    await _first(asyncio.sleep(poll), *waits)
        finally:
            self._release(self._lanes.drain())
            while self._running:
                await asyncio.gather(*self._running)
            self._stopped = True
            self._to_settle.set()
            await settling
            beating.cancel()
            await self._unregister()

    async def _beat_forever(self) -> None:
        """The heartbeat. A worker cut off for longer than the stalled timeout has been pruned, and its jobs
        requeued: it registers again, and what it still settles for the old id is guarded as any late settlement
        is."""
        while True:
            await asyncio.sleep(self._settings.worker_heartbeat)
            try:
                async with self.pool.connection() as conn:
                    if self._worker_id is not None and not await beat(conn, self._worker_id):
                        log.warning("delivery worker %s was taken for dead; registering again", self._worker_id)
                        self._worker_id = await register(conn)
            except psycopg.Error as exc:
                log.warning("the delivery worker's heartbeat failed: %s", exc)

    async def _unregister(self) -> None:
        if self._worker_id is None:
            return
        try:
            async with self.pool.connection() as conn:
                await unregister(conn, self._worker_id)
        except psycopg.Error as exc:  # its heartbeat stops all the same: it will be pruned
            log.warning("unregistering delivery worker %s failed: %s", self._worker_id, exc)

    def _start(self, claimed: list[Row]) -> None:
        """An attempt for each claimed job that needs one, at once or in its endpoint's turn; the others settled
        without one."""
        unsettled, now = self._unsettled, time.monotonic()
        for row in claimed:
            job_id, delivery_id = row["job_id"], row["delivery_id"]
            if row["status"] != "pending" or delivery_id in self._in_flight:
                unsettled.finished_jobs.append(job_id)  # finished already, gone, or a second job of one attempt
            elif not row["enabled"]:
                unsettled.disabled.append((job_id, delivery_id))
            else:
                self._in_flight.add(delivery_id)
                if self._lanes.admit(row["endpoint_id"], row, now):
                    self._launch(row)
        if unsettled:
            self._to_settle.set()

    def _launch(self, row: Row) -> None:
        task = asyncio.create_task(self._attempt(row))
        self._running.add(task)
        task.add_done_callback(self._finished)

    def _release(self, rows: list[Row]) -> None:
        """Held jobs back to the queue, no attempt made (due again shortly, for any worker)."""
        for row in rows:
            self._in_flight.discard(row["delivery_id"])
            self._unsettled.released_jobs.append(row["job_id"])
        if rows:
            self.released += len(rows)
            self._to_settle.set()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slot_freed.set()

    def _target(self, row: dict[str, Any]) -> _Target:
        previous = row["previous_secret_sealed"] if row["overlapping"] else None
        return _Target(
            delivery_id=row["delivery_id"],
            event_id=row["event_id"],
            kind=row["kind"],
            body=bytes(row["body"]),
            url=row["url"],
            secret=self._open(row["secret_sealed"]),
            previous_secret=self._open(previous) if previous else None,
        )

    def _open(self, sealed: bytes) -> str:
        return self._sealer.open(bytes(sealed), ENDPOINT_SEAL_PURPOSE).decode()

    def _headers(self, target: _Target) -> dict[str, str]:
        """This attempt's headers, signed now (`webhook-timestamp` is when this attempt was signed)."""
        return {
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",  # the stored excerpt of the answer stays readable
            "User-Agent": USER_AGENT,
            "X-Service-Event": target.kind,
            "X-Service-Delivery": target.delivery_id,
            **signed_headers(
                event_id=target.event_id,
                timestamp=int(time.time()),
                body=target.body,
                secret=target.secret,
                previous_secret=target.previous_secret,
            ),
        }

    async def _attempt(self, row: Row) -> None:
        began = time.monotonic()
        try:
            outcome = await self._post(row)
        finally:
            self._in_flight.discard(row["delivery_id"])
            now = time.monotonic()
            following = self._lanes.finished(row["endpoint_id"], now, took=now - began)
            if following is not None:
                self._launch(following)  # the endpoint's next job, the moment this one ended
            if self._lanes.low(row["endpoint_id"]):
                self._room_made.set()
        self._unsettled.outcomes.append(outcome)
        self._to_settle.set()

    async def _post(self, row: dict[str, Any]) -> Outcome:
        started_at = dt.datetime.now(dt.UTC)
        clock = time.monotonic()
        status_code: int | None = None
        excerpt: str | None = None
        error: str | None = None
        headers: dict[str, str] = {}
        number = row["attempts"] + 1
        try:
            target = self._target(row)  # a secret that cannot be opened fails this attempt, not the worker
            headers = self._headers(target)
            async with asyncio.timeout(self._settings.webhook_timeout):
                answer = await self._sender.post(target.url, target.body, headers)
            status_code, excerpt = answer.status_code, answer.excerpt
        except TimeoutError:
            error = f"timed out after {self._settings.webhook_timeout:g} s"
        except BlockedDestination as exc:
            error = str(exc)
        except SealError:
            error = "the endpoint's secret cannot be opened with this SERVICE_SECRET_KEY; rotate the secret"
        except Exception as exc:  # whatever went wrong is this attempt's failure, recorded and retried
            error = describe_failure(exc)
        ended = dt.datetime.now(dt.UTC)
        waits = self._settings.webhook_retry_waits
        retry_at = None
        if status_code == 200:
            status = "succeeded"
        elif number >= len(waits):
            status = "failed"
        else:
            status = "pending"
            retry_at = ended + dt.timedelta(seconds=waits[number])
        duration_ms = round((time.monotonic() - clock) * 1000)
        return Outcome(
            row["job_id"], row["delivery_id"], status, number, started_at, duration_ms, status_code, error, excerpt,
            headers, retry_at, row["endpoint_id"],
        )  # fmt: skip

    async def _settle_forever(self) -> None:
        """Settle whatever has come in since the last settlement, as soon as the last one is written: at a high
        rate many outcomes share a statement, at a low one each is written at once."""
        while True:
            await self._to_settle.wait()
            await self._settle()
            if self._stopped and not self._unsettled:
                return

    async def _settle(self) -> None:
        """Write everything unsettled, trying again while the database is unreachable (the jobs stay `doing`
        meanwhile: if this worker dies first, they are requeued and the attempts made again)."""
        self._to_settle.clear()
        settlement, self._unsettled = self._unsettled, Settlement.empty()
        if not settlement:
            return
        later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=min(1.0, self._settings.webhook_timeout / 2))
        while True:
            try:
                async with self.pool.connection() as conn:
                    recorded = await settle(conn, self._worker_id, settlement, later)
                break
            except psycopg.Error as exc:
                log.warning("settling %d attempts failed, trying again: %s", len(settlement.outcomes), exc)
                await asyncio.sleep(1.0)
        for row in recorded:
            if self._metrics is not None:
                self._metrics.deliveries.labels("succeeded" if row["status_code"] == 200 else "failed").inc()
            log.log(
                logging.DEBUG if row["status_code"] == 200 else logging.INFO,
                "webhook delivery %s attempt %d: %s",
                row["delivery_id"],
                row["number"],
                row["status_code"] or row["error"],
            )

    async def _drain(self) -> None:
        """Wait for the attempts in flight, then settle them and anything else unsettled."""
        while self._running:
            await asyncio.gather(*self._running)
        await self._settle()


async def _first(*waits: Coroutine[Any, Any, Any]) -> None:
    """Until the first of `waits` is done; the others are cancelled."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


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
    app: procrastinate.App, deliverer: Deliverer, emitter: Emitter, settings: Settings, *, signals: bool
) -> None:
    """Deliver, and run the periodic work, until stopped (SIGTERM, or cancellation): the attempts in flight are
    made and settled first."""
    heartbeat = settings.worker_heartbeat
    stopping = asyncio.Event()
    listening = asyncio.create_task(_listen(app, deliverer))
    delivering = asyncio.create_task(deliverer.run(stopping))
    try:
        await app.run_worker_async(
            fetch_job_polling_interval=polling_interval(settings.webhook_retry_waits),
            queues=[QUEUE],
            concurrency=PERIODIC_CONCURRENCY,
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
    finally:
        stopping.set()
        await delivering
        listening.cancel()


async def _listen(app: procrastinate.App, deliverer: Deliverer) -> None:
    """Wake the deliverer when a delivery job is deferred (procrastinate's notification on insert); listening
    again after the database was lost. Meanwhile the deliverer still polls."""

    async def wake(*, channel: str, notification: Notification) -> None:
        deliverer.notified.set()

    while True:
        try:
            await app.job_manager.listen_for_jobs(on_notification=wake, queues=[DELIVERY_QUEUE])
        except (psycopg.Error, ConnectorException) as exc:
            log.warning("listening for delivery jobs failed, listening again in 1 s: %s", exc)
        await asyncio.sleep(1.0)
