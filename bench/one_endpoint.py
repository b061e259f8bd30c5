"""One endpoint's backlog drained by one `bin/worker`: the flow the per-endpoint lanes give (`rpc/outbox/lanes.py`),
at most WEBHOOK_PER_ENDPOINT attempts in flight to it, the next started the moment one ends.

The delivery scenario (`Hooks` in `bench.hooks`) spreads its events over every seeded account's endpoint, so it
cannot see how fast one endpoint drains: an integrator with one endpoint and a busy account would. Here every
event of the backlog goes to one account's one endpoint, and the figure is events/s from the first arrival to the
last, with the p99 from emit to receipt.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from bench.delivery import emit_events
from bench.hooks import deliveries_since, purge_backlog
from bench.processes import script
from bench.results import Row, summarize

if TYPE_CHECKING:
    from bench.hooks import Hooks

NAME = "webhooks.one_endpoint"
QUICK_EVENTS = 1_000
FULL_EVENTS = 5_000


def measure(hooks: Hooks, size: int, events: int, number: int) -> Row:
    """Emit `events` to the first seeded account alone with no worker running, then time one worker's drain."""
    bench = hooks.bench
    asyncio.run(purge_backlog(bench.database_url))
    account = bench.seeded.employers.accounts[:1]
    started = time.time()
    asyncio.run(emit_events(bench.database_url, hooks.emitter, account, events, None))
    expected = asyncio.run(deliveries_since(bench.database_url, started))
    bench.say(f"  {NAME}: {len(expected)} events to one endpoint, no worker running; starting one bin/worker")
    concurrency = ["--concurrency", str(bench.config.worker_concurrency)]
    worker = bench.targets.start(f"one-endpoint-worker-{number}", [*script("worker"), *concurrency])
    try:
        drain = hooks.drain(worker, expected)
    finally:
        worker.stop()
    bench.say(f"  {NAME}: drained at {drain.rate:,.0f} events/s, p99 {drain.p99_ms:,.0f} ms from emit")
    row = summarize(NAME, size, "events/s", [drain], cores=bench.cores, process="worker")
    row.p50_ms, row.p99_ms = round(drain.p50_ms, 1), round(drain.p99_ms, 1)
    row.details.update(backlog_events=len(expected), endpoints=1)
    return row
