"""Per-endpoint lanes (docs/webhooks.md: one endpoint's deliveries flow as fast as it answers, at most
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


def test_a_lane_holds_what_its_endpoint_starts_within_hold_for_at_its_pace() -> None:
    """A steady but slow endpoint cannot fill the worker's room: the claim is told that its lane may hold what it
    will start within `hold_for` at the pace it answers (its limit until an attempt has ended), and a fast
    endpoint's lane may hold up to the bound."""
    lanes = Lanes(limit=2, hold_for=1.0, hold_at_most=50)
    assert lanes.room == 4, "an endpoint without a lane: its limit, and as many held"
    assert [lanes.admit("slow", _job(n), now=0) for n in range(4)] == [True, True, False, False]
    assert lanes.rooms() == {"slow": 0} and not lanes.low("slow")
    assert lanes.finished("slow", now=0.5, took=0.5) == _job(2)  # 2 at once, 0.5 s each: 4 a second
    assert lanes.rooms() == {"slow": 3} and lanes.low("slow"), "it may hold the 4 it starts within a second"
    lanes.admit("fast", _job(10), now=0.5)
    lanes.admit("fast", _job(11), now=0.5)
    assert lanes.finished("fast", now=0.501, took=0.001) is None
    assert lanes.rooms()["fast"] == 51, "a fast endpoint may hold up to the bound: it empties the lane as fast"


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


SLOW_BACKLOG = 200
FAST_BACKLOG = 40


def test_a_slow_endpoints_backlog_does_not_hold_a_fast_one_to_its_pace(databases: Databases) -> None:
    """A receiver that answers every 200 ms with a backlog of 200 queued first, and one that answers at once with
    40 queued after: one worker of 10 attempts delivers the fast endpoint's 40 long before the slow one's backlog
    is through (it once filled the worker's room with the slow endpoint's held jobs, and the fast one waited for
    all of them)."""
    url = databases.copy()
    settings = settings_for(url, WEBHOOK_PER_ENDPOINT="4", WEBHOOK_RETRY_WAITS="0,0.5,1,1,1")
    admin = Admin(url, settings)
    with Receiver(delay=0.2) as slow, Receiver() as fast:
        emit(url, settings, subscribe(admin, slow), SLOW_BACKLOG)
        emit(url, settings, subscribe(admin, fast), FAST_BACKLOG)

        async def deliver_the_fast_ones() -> int:
            async with open_pool(settings, url) as pool, Sender(None) as sender:
                deliverer = Deliverer(settings, pool, sender, concurrency=10)
                stopping = asyncio.Event()
                running = asyncio.create_task(deliverer.run(stopping))
                while fast.seen < FAST_BACKLOG:
                    assert not running.done(), "the deliverer stopped"
                    await asyncio.sleep(0.02)
                slow_seen = slow.seen
                stopping.set()
                await running
                return slow_seen

        slow_seen = asyncio.run(deliver_the_fast_ones())
        fast_keys = set(fast.keys)
    print(f"\nthe fast endpoint's {FAST_BACKLOG} were delivered while the slow one received {slow_seen}")
    assert len(fast_keys) == FAST_BACKLOG
    assert slow_seen <= SLOW_BACKLOG // 2, "the fast endpoint did not wait for the slow one's backlog"
    states = admin.sql("SELECT status, attempts, count(*) AS n FROM webhook_deliveries GROUP BY 1, 2 ORDER BY 1, 2")
    queued = admin.sql("SELECT count(*) AS n FROM procrastinate_jobs WHERE queue_name = 'webhook_deliveries'")
    pending = sum(row["n"] for row in states if row["status"] == "pending")
    assert {(row["status"], row["attempts"]) for row in states} <= {("pending", 0), ("succeeded", 1)}, states
    assert queued == [{"n": pending}], "the slow endpoint's rest waits in the queue, no attempt used"
