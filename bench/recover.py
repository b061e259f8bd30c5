"""Recovering failed deliveries (issue 26): an endpoint that was down has 10,000 deliveries ended `failed`; its
receiver is back, and "Redeliver failed" is pressed. Measured: the time to queue them (the panel's own call,
`Webhooks.redeliver_failed_since`, in one transaction) and the time one `bin/worker` takes to drain them
(events/s from its first arrival to its last, and from the worker's start).

The failed deliveries are made as an outage makes them, without waiting for five attempts each: the events are
emitted with no worker running, then their deliveries are marked `failed` after five attempts and their queue jobs
removed.

    python -m bench.recover [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import time
import uuid
from pathlib import Path

import msgspec

from bench.config import Progress
from bench.processes import script
from bench.stage import Stage, stage
from procedures.jobs.shapes import JobEvent
from procedures.vocabulary import VOCABULARY
from rpc.ops import admin as ops
from rpc.outbox.emit import build_emitter
from rpc.outbox.endpoints import Webhooks
from rpc.outbox.queue import DELIVERY_QUEUE
from rpc.settings import Settings

FULL_DELIVERIES, QUICK_DELIVERIES = 10_000, 1_000
BATCH = 500  # events per emitting transaction
DRAINED_WITHIN = 600.0
KIND = "job.updated"

_FAIL = """
UPDATE webhook_deliveries SET status = 'failed', attempts = 5, last_status_code = 503, next_attempt_at = NULL
WHERE endpoint_id = %(endpoint)s AND status = 'pending'
"""
_UNQUEUE = "DELETE FROM procrastinate_jobs WHERE queue_name = %(queue)s"


class Figures(msgspec.Struct, kw_only=True):
    deliveries: int
    queue_seconds: float
    drain_seconds: float  # first arrival to last
    drain_events_per_second: float
    from_worker_start_seconds: float


async def fail(on: Stage, settings: Settings, count: int) -> dt.datetime:
    """`count` failed deliveries to the stage's endpoint; the time before the first."""
    emitter = build_emitter(settings, VOCABULARY.event_kinds)
    async with await ops.connect(on.database_url) as conn:
        since = (await (await conn.execute("SELECT now() AS t")).fetchone() or {})["t"]
        for start in range(0, count, BATCH):
            async with conn.transaction():
                for number in range(start, min(count, start + BATCH)):
                    data = JobEvent(job_id=str(uuid.uuid4()), title=f"Job {number}", status="published")
                    await emitter.emit(conn, KIND, data, [on.account_id])
        async with conn.transaction():
            await conn.execute(_FAIL, {"endpoint": on.endpoint_id})
            await conn.execute(_UNQUEUE, {"queue": DELIVERY_QUEUE})
    return since


async def recover(on: Stage, settings: Settings, since: dt.datetime) -> tuple[list[str], float]:
    """What the panel's "Redeliver failed" does; the deliveries queued and the seconds it took."""
    webhooks = Webhooks(settings, build_emitter(settings, VOCABULARY.event_kinds))
    async with await ops.connect(on.database_url) as conn:
        began = time.monotonic()
        async with conn.transaction():
            queued = await webhooks.redeliver_failed_since(conn, on.account_id, on.endpoint_id, since)
        return queued, time.monotonic() - began


def drain(on: Stage, queued: list[str]) -> tuple[float, float]:
    """Start one bin/worker and wait until every queued delivery arrived: (first to last arrival, from the start)."""
    expected = set(queued)
    started, began = time.time(), time.monotonic()
    worker = on.targets.start("recover-worker", script("worker"))
    try:
        deadline = began + DRAINED_WITHIN
        while not expected <= on.receiver.arrivals().keys():
            if not worker.alive() or time.monotonic() > deadline:
                raise SystemExit(f"the worker did not drain the recovered deliveries:\n{worker.tail()}")
            time.sleep(0.1)
    finally:
        worker.stop()
    arrivals = [at for delivery, at in on.receiver.arrivals().items() if delivery in expected]
    return max(arrivals) - min(arrivals), max(arrivals) - started


def run(quick: bool, say: Progress) -> Figures:
    count = QUICK_DELIVERIES if quick else FULL_DELIVERIES
    with stage([KIND], say) as on:
        settings = Settings.from_env(on.env)
        say(f"{count:,} deliveries to one endpoint, failed (no worker running)")
        since = asyncio.run(fail(on, settings, count))
        queued, queue_seconds = asyncio.run(recover(on, settings, since))
        say(f"recover queued {len(queued):,} in {queue_seconds:.2f} s; one bin/worker drains them")
        drained, from_start = drain(on, queued)
        figures = Figures(
            deliveries=len(queued),
            queue_seconds=round(queue_seconds, 3),
            drain_seconds=round(drained, 2),
            drain_events_per_second=round(len(queued) / max(drained, 1e-9)),
            from_worker_start_seconds=round(from_start, 2),
        )
        say(msgspec.json.encode(figures).decode())
        return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recover", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_DELIVERIES:,} deliveries, not {FULL_DELIVERIES:,}"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args(argv)
    figures = run(args.quick, Progress())
    print(
        f"recovering {figures.deliveries:,} failed deliveries: queued in {figures.queue_seconds} s; one worker "
        f"drained them in {figures.drain_seconds} s ({figures.drain_events_per_second:,} events/s), "
        f"{figures.from_worker_start_seconds} s from its start"
    )
    if args.json is not None:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(figures)) + b"\n")


if __name__ == "__main__":
    main()
