"""Drill: 200 concurrent `applications.update_status` on one application (issue 7, item 3; docs/decisions.md).

Against a `bin/serve --no-worker` process, 200 threads released at once each ask to move the same `pending`
application to a status drawn from the pipeline and `rejected` (mostly the middle of the pipeline, so that
several moves win before a final status ends the race). The calls queue on the application's row lock, so on
a busy machine the last wait long for a pooled connection: DB_POOL_TIMEOUT is raised to 30 s, since a `503`
from pool pressure would say nothing about the state machine. The state machine must hold:

- every answer is 200 (with the status asked for) or `409 invalid_transition` naming it; nothing else;
- the `application.status_changed` events of the application are as many as the 200s and name the same targets;
- their old → new links form one valid path from `pending` (forward only, `rejected` only from a non-final
  status) that ends in the application's final status, the furthest accepted target (no lost update);
- the history rows, in commit order, are that same path, each by the employer who asked.

Run with `-s` for the figures.
"""

from __future__ import annotations

import collections
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import Databases
from tests.drills.common import Fleet, percentile, service_env
from tests.support import Admin, ok, settings_for

CALLS = 200
PIPELINE = ("pending", "reviewed", "interview_scheduled", "offered", "hired")
TARGETS = (*PIPELINE, "rejected")
# Mostly the middle of the pipeline, so that several moves are accepted before a final status ends the race.
WEIGHTS = (1, 6, 6, 6, 1, 1)
FINAL = {"hired", "rejected", "withdrawn"}
EVENT_KEYS = {"application_id", "job_id", "old_status", "new_status", "updated_by"}


def rank(status: str) -> int:
    """Position along the way: the pipeline's order, with `rejected` after everything."""
    return PIPELINE.index(status) if status in PIPELINE else len(PIPELINE)


def valid_move(old: str, new: str) -> bool:
    if old in FINAL:
        return False
    return new == "rejected" or (new in PIPELINE and rank(new) > rank(old))


def test_concurrent_status_changes_keep_the_state_machine(databases: Databases, tmp_path: Path) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    employer = admin.user("employer")
    candidate = admin.user("candidate")
    seed = random.randrange(2**32)
    chooser = random.Random(seed)
    targets = chooser.choices(TARGETS, WEIGHTS, k=CALLS)

    with Fleet(service_env(url, tmp_path, DB_POOL_TIMEOUT="30"), tmp_path) as fleet:
        api = fleet.serve("api")
        limits = httpx.Limits(max_connections=CALLS, max_keepalive_connections=CALLS)
        with httpx.Client(base_url=api.url, timeout=60, limits=limits) as client:
            draft = {"title": "Drill", "company": "Drill Co", "location": "Loopback"}
            job = ok(client.post("/v1/jobs.create", json=draft, headers=employer.auth))
            ok(client.post("/v1/jobs.publish", json={"id": job["id"]}, headers=employer.auth))
            application = ok(client.post("/v1/applications.create", json={"job_id": job["id"]}, headers=candidate.auth))
            assert application["status"] == "pending"
            start = threading.Barrier(CALLS, timeout=60)

            def move(target: str) -> tuple[str, int, Any, float]:
                start.wait()
                began = time.monotonic()
                body = {"id": application["id"], "status": target}
                response = client.post("/v1/applications.update_status", json=body, headers=employer.auth)
                return target, response.status_code, response.json(), time.monotonic() - began

            began = time.monotonic()
            with ThreadPoolExecutor(CALLS) as pool:
                answers = list(pool.map(move, targets))
            elapsed = time.monotonic() - began
            final = ok(client.get("/v1/applications.get", params={"id": application["id"]}, headers=employer.auth))
        fleet.check_running()

    events = [
        json.loads(bytes(row["body"]))
        for row in admin.sql(
            "SELECT body FROM events WHERE kind = 'application.status_changed'"
            " AND convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'application_id' = %(id)s",
            {"id": application["id"]},
        )
    ]
    history = admin.sql(
        "SELECT from_status, to_status, changed_by::text AS changed_by FROM application_status_history"
        " WHERE application_id = %(id)s ORDER BY id",
        {"id": application["id"]},
    )
    accepted = [(target, body["result"]) for target, status, body, _ in answers if status == 200]
    refused = [(target, body["error"]) for target, status, body, _ in answers if status == 409]
    chain = sorted(((e["data"]["old_status"], e["data"]["new_status"]) for e in events), key=lambda m: rank(m[1]))
    latencies = [seconds * 1000 for *_, seconds in answers]
    print(
        f"\nconcurrent update_status drill (seed {seed}): {CALLS} calls in {elapsed:.2f} s, "
        f"answers {dict(collections.Counter(status for _, status, _, _ in answers))}, "
        f"latency p50 {percentile(latencies, 0.5):.0f} ms, p99 {percentile(latencies, 0.99):.0f} ms\n"
        f"  asked for {dict(collections.Counter(targets))}\n"
        f"  accepted moves {' → '.join(['pending'] + [new for _, new in chain])}; "
        f"{len(events)} events, {len(history)} history rows; final {final['status']}"
    )

    assert len(accepted) + len(refused) == CALLS, collections.Counter(status for _, status, _, _ in answers)
    assert all(result["status"] == target for target, result in accepted)
    for target, error in refused:
        assert error["code"] == "invalid_transition" and error["details"]["to"] == target, error
        assert not valid_move(error["details"]["from"], target), error
    assert accepted, "no move was accepted: not a drill"

    assert len(events) == len(accepted), "one event per accepted change, none for a refused one"
    assert collections.Counter(e["data"]["new_status"] for e in events) == collections.Counter(t for t, _ in accepted)
    for event in events:
        assert set(event["data"]) == EVENT_KEYS, event
        assert event["data"]["job_id"] == job["id"] and event["data"]["updated_by"] == employer.user_id
    previous = "pending"
    for old, new in chain:
        assert old == previous and valid_move(old, new), f"not a path from pending: {chain}"
        previous = new
    assert final["status"] == previous == max((t for t, _ in accepted), key=rank), "no lost update"

    assert [(row["from_status"], row["to_status"]) for row in history] == [(None, "pending"), *chain]
    assert [row["changed_by"] for row in history] == [candidate.user_id] + [employer.user_id] * len(chain)
