"""The delivery scenario: a backlog of webhook events drained by `bin/worker` into the receiver."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.config import READY_SECONDS, BenchError
from bench.delivery import emit_events
from bench.meter import Usage
from bench.processes import Child, script
from bench.results import Row, Run, median, rounded, summarize
from bench.stand import Stand
from procedures.vocabulary import VOCABULARY
from rpc.ops import admin as ops
from rpc.outbox.emit import build_emitter
from rpc.outbox.queue import DELIVER_TASK, DELIVERY_QUEUE
from rpc.settings import Settings


@dataclass(frozen=True, slots=True)
class HookRound:
    drain: Run
    paced_rate: float
    latencies_ms: list[float]


class Hooks:
    """Webhook delivery by one `bin/worker` into the loopback receiver: its throughput on a backlog, and the
    latency from emit (the event's transaction) to receipt at the target rate (`Config.webhook_rate`)."""

    def __init__(self, bench: Stand) -> None:
        self.bench = bench
        self.emitter = build_emitter(Settings.from_env(bench.targets.env), VOCABULARY.event_kinds)
        self.rounds: list[HookRound] = []

    def round(self, number: int) -> None:
        """Purge the writes' backlog, emit a burst with no worker running, start one worker and time the drain;
        then emit at the target rate (or below what the worker drained at) and time each event from emit to
        receipt."""
        bench, config = self.bench, self.bench.config
        asyncio.run(purge_backlog(bench.database_url))
        expected, _ = self.emit(config.webhook_events, rate=None)
        bench.say(f"  webhooks: {len(expected)} events emitted with no worker running; starting one bin/worker")
        concurrency = ["--concurrency", str(config.worker_concurrency)]
        worker = bench.targets.start(f"worker-{number}", [*script("worker"), *concurrency])
        try:
            drain = self.drain(worker, expected)
            bench.say(f"  webhooks: drained at {drain.rate:,.0f} events/s; now paced")
            rate = min(config.webhook_rate, 0.9 * drain.rate)
            created, rate = self.emit(int(rate * config.paced_seconds), rate=rate)
            arrivals = self.wait_for(worker, created)
        finally:
            worker.stop()
        latencies = [1000 * (arrivals[delivery] - moment) for delivery, moment in created.items()]
        bench.say(
            f"  webhooks: {len(latencies)} paced at {rate:.0f}/s: emit to receipt p50 "
            f"{percentile(latencies, 50):.0f} ms, p99 {percentile(latencies, 99):.0f} ms"
        )
        self.rounds.append(HookRound(drain=drain, paced_rate=rate, latencies_ms=latencies))

    def emit(self, count: int, rate: float | None) -> tuple[dict[str, float], float]:
        """`count` events, straight through the emitter: the deliveries they created (what the database holds),
        and the rate they were emitted at."""
        started = time.time()
        accounts = self.bench.seeded.employers.accounts
        emitted = asyncio.run(emit_events(self.bench.database_url, self.emitter, accounts, count, rate))
        if rate is not None and emitted < 0.95 * rate:
            self.bench.notes.append(
                f"webhooks.delivery: asked for {rate:.0f} events/s, emitted {emitted:.0f} (the bench's own emitter "
                "was short of CPU): the latency figures are at that rate"
            )
        created = asyncio.run(deliveries_since(self.bench.database_url, started))
        if not created:
            raise BenchError("the emitted events created no webhook deliveries")
        return created, emitted

    def drain(self, worker: Child, expected: dict[str, float]) -> Run:
        """First arrival to last: one worker's throughput on a backlog, and its CPU over the same span."""
        deadline = time.monotonic() + READY_SECONDS + len(expected) / 20
        while not set(expected) & set(self.bench.receiver.arrivals()):
            self._check(worker, deadline, "the first webhook delivery")
            time.sleep(0.005)
        before = self.bench.meter.sample(worker.pid)
        arrivals = self.wait_for(worker, expected, deadline)
        after = self.bench.meter.sample(worker.pid)
        moments = sorted(arrivals[delivery] for delivery in expected)
        span = moments[-1] - moments[0]
        lag = [1000 * (arrivals[delivery] - created) for delivery, created in expected.items()]
        rate = (len(moments) - 1) / span if span > 0 else 0.0
        usage = Usage.between(before, after)
        return Run(len(moments), 0, rate, percentile(lag, 50), percentile(lag, 99), usage)

    def wait_for(self, worker: Child, expected: dict[str, float], deadline: float | None = None) -> dict[str, float]:
        """Until the receiver has every expected delivery; their arrival times."""
        deadline = deadline or time.monotonic() + READY_SECONDS + len(expected) / 20
        while True:
            arrivals = self.bench.receiver.arrivals()
            if all(delivery in arrivals for delivery in expected):
                return arrivals
            self._check(worker, deadline, f"{len(expected)} webhook deliveries")
            time.sleep(0.01)

    @staticmethod
    def _check(worker: Child, deadline: float, what: str) -> None:
        if not worker.alive():
            raise BenchError(f"{worker.name} exited:\n{worker.tail()}")
        if time.monotonic() > deadline:
            raise BenchError(f"the receiver did not get {what} in time:\n{worker.tail()}")

    def row(self, size: int) -> Row:
        drains = [hook.drain for hook in self.rounds]
        row = summarize("webhooks.delivery", size, "events/s", drains, cores=self.bench.cores, process="worker")
        latencies = [latency for hook in self.rounds for latency in hook.latencies_ms]
        row.p50_ms, row.p99_ms = rounded(percentile(latencies, 50), 2), rounded(percentile(latencies, 99), 2)
        row.details.update(
            worker=f"one bin/worker --concurrency {self.bench.config.worker_concurrency}; server CPU = the worker's",
            backlog_events=self.bench.config.webhook_events,
            backlog_p50_ms=rounded(median([drain.p50_ms for drain in drains]), 1),
            backlog_p99_ms=rounded(median([drain.p99_ms for drain in drains]), 1),
            paced_events_s=rounded(median([hook.paced_rate for hook in self.rounds]), 1),
            paced_events=len(latencies),
        )
        return row


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(pct / 100 * len(ordered)) - 1))]


