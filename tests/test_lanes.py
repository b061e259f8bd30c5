"""Per-endpoint lanes (CONTRACT.md §7: one endpoint's deliveries flow as fast as it answers, at most
WEBHOOK_PER_ENDPOINT in flight to it): the lanes' rules, and one worker draining one endpoint's backlog without
sending a single job back to the queue."""

from __future__ import annotations

import asyncio
import time

from rpc.db.pool import Pool, open_pool
from rpc.outbox.deliverer import Deliverer
from rpc.outbox.lanes import Lanes
from rpc.outbox.sender import Sender
from tests.conftest import Databases
from tests.support import Admin, settings_for
from tests.test_worker_crash import Receiver, emit, subscribe

BACKLOG = 300


def _job(number: int) -> dict[str, int]:
    return {"job_id": number}


def test_an_endpoint_gets_its_limit_in_flight_and_the_rest_in_claim_order() -> None:
    lanes = Lanes(limit=2, hold_for=10)
    admitted = [lanes.admit("a", _job(n), now=0) for n in range(5)]
    assert admitted == [True, True, False, False, False] and lanes.held == 3
    assert lanes.admit("b", _job(9), now=0), "another endpoint is not held behind the busy one"
    assert lanes.finished("a", now=0) == _job(2), "the next of the endpoint starts the moment one ends"
    assert lanes.finished("a", now=0) == _job(3)
    assert lanes.held == 1


def test_the_jobs_of_an_endpoint_that_stopped_moving_go_back_to_the_queue() -> None:
    """A hanging endpoint cannot keep claimed jobs (and the worker's room to claim others) for long; one that
    answers keeps its lane."""
    lanes = Lanes(limit=1, hold_for=1.0)
    for number in (1, 2, 3):
        lanes.admit("hanging", _job(number), now=0)
    lanes.admit("moving", _job(4), now=0)
    lanes.admit("moving", _job(5), now=0)
    lanes.admit("moving", _job(6), now=0)
    assert lanes.finished("moving", now=0.9) == _job(5)
    assert lanes.expired(now=0.9) == []
    assert lanes.expired(now=1.0) == [_job(2), _job(3)] and lanes.held == 1, "the moving lane keeps its job"
    assert lanes.drain() == [_job(6)] and lanes.held == 0
    assert lanes.finished("hanging", now=2) is None


def test_one_worker_drains_one_endpoints_backlog_without_putting_any_back(databases: Databases) -> None:
    """300 events to one endpoint that answers at once, one worker at 32 attempts with 4 to an endpoint: every
    job claimed is attempted in its endpoint's turn; none goes back to the queue for a second (the old trickle
    of four a second), and each delivery takes one attempt."""
    url = databases.copy()
    settings = settings_for(url, WEBHOOK_PER_ENDPOINT="4", WEBHOOK_RETRY_WAITS="0,0.5,1,1,1")
    admin = Admin(url, settings)
    with Receiver() as receiver:
        emit(url, settings, subscribe(admin, receiver), BACKLOG)

        async def drain() -> tuple[int, float]:
            async with open_pool(settings, url) as pool, Sender(None) as sender:
                deliverer = Deliverer(settings, pool, sender, concurrency=32)
                stopping = asyncio.Event()
                began = time.monotonic()
                running = asyncio.create_task(deliverer.run(stopping))
                while await _pending(pool):
                    assert not running.done(), "the deliverer stopped"
                    await asyncio.sleep(0.05)
                took = time.monotonic() - began
                stopping.set()
                await running
                return deliverer.released, took

        released, took = asyncio.run(drain())
        keys = set(receiver.keys)
    attempts = admin.sql("SELECT attempts, count(*) AS n FROM webhook_deliveries GROUP BY attempts")
    left = admin.sql("SELECT count(*) AS n FROM procrastinate_jobs WHERE queue_name = 'webhook_deliveries'")
    print(f"\none endpoint, one worker: {BACKLOG} deliveries in {took:.2f} s = {BACKLOG / took:.0f} events/s")
    assert released == 0, "no claimed job was sent back to the queue"
    assert attempts == [{"attempts": 1, "n": BACKLOG}] and len(keys) == BACKLOG
    assert left == [{"n": 0}]


async def _pending(pool: Pool) -> int:
    async with pool.connection() as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM webhook_deliveries WHERE status <> 'succeeded'")
        row = await cursor.fetchone()
    return int(row["n"]) if row else 0
