"""Drill: a minute of mixed reads and writes at a fixed rate, 0 5xx, the server's memory flat (issue 7, item 3).

One `bin/serve` process (webhook delivery in-process, as on a bare machine) takes 40 requests/s for 60 s,
spread over four employer accounts (600 calls a minute each, inside the enterprise plan's 1,000): `jobs.list`
(page 1, and with a `q` filter), `jobs.get`, `profile.me`, `jobs.create`, `jobs.publish` of a draft created
earlier, `jobs.update`. Each account has a webhook endpoint for `job.published` and `job.updated` on a local
receiver, so delivery runs beside the requests. The process's RSS is sampled twice a second. Then:

- no 5xx and no transport error (and, since every call is valid, every answer is 200);
- memory flat: the median RSS of the last 20 s is at most RSS_MARGIN above that of seconds 10–20 (after the
  warm-up: pools filled, statements prepared, caches populated);
- no webhook delivery failed.

Run with `-s` for the figures (RSS samples, latencies, CPU per request).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
import psutil

from tests.conftest import Databases
from tests.drills.common import Answer, Fleet, Load, Request, median, percentile, service_env, tally
from tests.receiver import Receiver, Reply
from tests.support import Admin, User, settings_for

RATE = 40.0
DURATION = 60.0
ACCOUNTS = 4
SAMPLE_EVERY = 0.5  # seconds
WARM = (10.0, 20.0)  # seconds of the load whose RSS is the reference
LAST = 20.0  # seconds at the end compared with it
RSS_MARGIN = 15 * 2**20  # bytes
MIB = 2**20


def test_a_minute_of_mixed_load_keeps_memory_flat(databases: Databases, tmp_path: Path) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    employers = [admin.user("employer") for _ in range(ACCOUNTS)]
    run = uuid.uuid4().hex[:8]
    drafts: dict[str, list[str]] = {user.user_id: [] for user in employers}
    samples: list[tuple[float, int]] = []  # seconds into the load, RSS bytes

    with Receiver() as receiver, Fleet(service_env(url, tmp_path), tmp_path) as fleet:
        hook = receiver.hook(default=Reply(200))
        for user in employers:
            admin.webhook(user, hook.url, ["job.published", "job.updated"])
        api = fleet.serve("api", worker=True)
        server = psutil.Process(api.pid)
        own_jobs = {user.user_id: seed_job(api.url, user, run) for user in employers}

        def plan(i: int) -> Request:
            user = employers[i % ACCOUNTS]
            slot = (i // ACCOUNTS) % 10
            auth, title = user.auth, f"load-{run}-{i}"
            if slot <= 2:
                return Request("jobs.list", "GET", "/v1/jobs.list", auth, params={"per_page": 20})
            if slot == 3:
                return Request("jobs.list q", "GET", "/v1/jobs.list", auth, params={"q": "load", "per_page": 10})
            if slot == 4:
                return Request("jobs.get", "GET", "/v1/jobs.get", auth, params={"id": own_jobs[user.user_id]})
            if slot == 5:
                return Request("profile.me", "GET", "/v1/profile.me", auth)
            if slot in (6, 7):
                body = {"title": title, "company": "Load Co", "location": "Loopback", "description": "x" * 500}
                return Request("jobs.create", "POST", "/v1/jobs.create", auth, json=body, title=user.user_id)
            if slot == 8 and drafts[user.user_id]:
                draft = drafts[user.user_id].pop(0)
                return Request("jobs.publish", "POST", "/v1/jobs.publish", auth, json={"id": draft})
            body = {"id": own_jobs[user.user_id], "title": title}
            return Request("jobs.update", "POST", "/v1/jobs.update", auth, json=body)

        def answered(answer: Answer) -> None:
            if answer.request.kind == "jobs.create" and answer.status == 200 and answer.request.title:
                drafts[answer.request.title].append(answer.result["id"])

        async def sample(load: Load) -> None:
            while time.monotonic() < load.at(DURATION):
                samples.append((time.monotonic() - load.started, server.memory_info().rss))
                await asyncio.sleep(SAMPLE_EVERY)

        cpu_before = server.cpu_times()
        load = Load(api.url, RATE, DURATION, plan, answered)
        answers = load.run(sample)
        cpu_after = server.cpu_times()
        fleet.check_running()
        delivery = admin.sql("SELECT status, count(*) AS n FROM webhook_deliveries GROUP BY status ORDER BY status")
        log = fleet.tail(api, lines=100_000)

    warm = [rss for at, rss in samples if WARM[0] <= at < WARM[1]]
    last = [rss for at, rss in samples if at >= DURATION - LAST]
    growth = median(last) - median(warm)
    cpu = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    per_kind: dict[str, list[float]] = {}
    for answer in answers:
        per_kind.setdefault(answer.request.kind, []).append(answer.latency * 1000)
    latency = ", ".join(
        f"{kind} {len(values)}× p50 {percentile(values, 0.5):.0f}/p99 {percentile(values, 0.99):.0f} ms"
        for kind, values in sorted(per_kind.items())
    )
    per_second = {int(at): rss for at, rss in samples}
    slowest = sorted(answers, key=lambda a: a.latency)[-5:]
    print(
        f"\nsteady load drill: {len(answers)} requests at {RATE:.0f}/s for {DURATION:.0f} s over {ACCOUNTS} "
        f"accounts (load generator at most {load.late * 1000:.0f} ms behind schedule): {tally(answers)}\n"
        f"  latency: {latency}\n"
        f"  slowest: {', '.join(f'{a.latency * 1000:.0f} ms at {a.sent - load.started:.1f} s' for a in slowest)}\n"
        f"  server CPU {cpu:.1f} s = {cpu / len(answers) * 1000:.1f} ms per request; webhook deliveries "
        f"{ {row['status']: row['n'] for row in delivery} }, {len(hook.received())} received\n"
        f"  RSS MiB by second: {' '.join(f'{rss / MIB:.0f}' for _, rss in sorted(per_second.items()))}\n"
        f"  RSS median s {WARM[0]:.0f}–{WARM[1]:.0f}: {median(warm) / MIB:.1f} MiB; last {LAST:.0f} s: "
        f"{median(last) / MIB:.1f} MiB; growth {growth / MIB:+.1f} MiB (allowed {RSS_MARGIN / MIB:.0f})"
    )

    assert not [a for a in answers if a.status is None or a.status >= 500], tally(answers)
    assert "unhandled error" not in log, log[-5000:]
    assert set(tally(answers)) == {"200"}, tally(answers)
    assert len(warm) >= 10 and len(last) >= 20, "too few RSS samples"
    assert growth <= RSS_MARGIN, f"the server's RSS grew {growth / MIB:.1f} MiB under a steady load"
    assert not any(row["status"] == "failed" for row in delivery), delivery


def seed_job(base_url: str, user: User, run: str) -> str:
    """A published job of the user's account, for `jobs.get` and `jobs.update`; its id."""
    with httpx.Client(base_url=base_url, timeout=30, headers=user.auth) as client:
        body = {"title": f"load-{run}-seed", "company": "Load Co", "location": "Loopback"}
        job = client.post("/v1/jobs.create", json=body).json()["result"]
        assert client.post("/v1/jobs.publish", json={"id": job["id"]}).status_code == 200
    return str(job["id"])
