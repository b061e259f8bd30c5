"""Drills of operations (issue 28): processes started, and killed with SIGKILL, while clients write.

- Starting processes costs no request: while one client writes steadily through one `bin/serve`, `bin/admin`
  commands, a `bin/worker` and a second `bin/serve` are started (and the last two stopped again), three times over;
  every write is answered 200. (Each start once applied schema.sql again, and its DDL deadlocked with the writes.)
- kill -9 of servers and workers during idempotent writes: two `bin/serve --no-worker` and two `bin/worker`,
  one of them killed with SIGKILL and started again every few seconds, while clients create and publish jobs,
  each call with an Idempotency-Key and retried (on a transport error or a 503, on the other server) until
  answered. Then: each job exists once, every `job.published` event reached the receiver, every key replayed
  gives the first answer, and `bin/admin verify-audit` finds the audit chain intact.

Run with `-s` for the figures.
"""

from __future__ import annotations

import asyncio
import collections
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import Databases
from tests.drills.common import ROOT, Fleet, Load, Request, Started, percentile, service_env, tally
from tests.receiver import Receiver, Reply
from tests.support import Admin, User, eventually, settings_for

SETTINGS = {"WORKER_HEARTBEAT": "1", "WEBHOOK_RETRY_WAITS": "0,0.5,1,2,5", "WEBHOOK_TIMEOUT": "5"}
START_ROUNDS = 3
ADMIN_COMMANDS = 4  # bin/admin started at once in each round
ITEMS = 240  # jobs created and published through the kills
CLIENTS = 6
PAUSE = 0.3  # seconds a client waits between its items, so that the writes outlast several kills
KILL_EVERY = 40  # items completed between kills: a server, then a worker, then a server, ...
DELIVERED_WITHIN = 60.0


def _admin_command(env: dict[str, str], cwd: Path, user: User) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(ROOT / "bin" / "admin"), "mint-token", "--email", user.email]
    return subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_starting_processes_during_writes_fails_no_request(databases: Databases, tmp_path: Path) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    employer = admin.user("employer")
    env = service_env(url, tmp_path, **SETTINGS)
    starts: list[str] = []
    with Receiver() as receiver, Fleet(env, tmp_path) as fleet:
        admin.webhook(employer, receiver.hook(default=Reply(200)).url, ["job.published", "job.updated"])
        api = fleet.serve("api")
        fleet.worker("worker")

        seeded = httpx.post(
            f"{api.url}/v1/jobs.create",
            json={"title": "seed", "company": "Starts", "location": "Loopback"},
            headers=employer.auth,
        ).json()["result"]["id"]

        def plan(i: int) -> Request:
            """Keyed writes that emit events, as the drill's: jobs, idempotency keys, events, the queue."""
            auth = {**employer.auth, "Idempotency-Key": f"start-{i}"}
            if i % 2:
                body = {"id": seeded, "title": f"updated-{i}"}
                return Request("jobs.update", "POST", "/v1/jobs.update", auth, json=body, write=True)
            body = {"title": f"start-{i}", "company": "Starts", "location": "Loopback"}
            return Request("jobs.create", "POST", "/v1/jobs.create", auth, json=body, write=True)

        async def start_processes(load: Load) -> None:
            for round_ in range(1, START_ROUNDS + 1):
                commands = [_admin_command(env, tmp_path, employer) for _ in range(ADMIN_COMMANDS)]
                worker = fleet.worker(f"worker-{round_}", wait=False)
                server = fleet.serve(f"api-{round_}", wait=False)
                await asyncio.to_thread(fleet.ready, worker, server)
                for command in commands:
                    _, err = await asyncio.to_thread(command.communicate)
                    assert command.returncode == 0, err.decode()
                await asyncio.to_thread(fleet.stop, worker)
                await asyncio.to_thread(fleet.stop, server)
                starts.append(f"round {round_} done at {time.monotonic() - load.started:.1f} s")

        load = Load(api.url, rate=12.0, duration=36.0, plan=plan)
        answers = load.run(start_processes)
        assert api.process.poll() is None, fleet.tail(api)
    latencies = [1000 * answer.latency for answer in answers]
    print(
        f"\nstarting processes during writes: {len(answers)} keyed jobs.create and jobs.update at 12/s while "
        f"{START_ROUNDS} times "
        f"{ADMIN_COMMANDS} bin/admin, a bin/worker and a bin/serve started: {tally(answers)}; "
        f"p50 {percentile(latencies, 0.5):.0f} ms, p99 {percentile(latencies, 0.99):.0f} ms; {'; '.join(starts)}"
    )
    assert len(starts) == START_ROUNDS, "every round of starts ran during the writes"
    assert tally(answers) == {"200": len(answers)}, [a.error or a.code for a in answers if a.status != 200][:5]


