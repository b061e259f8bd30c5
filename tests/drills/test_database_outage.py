"""Drill: the database goes away under load, and comes back (issue 7, item 3; docs/decisions.md `503 unavailable`).

A `bin/serve --no-worker` process with DB_POOL_TIMEOUT=1 takes a fixed 50 requests/s for 15 s, half
`jobs.list` reads and half `jobs.create` writes, each write with a title of its own. Five seconds in, the
database refuses new connections and the ones it had are cut (`pg_terminate_backend`); three seconds later it
comes back. Then:

- no answer is anything but 200 or `503 unavailable` (no 500, no transport error), every 503 with Retry-After;
- what was sent after the cut and answered before the return is 503;
- full service within 5 s of the return: every request sent later than that is 200;
- no lost write, no phantom one: the drill's titles in the database are exactly those of the writes answered 200.

Run with `-s` for the figures.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from tests.conftest import Databases
from tests.drills.common import Answer, Fleet, Load, Outage, Request, percentile, service_env, tally
from tests.support import Admin, settings_for

RATE = 50.0  # requests per second
DURATION = 15.0
CUT_AT = 5.0  # seconds into the load
AWAY = 3.0  # seconds without a database
FULL_SERVICE_WITHIN = 5.0  # seconds after the return


def test_database_away_under_load(server_url: str, databases: Databases, tmp_path: Path) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    employer = admin.user("employer")  # enterprise: 1,000 calls a minute, more than the drill makes
    run = uuid.uuid4().hex[:8]
    outage = Outage(server_url, url)
    moments: dict[str, float] = {}

    def plan(i: int) -> Request:
        if i % 2:
            title = f"outage-{run}-{i}"
            body = {"title": title, "company": "Drill Co", "location": "Loopback"}
            return Request("jobs.create", "POST", "/v1/jobs.create", employer.auth, json=body, title=title, write=True)
        return Request("jobs.list", "GET", "/v1/jobs.list", employer.auth, params={"mine": "true", "per_page": 5})

    async def cut(load: Load) -> None:
        await asyncio.sleep(max(0.0, load.at(CUT_AT) - time.monotonic()))
        moments["cutting"] = time.monotonic()
        await asyncio.to_thread(outage.begin)
        moments["cut"] = time.monotonic()
        await asyncio.sleep(AWAY)
        moments["restoring"] = time.monotonic()
        await asyncio.to_thread(outage.end)
        moments["restored"] = time.monotonic()

    with Fleet(service_env(url, tmp_path, DB_POOL_TIMEOUT="1"), tmp_path) as fleet:
        api = fleet.serve("api")
        load = Load(api.url, RATE, DURATION, plan)
        try:
            answers = load.run(cut)
        finally:
            outage.end()
        fleet.check_running()
        log = fleet.tail(api, lines=100_000)

    before = [a for a in answers if a.done < moments["cutting"]]
    away = [a for a in answers if a.sent >= moments["cut"] and a.done <= moments["restoring"]]
    after = [a for a in answers if a.sent >= moments["restored"]]
    not_ok_after = [a for a in after if a.status != 200]
    recovered_in = max((a.sent - moments["restored"] for a in not_ok_after), default=0.0)
    titles = {
        row["title"] for row in admin.sql("SELECT title FROM jobs WHERE title LIKE %(p)s", {"p": f"outage-{run}-%"})
    }
    written = {a.request.title for a in answers if a.request.write and a.status == 200}
    refused = {a.request.title for a in answers if a.request.write and a.status == 503}

    def figures(part: list[Answer]) -> str:
        latencies = [a.latency * 1000 for a in part]
        return f"{tally(part)} p50 {percentile(latencies, 0.5):.0f} ms, p99 {percentile(latencies, 0.99):.0f} ms"

    print(
        f"\ndatabase outage drill: {len(answers)} requests at {RATE:.0f}/s for {DURATION:.0f} s "
        f"(load generator at most {load.late * 1000:.0f} ms behind schedule); cut at {CUT_AT:.0f} s "
        f"({outage.terminated} backends terminated, the cut took {moments['cut'] - moments['cutting']:.2f} s), "
        f"away {moments['restoring'] - moments['cut']:.1f} s\n"
        f"  all: {figures(answers)}\n  before the cut: {figures(before)}\n"
        f"  sent after the cut, answered before the return: {figures(away)}\n"
        f"  sent after the return: {figures(after)}; last non-200 sent {recovered_in:.2f} s after the return\n"
        f"  writes: {len(written)} answered 200, {len(refused)} answered 503, {len(titles)} in the database"
    )

    assert set(tally(answers)) <= {"200", "503 unavailable"}, tally(answers)
    assert "unhandled error" not in log, log[-5000:]
    for answer in answers:
        if answer.status == 503:
            assert answer.retry_after is not None and int(answer.retry_after) >= 1, answer
    assert before and {a.status for a in before} == {200}, "the service was healthy before the cut"
    assert away, "nothing was sent while the database was away: not a drill"
    assert {a.status for a in away} == {503}, tally(away)
    assert recovered_in <= FULL_SERVICE_WITHIN, f"service not full until {recovered_in:.1f} s after the return"
    assert any(a.sent >= moments["restored"] + FULL_SERVICE_WITHIN for a in after), "the load ended too soon"
    assert written <= titles, f"lost writes (answered 200, not in the database): {sorted(written - titles)[:5]}"
    assert not refused & titles, f"writes answered 503 but committed: {sorted(refused & titles)[:5]}"
    assert titles == written, f"unexplained rows: {sorted(titles - written)[:5]}"
