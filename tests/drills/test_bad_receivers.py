"""Drill: receivers that hang or reset connections do not delay another endpoint's deliveries (issue 7, item 3).

One account has three endpoints for `job.updated`: one on a receiver that never answers (each attempt hits
WEBHOOK_TIMEOUT=2), one on a receiver that resets every connection without answering, one that answers 200 at
once. 50 events are emitted in a burst, one transaction each, and one `bin/worker` (its default concurrency)
delivers them with WEBHOOK_RETRY_WAITS=0,1,1. For reference, the same worker first delivers 50 events of
another account that has only a good endpoint. The drill runs once per module; its two tests read it:

- the bad deliveries are recorded as they happened: timeouts of about WEBHOOK_TIMEOUT for the hanging one,
  connection errors for the resetting one, and retries (attempt 2 and later) for both; the good endpoint's
  deliveries all succeed at the first attempt, correctly signed;
- the good receiver gets all 50 within GOOD_WITHIN seconds of the last emission (a good endpoint alone takes
  a fraction of a second), before any hanging delivery has used up its attempts.

Run with `-s` for the figures.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from procedures.jobs.shapes import JobEvent
from rpc.ops import admin as ops
from tests.conftest import Databases
from tests.drills.common import Fleet, Resetter, median, percentile, service_env
from tests.receiver import Hook, Received, Receiver, Reply
from tests.support import Admin, emitter_for, eventually, settings_for

EVENTS = 50
TIMEOUT = 2.0
WAITS = "0,1,1"
GOOD_WITHIN = 5.0  # seconds from the last emission to the good receiver's 50th request
RETRIES_WITHIN = 60.0  # seconds for both bad endpoints to show a retry
WORKER_SETTINGS = {"WEBHOOK_TIMEOUT": f"{TIMEOUT:g}", "WEBHOOK_RETRY_WAITS": WAITS}

_DELIVERIES = """
SELECT d.endpoint_id::text AS endpoint, d.status, d.attempts, d.event_id::text AS event_id
FROM webhook_deliveries AS d
"""
_ATTEMPTS = """
SELECT d.endpoint_id::text AS endpoint, a.number, a.status_code, a.error, a.duration_ms
FROM webhook_attempts AS a JOIN webhook_deliveries AS d ON d.id = a.delivery_id
"""


def emit(database_url: str, account_id: str, count: int) -> dict[str, float]:
    """`count` `job.updated` events of the account, one transaction each: event id → when it committed."""
    settings = settings_for(database_url, **WORKER_SETTINGS)

    async def go() -> dict[str, float]:
        emitter = emitter_for(settings)
        committed: dict[str, float] = {}
        async with await ops.connect(database_url) as conn:
            for number in range(count):
                async with conn.transaction():
                    data = JobEvent(job_id=str(uuid.uuid4()), title=f"Job {number}", status="published")
                    event_id = await emitter.emit(conn, "job.updated", data, [account_id])
                committed[str(event_id)] = time.monotonic()
        return committed

    return asyncio.run(go())


def by_endpoint(rows: list[dict[str, Any]], endpoint: str) -> list[dict[str, Any]]:
    return [row for row in rows if row["endpoint"] == endpoint]


@dataclass
class Drill:
    endpoints: dict[str, str]  # name → endpoint id
    committed: dict[str, float]  # event id → when it committed
    received: list[Received]  # what the good receiver got
    good_done: float  # seconds from the last emission to the good receiver's last request
    alone_done: float  # the same, for the reference account with only a good endpoint
    at_good_done: list[dict[str, Any]]  # every delivery, when the good receiver had them all
    deliveries: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    hanging_arrivals: int
    reset_connections: int
    waited: float  # seconds from the last emission to the end of the drill
    worker_exit: int

    def of(self, rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
        return by_endpoint(rows, self.endpoints[name])


def good_alone(admin: Admin, receiver: Receiver, url: str) -> float:
    """Reference: 50 events of an account whose only endpoint answers 200, through the same worker."""
    owner = admin.user("employer")
    hook: Hook = receiver.hook(default=Reply(200))
    admin.webhook(owner, hook.url, ["job.updated"])
    committed = emit(url, owner.account_id, EVENTS)
    received = hook.wait_for(EVENTS, timeout=60)
    return max(r.arrived for r in received) - max(committed.values())


@pytest.fixture(scope="module")
def drill(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Drill:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    owner = admin.user("employer")
    tmp_path = tmp_path_factory.mktemp("bad-receivers")

    with (
        Receiver() as receiver,
        Resetter() as resetter,
        Fleet(service_env(url, tmp_path, **WORKER_SETTINGS), tmp_path) as fleet,
    ):
        worker = fleet.worker("worker")
        alone_done = good_alone(admin, receiver, url)

        good = receiver.hook(default=Reply(200))
        hanging = receiver.hook(default=Reply(hang=True))
        endpoints: dict[str, str] = {}
        for name, hook_url in (("hanging", hanging.url), ("resetting", resetter.url), ("good", good.url)):
            made = admin.webhook(owner, hook_url, ["job.updated"])
            endpoints[name] = made["id"]
            if name == "good":
                good.know(made["secret"])

        committed = emit(url, owner.account_id, EVENTS)
        last_emit = max(committed.values())
        received = good.wait_for(EVENTS, timeout=GOOD_WITHIN + 60)  # generous: the figure is printed either way
        good_done = max(r.arrived for r in received) - last_emit
        at_good_done = admin.sql(_DELIVERIES)

        def both_retried() -> bool:
            retried = {row["endpoint"] for row in admin.sql(_ATTEMPTS) if row["number"] >= 2}
            if {endpoints["hanging"], endpoints["resetting"]} <= retried:
                return True
            fleet.check_running()
            return False

        eventually(both_retried, "a retry of both bad endpoints", RETRIES_WITHIN)
        attempts = admin.sql(_ATTEMPTS)
        waited = time.monotonic() - last_emit
        deliveries = admin.sql(_DELIVERIES)
        worker_exit = fleet.stop(worker)

    result = Drill(
        endpoints=endpoints,
        committed=committed,
        received=received,
        good_done=good_done,
        alone_done=alone_done,
        at_good_done=at_good_done,
        deliveries=deliveries,
        attempts=attempts,
        hanging_arrivals=hanging.arrivals,
        reset_connections=resetter.connections,
        waited=waited,
        worker_exit=worker_exit,
    )
    report(result)
    return result


def report(drill: Drill) -> None:
    latencies = [r.arrived - drill.committed[r.envelope["idempotency_key"]] for r in drill.received]
    hang, reset = drill.of(drill.attempts, "hanging"), drill.of(drill.attempts, "resetting")
    untried = {
        name: sum(1 for row in drill.of(drill.at_good_done, name) if row["attempts"] == 0)
        for name in ("hanging", "resetting")
    }
    failed = sum(1 for row in drill.at_good_done if row["status"] == "failed")
    print(
        f"\nbad receivers drill: {EVENTS} events × 3 endpoints, WEBHOOK_TIMEOUT={TIMEOUT:g}, "
        f"WEBHOOK_RETRY_WAITS={WAITS}, one bin/worker (default concurrency)\n"
        f"  reference, a good endpoint alone: all {EVENTS} {drill.alone_done:.2f} s after the last emission\n"
        f"  beside a hanging and a resetting endpoint: all {EVENTS} {drill.good_done:.2f} s after the last emission; "
        f"emit→receipt p50 {median(latencies):.2f} s, p99 {percentile(latencies, 0.99):.2f} s\n"
        f"  at that moment: {failed} deliveries failed for good, {untried['hanging']} hanging and "
        f"{untried['resetting']} resetting deliveries not yet attempted\n"
        f"  {drill.waited:.1f} s after the last emission: hanging endpoint {len(hang)} attempts recorded "
        f"(up to attempt {max((a['number'] for a in hang), default=0)}, "
        f"{min((a['duration_ms'] for a in hang), default=0)}–{max((a['duration_ms'] for a in hang), default=0)} ms"
        f" each, {drill.hanging_arrivals} requests arrived); resetting endpoint {len(reset)} attempts recorded "
        f"(up to attempt {max((a['number'] for a in reset), default=0)}, {drill.reset_connections} connections, "
        f"errors {sorted({(a['error'] or '').split(':')[0] for a in reset})})"
    )


def test_bad_deliveries_are_recorded_as_timeouts_resets_and_retries(drill: Drill) -> None:
    assert drill.worker_exit == 0
    assert {r.envelope["idempotency_key"] for r in drill.received} == set(drill.committed), "every event arrived"
    assert all(r.valid for r in drill.received), "signed with the good endpoint's secret"
    good = drill.of(drill.deliveries, "good")
    assert len(good) == EVENTS and {(r["status"], r["attempts"]) for r in good} == {("succeeded", 1)}
    assert {(a["number"], a["status_code"]) for a in drill.of(drill.attempts, "good")} == {(1, 200)}

    hang = drill.of(drill.attempts, "hanging")
    assert hang and all(a["status_code"] is None for a in hang)
    assert {a["error"] for a in hang} == {f"timed out after {TIMEOUT:g} s"}
    assert all(TIMEOUT * 1000 - 100 <= a["duration_ms"] <= TIMEOUT * 1000 + 2000 for a in hang)
    reset = drill.of(drill.attempts, "resetting")
    assert reset and all(a["status_code"] is None and a["error"] for a in reset)
    assert not any(a["error"].startswith("timed out") for a in reset), "a reset is an error at once"
    for name in ("hanging", "resetting"):
        rows = drill.of(drill.deliveries, name)
        assert len(rows) == EVENTS and not any(r["status"] == "succeeded" for r in rows)
        assert all(r["attempts"] <= len(WAITS.split(",")) for r in rows)
        assert max(a["number"] for a in drill.of(drill.attempts, name)) >= 2, "retried"


def test_a_good_receiver_is_not_delayed_by_bad_ones(drill: Drill) -> None:
    exhausted = [row for row in drill.of(drill.at_good_done, "hanging") if row["status"] == "failed"]
    assert not exhausted, "the good receiver had all its events before a hanging delivery used up its attempts"
    assert drill.good_done <= GOOD_WITHIN, (
        f"the good receiver's last event came {drill.good_done:.1f} s after the last emission "
        f"({drill.alone_done:.1f} s without the bad endpoints): its deliveries waited behind the bad ones'"
    )