_PURGE_JOBS = "DELETE FROM procrastinate_jobs WHERE queue_name = %(queue)s AND task_name = %(task)s AND status = 'todo'"
_PURGE_DELIVERIES = """
UPDATE webhook_deliveries
SET status = 'failed', last_error = 'bench: purged before the delivery scenario', next_attempt_at = NULL
WHERE status = 'pending'
"""
_VACUUM_QUEUE = "VACUUM (ANALYZE) procrastinate_jobs, procrastinate_events, webhook_deliveries"
_CREATED_SINCE = """
SELECT id::text AS id, extract(epoch FROM created_at)::float8 AS created
FROM webhook_deliveries WHERE created_at >= to_timestamp(%(since)s)
"""


async def purge_backlog(url: str) -> None:
    """Forget the deliveries the write scenario queued (no worker ran then), so that a round starts empty.

    And vacuum what the purge left dead: thousands of deleted jobs at the head of the queue's index would make
    every fetch step over them until autovacuum came (measured: 2.4 ms a fetch instead of 0.3 ms, half the
    rate), which times the purge, not the worker. A running service never deletes a backlog like that."""
    async with await ops.connect(url) as conn:
        async with conn.transaction():
            await conn.execute(_PURGE_JOBS, {"queue": DELIVERY_QUEUE, "task": DELIVER_TASK})
            await conn.execute(_PURGE_DELIVERIES)
        await conn.execute(_VACUUM_QUEUE)


async def deliveries_since(url: str, since: float) -> dict[str, float]:
    """Deliveries created at or after `since` (wall clock): their creation time, in the emitting transaction."""
    async with await ops.connect(url) as conn:
        cursor = await conn.execute(_CREATED_SINCE, {"since": since})
        return {str(row["id"]): float(row["created"]) for row in await cursor.fetchall()}
