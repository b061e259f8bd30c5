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

procrastinate's own worker runs beside (`rpc.worker.runtime`), for the periodic work and e-mail.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import psycopg

from rpc.core.crypto import Sealer, SealError
from rpc.core.metrics import Metrics
from rpc.db.pool import Pool
from rpc.outbox.claims import Outcome, Settlement, beat, claim, claim_delivery, register, settle, unregister
from rpc.outbox.lanes import Lanes, Row
from rpc.outbox.policy import next_step, polling_interval
from rpc.outbox.sender import Sender, describe_failure
from rpc.outbox.signatures import ENDPOINT_SEAL_PURPOSE, signed_headers
from rpc.outbox.ssrf import BlockedDestination
from rpc.settings import Settings

log = logging.getLogger(__name__)

USER_AGENT = "HireAPI-Webhooks/1.0"


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
        status, retry_at = next_step(status_code, number, self._settings.webhook_retry_waits, dt.datetime.now(dt.UTC))
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
