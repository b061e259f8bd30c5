"""Horizontal scale (issue 7, item 5; docs/architecture.md): two `bin/serve --no-worker` processes and
two `bin/worker` processes, started at once against one database and one Redis
(RATE_LIMIT_STORAGE: the tests' own Redis).

- Shared rate limits: a free account's 60 calls a minute, alternating between the two servers, count down one
  budget (X-RateLimit-Remaining 59 … 0); the 61st and 62nd, on either server, are `429 rate_limited`.
- Exactly-once state changes: 100 concurrent `jobs.publish` of 20 drafts (five each, spread over both servers)
  give exactly 20 × 200 (one per draft) and 80 × `409 invalid_transition`; the database holds 20 published jobs
  (and the maintained total agrees) and 20 `job.published` events, one per job.
- Delivery through both workers: the account's endpoint for `job.published` on a local receiver gets every
  event, correctly signed (20 distinct idempotency keys, duplicates allowed), and every delivery `succeeded`.

Run with `-s` for the figures.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.conftest import Databases
from tests.drills.common import Fleet, service_env
from tests.receiver import Receiver, Reply
from tests.support import Admin, eventually, ok, settings_for

DRAFTS = 20
COPIES = 5  # concurrent publishes of each draft
FREE_PER_MINUTE = 60
DELIVERED_WITHIN = 60.0  # seconds, generous for a busy machine
SETTINGS = {"WEBHOOK_RETRY_WAITS": "0,0.5,1,2,5", "WEBHOOK_TIMEOUT": "5"}


def test_two_servers_and_two_workers_share_limits_and_change_state_once(
    databases: Databases, redis_url: str, tmp_path: Path
) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    free = admin.user("employer", plan="free")
    employer = admin.user("employer")

    env = service_env(url, tmp_path, RATE_LIMIT_STORAGE=redis_url, **SETTINGS)
    with Receiver() as receiver, Fleet(env, tmp_path) as fleet:
        hook = receiver.hook(default=Reply(200))
        hook.know(admin.webhook(employer, hook.url, ["job.published"])["secret"])
        began = time.monotonic()
        processes = [
            fleet.serve("api-1", wait=False),
            fleet.serve("api-2", wait=False),
            fleet.worker("worker-1", wait=False),
            fleet.worker("worker-2", wait=False),
        ]
        fleet.ready(*processes)
        started_in = time.monotonic() - began
        servers = [p.url for p in processes[:2]]

        # shared rate limits
        remaining: list[int] = []
        for i in range(FREE_PER_MINUTE):
            response = httpx.get(f"{servers[i % 2]}/v1/jobs.list", headers=free.auth, timeout=30)
            assert response.status_code == 200, response.text
            remaining.append(int(response.headers["X-RateLimit-Remaining"]))
        over = [httpx.get(f"{server}/v1/jobs.list", headers=free.auth, timeout=30) for server in servers]

        # exactly-once state changes
        limits = httpx.Limits(max_connections=DRAFTS * COPIES)
        clients = [httpx.Client(base_url=server, timeout=60, limits=limits) for server in servers]
        try:
            draft = {"company": "Scale Co", "location": "Loopback"}
            jobs = [
                ok(clients[n % 2].post("/v1/jobs.create", json={**draft, "title": f"Scale {n}"}, headers=employer.auth))
                for n in range(DRAFTS)
            ]
            # copy c of draft d goes to server (d + c) % 2: every draft is published through both at once
            calls = [(jobs[n % DRAFTS]["id"], (n % DRAFTS + n // DRAFTS) % 2) for n in range(DRAFTS * COPIES)]
            start = threading.Barrier(len(calls), timeout=60)

            def publish(call: tuple[str, int]) -> tuple[str, int, int, str | None]:
                job_id, server = call
                start.wait()
                response = clients[server].post("/v1/jobs.publish", json={"id": job_id}, headers=employer.auth)
                code = response.json()["error"]["code"] if response.status_code != 200 else None
                return job_id, server, response.status_code, code

            publish_began = time.monotonic()
            with ThreadPoolExecutor(len(calls)) as pool:
                answers = list(pool.map(publish, calls))
            publish_took = time.monotonic() - publish_began
        finally:
            for client in clients:
                client.close()

        deliveries_began = time.monotonic()
        unsettled = "SELECT count(*) AS n FROM webhook_deliveries WHERE status <> 'succeeded'"

        def all_delivered() -> bool:
            keys = {r.envelope["idempotency_key"] for r in hook.received()}
            if admin.sql(unsettled)[0]["n"] == 0 and len(keys) >= DRAFTS:
                return True
            fleet.check_running()
            return False

        eventually(all_delivered, lambda: f"{admin.sql(unsettled)[0]['n']} deliveries not succeeded", DELIVERED_WITHIN)
        delivered_in = time.monotonic() - deliveries_began
        workers = admin.sql("SELECT count(*) AS n FROM procrastinate_workers")[0]["n"]
        fleet.check_running()

    received = hook.received()
    events = [
        json.loads(bytes(row["body"])) for row in admin.sql("SELECT body FROM events WHERE kind = 'job.published'")
    ]
    published = admin.sql("SELECT id::text AS id FROM jobs WHERE status = 'published'")
    total = [row["total"] for row in admin.sql("SELECT total FROM job_totals WHERE status = 'published'")]
    deliveries = admin.sql("SELECT status, attempts FROM webhook_deliveries")
    statuses = collections.Counter((status, code) for _, _, status, code in answers)
    maintained = total[0] if len(total) == 1 else total
    outcomes = dict(collections.Counter(d["status"] for d in deliveries))
    by_server = collections.Counter((f"api-{server + 1}", status) for _, server, status, _ in answers)
    print(
        f"\nhorizontal scale drill: 2 bin/serve --no-worker + 2 bin/worker ready {started_in:.1f} s after a "
        f"simultaneous start\n"
        f"  free account across both servers: X-RateLimit-Remaining {remaining[:3]} … {remaining[-3:]}, then "
        f"{[r.status_code for r in over]}\n"
        f"  {len(answers)} concurrent jobs.publish of {DRAFTS} drafts in {publish_took:.2f} s: {dict(statuses)}; "
        f"by server {dict(sorted(by_server.items()))}\n"
        f"  {len(events)} job.published events, {len(published)} jobs published (maintained total {maintained}); "
        f"{len(received)} receipts ({len({r.envelope['idempotency_key'] for r in received})} distinct) "
        f"{delivered_in:.2f} s after the publishes; deliveries {outcomes}"
        f" in {sum(d['attempts'] for d in deliveries)} attempts; {workers} queue workers registered"
    )

    assert remaining == list(range(FREE_PER_MINUTE - 1, -1, -1)), "one budget, counted down by both servers"
    for response in over:
        assert response.status_code == 429 and response.json()["error"]["code"] == "rate_limited", response.text
        assert int(response.headers["Retry-After"]) >= 1

    assert statuses == {(200, None): DRAFTS, (409, "invalid_transition"): DRAFTS * (COPIES - 1)}, statuses
    winners = collections.Counter(job_id for job_id, _, status, _ in answers if status == 200)
    assert set(winners) == {job["id"] for job in jobs} and set(winners.values()) == {1}, "one 200 per draft"
    assert {row["id"] for row in published} == set(winners)
    assert total == [DRAFTS], "the maintained total of published jobs agrees"
    assert sorted(e["data"]["job_id"] for e in events) == sorted(winners), "one event per change"
    assert all(e["data"]["status"] == "published" for e in events)

    # Each bin/worker registers twice: procrastinate's worker for the periodic work, and its deliverer.
    assert workers == 2 * 2, "both workers are on the queue"
    assert {r.envelope["idempotency_key"] for r in received} == {e["idempotency_key"] for e in events}
    assert all(r.valid and r.status == 200 for r in received)
    assert len(deliveries) == DRAFTS and {d["status"] for d in deliveries} == {"succeeded"}