class Writer:
    """Idempotent writes over the live servers, each retried on the other server until it is answered."""

    def __init__(self, servers: list[Started], user: User) -> None:
        self.servers, self.user = servers, user
        self.first: dict[str, tuple[int, Any]] = {}  # key: the answer the client got
        self.retries: collections.Counter[str] = collections.Counter()
        self.completed = 0

    async def call(self, client: httpx.AsyncClient, path: str, body: dict[str, Any], key: str) -> Any:
        headers = {**self.user.auth, "Idempotency-Key": key}
        for attempt in range(200):
            server = self.servers[(hash(key) + attempt) % len(self.servers)]
            try:
                response = await client.post(f"{server.url}{path}", json=body, headers=headers)
            except httpx.TransportError as exc:
                self.retries[type(exc).__name__] += 1
            else:
                if response.status_code < 500:
                    assert response.status_code == 200, response.text
                    self.first[key] = (response.status_code, response.json())
                    return response.json()["result"]
                self.retries[f"{response.status_code} {response.json()['error']['code']}"] += 1
            await asyncio.sleep(0.1)
        raise AssertionError(f"{path} with key {key} was never answered")

    async def item(self, client: httpx.AsyncClient, number: int, run: str) -> None:
        body = {"title": f"kill-{run}-{number}", "company": "Kills", "location": "Loopback"}
        job = await self.call(client, "/v1/jobs.create", body, f"{run}-create-{number}")
        await self.call(client, "/v1/jobs.publish", {"id": job["id"]}, f"{run}-publish-{number}")
        self.completed += 1


def test_kill_9_of_servers_and_workers_during_idempotent_writes(databases: Databases, tmp_path: Path) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    employer = admin.user("employer")
    run = uuid.uuid4().hex[:8]
    env = service_env(url, tmp_path, **SETTINGS)
    kills: list[str] = []
    with Receiver() as receiver, Fleet(env, tmp_path) as fleet:
        hook = receiver.hook(default=Reply(200))
        admin.webhook(employer, hook.url, ["job.published"])
        servers = [fleet.serve("api-0", wait=False), fleet.serve("api-1", wait=False)]
        workers = [fleet.worker("worker-0", wait=False), fleet.worker("worker-1", wait=False)]
        fleet.ready(*servers, *workers)
        writer = Writer(servers, employer)
        done = asyncio.Event()

        async def kill_and_restart() -> None:
            number = 0
            while not done.is_set():
                if writer.completed < (number + 1) * KILL_EVERY:
                    await asyncio.sleep(0.05)
                    continue
                number += 1
                pool, make = (servers, fleet.serve) if number % 2 else (workers, fleet.worker)
                victim = pool[number % 2]
                victim.process.kill()  # SIGKILL: nothing is finished, nothing is handed back
                await asyncio.to_thread(victim.process.wait)
                pool[number % 2] = await asyncio.to_thread(make, f"{victim.name.split('-')[0]}-k{number}")
                kills.append(victim.name)

        async def write_all() -> None:
            numbers = iter(range(ITEMS))

            async def client_loop(client: httpx.AsyncClient) -> None:
                for number in numbers:
                    await writer.item(client, number, run)
                    await asyncio.sleep(PAUSE)

            killing = asyncio.create_task(kill_and_restart())
            async with httpx.AsyncClient(timeout=15) as client:
                await asyncio.gather(*(client_loop(client) for _ in range(CLIENTS)))
            done.set()
            await killing

        began = time.monotonic()
        asyncio.run(write_all())
        wrote_in = time.monotonic() - began
        events = {str(row["id"]) for row in admin.sql("SELECT id FROM events WHERE kind = 'job.published'")}

        def every_event_received() -> bool:
            if events <= {r.envelope["idempotency_key"] for r in hook.received()}:
                return True
            fleet.check_running()
            return False

        eventually(every_event_received, "every event at the receiver", DELIVERED_WITHIN)

        replayed = asyncio.run(_replay(servers[0].url, employer, writer.first))
        verdict = subprocess.run(
            [sys.executable, str(ROOT / "bin" / "admin"), "verify-audit"], env=env, cwd=tmp_path, capture_output=True
        )
    jobs = admin.sql(
        "SELECT title, count(*) AS n FROM jobs WHERE title LIKE %(p)s GROUP BY title", {"p": f"kill-{run}-%"}
    )
    published = admin.sql("SELECT count(*) AS n FROM jobs WHERE status = 'published'")[0]["n"]
    print(
        f"\nkill -9 drill: {ITEMS} jobs created and published by {CLIENTS} clients in {wrote_in:.1f} s through "
        f"{len(kills)} kills ({', '.join(kills)}); retries {dict(writer.retries)}; {len(events)} events, "
        f"{len(hook.received())} receipts; audit: {verdict.stdout.decode().strip()}"
    )
    assert len(kills) >= 2 and writer.retries, "kills landed during the writes, and writes were retried"
    assert len(jobs) == ITEMS and {row["n"] for row in jobs} == {1}, "each job once"
    assert published == ITEMS and len(events) == ITEMS, "one event per publish"
    assert replayed == {key: (status, body, "true") for key, (status, body) in writer.first.items()}
    assert verdict.returncode == 0, verdict.stderr.decode()


async def _replay(base: str, user: User, first: dict[str, tuple[int, Any]]) -> dict[str, tuple[int, Any, str | None]]:
    """Every key sent again, its body unchanged: the answers (status, body, Idempotent-Replayed)."""
    kinds = {"create": "/v1/jobs.create", "publish": "/v1/jobs.publish"}
    answers: dict[str, tuple[int, Any, str | None]] = {}
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for key, (_, body) in first.items():
            kind = key.split("-")[1]
            params = body["result"]
            sent = (
                {"title": params["title"], "company": params["company"], "location": params["location"]}
                if kind == "create"
                else {"id": params["id"]}
            )
            response = await client.post(kinds[kind], json=sent, headers={**user.auth, "Idempotency-Key": key})
            answers[key] = (response.status_code, response.json(), response.headers.get("Idempotent-Replayed"))
    return answers
