"""The crash drill (docs/webhooks.md): delivery is at least once and survives a crash of any process at any moment.

2,000 events for one endpoint; `bin/worker --concurrency 10` delivers them and is killed with SIGKILL twice
while it does, and started again each time; and again with `--concurrency 64` and the endpoint's share raised to
64, so that each kill lands on batches of dozens of claimed jobs and of attempts made but not yet settled.
Every event must reach the receiver (duplicates allowed), every delivery must end `succeeded`, no queue job may
stay `doing`, and a killed attempt must not use up one of the five: the attempt rows of a delivery are numbered
1..attempts, and with a receiver that always answers 200 that is exactly one attempt each. The settlement's guards
against a job held by two workers at once are also taken step by step.

Run with `-s` to see the drill's numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

import pytest

from procedures.jobs.shapes import JobEvent
from rpc.db.pool import open_pool
from rpc.ops import admin as ops
from rpc.outbox.claims import Outcome, Settlement, claim, settle
from rpc.outbox.deliverer import Deliverer
from rpc.outbox.queue import DELIVER_TASK
from rpc.outbox.sender import Sender
from rpc.settings import Settings
from tests.conftest import Databases
from tests.support import TEST_SECRET_KEY, Admin, emitter_for, eventually, settings_for

ROOT = Path(__file__).resolve().parent.parent
EVENTS = 2_000
BATCH = 500  # events per transaction
CONCURRENCY = 10
KILL_AFTER = (300, 900)  # receipts seen before the first and the second SIGKILL
DEADLINE = 90.0  # seconds for the whole drill, from the first start of the worker
WORKER_ENV = {"WORKER_HEARTBEAT": "1", "WEBHOOK_RETRY_WAITS": "0,0.5,1,1,1", "WEBHOOK_TIMEOUT": "5"}


class Receiver:
    """A webhook receiver on 127.0.0.1: answers 200 at once, records the idempotency key of every body and
    counts bodies whose signature does not check."""

    def __init__(self, secret: str | None = None, delay: float = 0.0) -> None:
        self.secret = secret
        self.keys: list[str] = []
        self.bad_signatures = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the worker reuses its connections

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.record(body, self.headers.get("X-Service-Signature", ""))
                if delay:
                    time.sleep(delay)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 256
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a killed worker resets its connections: expected here

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hooks"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def record(self, body: bytes, signature: str) -> None:
        key = json.loads(body)["idempotency_key"]
        expected = hmac.new((self.secret or "").encode(), body, hashlib.sha256).hexdigest()
        with self._lock:
            self.keys.append(key)
            if not hmac.compare_digest(expected, signature):
                self.bad_signatures += 1

    @property
    def seen(self) -> int:
        with self._lock:
            return len(self.keys)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class Workers:
    """`bin/worker` processes of the drill; every one is stopped on exit, whatever happened."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self._env = env
        self._log: IO[bytes] = log_path.open("ab")
        self.log_path = log_path
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, concurrency: int) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "bin" / "worker"), "--concurrency", str(concurrency)],
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.started.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL: no drain, no goodbye; whatever it was doing is left as it was."""
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def stop(self, process: subprocess.Popen[bytes]) -> int:
        """SIGTERM: running attempts are drained, then the worker exits."""
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=30)

    def tail(self, lines: int = 40) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        self._log.close()


def emit(database_url: str, settings: Settings, account_id: str, count: int) -> float:
    """`count` `job.updated` events of the account, BATCH to a transaction, as the procedures emit them;
    the seconds it took."""

    async def go() -> None:
        emitter = emitter_for(settings)
        async with await ops.connect(database_url) as conn:
            for start in range(0, count, BATCH):
                async with conn.transaction():
                    for number in range(start, min(count, start + BATCH)):
                        data = JobEvent(job_id=str(uuid.uuid4()), title=f"Job {number}", status="published")
                        await emitter.emit(conn, "job.updated", data, [account_id])

    started = time.monotonic()
    asyncio.run(go())
    return time.monotonic() - started


def wait_until(condition: Callable[[], bool], deadline: float, what: str, workers: Workers) -> None:
    def met() -> bool:
        if workers.started and workers.started[-1].poll() is not None:
            pytest.fail(f"the worker exited ({workers.started[-1].returncode}) before {what}:\n{workers.tail()}")
        return condition()

    eventually(met, lambda: f"{what}; worker log:\n{workers.tail()}", max(0.0, deadline - time.monotonic()))


def worker_env(database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TEST_DATABASE_URL", "SERVICE_ENV")}
    return {
        **env,
        "DATABASE_URL": database_url,
        "SERVICE_SECRET_KEY": TEST_SECRET_KEY,
        "SERVICE_ENV": "development",  # the receiver is on 127.0.0.1
        **WORKER_ENV,
        **extra,
    }


class Queues:
    """What the database says about deliveries and their queue jobs."""

    def __init__(self, admin: Admin) -> None:
        self._admin = admin

    def _count(self, query: str, params: dict[str, Any] | None = None) -> int:
        return int(self._admin.sql(query, params)[0]["n"])

    def pending(self) -> int:
        """Deliveries not yet succeeded."""
        return self._count("SELECT count(*) AS n FROM webhook_deliveries WHERE status <> 'succeeded'")

    def queued(self) -> int:
        """Delivery jobs not finished: waiting, running, or left running by a killed worker."""
        return self._count(
            "SELECT count(*) AS n FROM procrastinate_jobs WHERE task_name = %(t)s AND status IN ('todo', 'doing')",
            {"t": DELIVER_TASK},
        )

    def doing(self, among: list[int] | None = None) -> list[int]:
        """Delivery jobs marked running (of `among`, if given)."""
        rows = self._admin.sql(
            "SELECT id FROM procrastinate_jobs WHERE task_name = %(t)s AND status = 'doing'"
            " AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[])) ORDER BY id",
            {"t": DELIVER_TASK, "ids": among},
        )
        return [int(row["id"]) for row in rows]


class StallWatch:
    """How long the jobs a killed worker left `doing` stay so (until the stalled-job task requeues them)."""

    def __init__(self, queues: Queues) -> None:
        self._queues = queues
        self._kills: list[tuple[float, list[int]]] = []
        self.recovered_after: list[float | None] = []

    def killed(self, left_doing: list[int]) -> None:
        self._kills.append((time.monotonic(), left_doing))
        self.recovered_after.append(None if left_doing else 0.0)

    def poll(self) -> None:
        for index, (killed_at, jobs) in enumerate(self._kills):
            if self.recovered_after[index] is None and not self._queues.doing(jobs):
                self.recovered_after[index] = time.monotonic() - killed_at


def subscribe(admin: Admin, receiver: Receiver) -> str:
    """A new account with one endpoint (`job.updated`) at the receiver; the account's id."""
    user = admin.user("employer")
    receiver.secret = admin.webhook(user, receiver.url, ["job.updated"])["secret"]
    return user.account_id


@pytest.mark.parametrize(
    ("concurrency", "per_endpoint"),
    [(CONCURRENCY, 4), (64, 64)],
    ids=["default", "batches-of-dozens"],
)
def test_delivery_survives_two_kills_of_the_worker(
    databases: Databases, tmp_path: Path, concurrency: int, per_endpoint: int
) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    queues = Queues(admin)
    watch = StallWatch(queues)
    env = worker_env(url, WEBHOOK_PER_ENDPOINT=str(per_endpoint))

    with Receiver() as receiver, Workers(env, tmp_path / "worker.log") as workers:
        account_id = subscribe(admin, receiver)
        emitted_in = emit(url, settings_for(url, **WORKER_ENV), account_id, EVENTS)
        assert queues.pending() == EVENTS

        started = time.monotonic()
        deadline = started + DEADLINE
        worker = workers.start(concurrency)
        at_kill: list[tuple[int, int, int]] = []  # receipts, deliveries left, jobs left doing
        for threshold in KILL_AFTER:

            def seen_enough(threshold: int = threshold) -> bool:
                seen = receiver.seen >= threshold
                watch.poll()
                return seen

            wait_until(seen_enough, deadline, f"the receiver saw {threshold}", workers)
            workers.kill(worker)
            left_doing = queues.doing()
            watch.killed(left_doing)
            at_kill.append((receiver.seen, queues.pending(), len(left_doing)))
            worker = workers.start(concurrency)
        for seen, left, _ in at_kill:
            assert left > 0, f"a kill came after the last delivery ({seen} receipts): not a drill"

        def all_delivered() -> bool:
            done = queues.pending() == 0 and queues.queued() == 0
            watch.poll()  # after: the requeue that ends the drill is seen too
            return done

        wait_until(all_delivered, deadline, "every delivery succeeded", workers)
        elapsed = time.monotonic() - started
        assert workers.stop(worker) == 0, workers.tail()

        # the idempotency key of an event is its id
        events = {str(row["id"]) for row in admin.sql("SELECT id FROM events WHERE kind = 'job.updated'")}
        keys = list(receiver.keys)
        stuck = admin.sql("SELECT id, task_name FROM procrastinate_jobs WHERE status = 'doing'")
        deliveries = admin.sql(
            """
            SELECT d.id, d.status, d.attempts, count(a.id) AS made, coalesce(min(a.number), 0) AS first,
                   coalesce(max(a.number), 0) AS last, count(DISTINCT a.number) AS numbers,
                   bool_and(coalesce(a.status_code, 0) = 200 OR a.number < d.attempts) AS only_last_succeeded
            FROM webhook_deliveries AS d LEFT JOIN webhook_attempts AS a ON a.delivery_id = d.id
            GROUP BY d.id
            """
        )
        errors = admin.sql("SELECT error, count(*) AS n FROM webhook_attempts WHERE status_code IS NULL GROUP BY 1")

    duplicates = len(keys) - len(set(keys))
    retried = sum(1 for row in deliveries if row["attempts"] > 1)
    kills = "; ".join(
        f"kill {n}: {seen} receipts, {left} deliveries left, {doing} jobs left doing, requeued after "
        + (f"{after:.1f} s" if after is not None else "never")
        for n, ((seen, left, doing), after) in enumerate(zip(at_kill, watch.recovered_after, strict=True), 1)
    )
    print(
        f"\ncrash drill: {EVENTS} events (emitted in {emitted_in:.1f} s); {kills}; "
        f"{len(keys)} receipts ({len(set(keys))} distinct, {duplicates} duplicates); "
        f"{sum(row['made'] for row in deliveries)} attempts recorded ({retried} deliveries needed more than one); "
        f"{elapsed:.1f} s from the first start to all succeeded = {EVENTS / elapsed:.0f} events/s "
        f"with {len(workers.started)} worker processes in turn, --concurrency {concurrency}"
    )

    assert len(events) == EVENTS
    assert set(keys) == events, f"lost: {len(events - set(keys))}, unknown: {len(set(keys) - events)}"
    assert receiver.bad_signatures == 0
    assert stuck == [], "no queue job stays doing"
    assert {row["status"] for row in deliveries} == {"succeeded"}
    for row in deliveries:
        assert row["made"] == row["attempts"] == row["numbers"], row  # one row per attempt counted, none extra
        assert row["first"] == 1 and row["last"] == row["attempts"], row  # numbered 1..attempts, no gaps
        assert row["only_last_succeeded"], row
    assert retried == 0, f"a receiver answering 200 needs one attempt per delivery; failed attempts: {errors}"


BACKLOG = 1_000
SLOW_RECEIVER = 0.1  # seconds per answer: with 4 attempts at a time, at most 40 deliveries/s
RECOVERY_BOUND = 3 * float(WORKER_ENV["WORKER_HEARTBEAT"]) + 5 + 4  # stalled after 3 beats; the task runs every 5 s


def test_a_killed_workers_jobs_are_requeued_while_a_backlog_waits(databases: Databases, tmp_path: Path) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    queues = Queues(admin)
    with Receiver(delay=SLOW_RECEIVER) as receiver, Workers(worker_env(url), tmp_path / "worker.log") as workers:
        account_id = subscribe(admin, receiver)
        emit(url, settings_for(url, **WORKER_ENV), account_id, BACKLOG)
        deadline = time.monotonic() + 60
        worker = workers.start(concurrency=4)
        wait_until(lambda: receiver.seen >= 20, deadline, "the receiver saw 20", workers)
        workers.kill(worker)
        killed_at = time.monotonic()
        left_doing = queues.doing()
        if not left_doing:
            pytest.fail("the kill left no job doing: not a drill")
        workers.start(concurrency=4)
        with contextlib.suppress(AssertionError):  # the bound's figure is asserted below, with its details
            eventually(lambda: not queues.doing(left_doing), "recovery", killed_at + RECOVERY_BOUND - time.monotonic())
        still_doing = queues.doing(left_doing)
        waiting = queues.pending()
    if waiting == 0:
        pytest.fail("the backlog drained before the bound: not a drill")
    assert still_doing == [], (
        f"{len(still_doing)} of the {len(left_doing)} jobs the killed worker left doing are still doing "
        f"{RECOVERY_BOUND:.0f} s after the kill, with {waiting} deliveries waiting"
    )


def attempted(row: dict[str, Any], status_code: int | None, *, retry_in: float | None) -> Outcome:
    """The outcome of the attempt a claimed `row` asked for: `pending` with the next attempt `retry_in` seconds
    away, else `succeeded` (200) or `failed`."""
    now = dt.datetime.now(dt.UTC)
    status = "pending" if retry_in is not None else "succeeded" if status_code == 200 else "failed"
    return Outcome(
        job_id=row["job_id"],
        delivery_id=row["delivery_id"],
        status=status,
        number=row["attempts"] + 1,
        started_at=now,
        duration_ms=1,
        status_code=status_code,
        error=None if status_code else "ConnectionResetError: drill",
        excerpt=None,
        headers={"webhook-id": "drill"},
        next_attempt_at=None if retry_in is None else now + dt.timedelta(seconds=retry_in),
        endpoint_id=row["endpoint_id"],
    )


def test_a_job_claimed_by_two_workers_is_settled_once(databases: Databases) -> None:
    """Worker A claims a batch and is taken for dead: its job is requeued (as the stalled-job retry does) and
    worker B claims it too, while A's attempt still runs. B settles first, a failure: the attempt is recorded and
    the job rescheduled, due at once, and B claims it again for attempt 2. A's late success for attempt 1 then
    records nothing and leaves alone the job B holds (deleting it would strand the delivery without a job if
    attempt 2 failed too); B's attempt 2 finishes the delivery and its job. A late settlement of attempt 1 once
    the job is gone records nothing either."""
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    user = admin.user("employer")
    admin.webhook(user, "http://127.0.0.1:9/hooks", ["job.updated"])
    emit(url, settings_for(url), user.account_id, 1)
    workers = admin.sql("INSERT INTO procrastinate_workers SELECT FROM generate_series(1, 2) RETURNING id")
    a, b = (row["id"] for row in workers)
    now = dt.datetime.now(dt.UTC)

    def jobs() -> list[dict[str, Any]]:
        return admin.sql("SELECT status::text AS status, worker_id FROM procrastinate_jobs")

    async def go() -> list[tuple[int, list[dict[str, Any]], list[dict[str, Any]]]]:
        steps = []
        async with await ops.connect(url) as conn:

            async def step(worker: int, outcome: Outcome) -> None:
                recorded = await settle(conn, worker, Settlement([outcome], [], [], []), now)
                steps.append((worker, recorded, await asyncio.to_thread(jobs)))

            [held_by_a] = await claim(conn, a, 10)
            await conn.execute("UPDATE procrastinate_jobs SET status = 'todo', worker_id = NULL")  # A "stalled"
            [held_by_b] = await claim(conn, b, 10)
            await step(b, attempted(held_by_b, None, retry_in=0))
            [again_by_b] = await claim(conn, b, 10)
            await step(a, attempted(held_by_a, 200, retry_in=None))
            await step(b, attempted(again_by_b, 200, retry_in=None))
            await step(a, attempted(held_by_a, 200, retry_in=None))
        return steps

    [b_fails, a_late, b_succeeds, a_later] = asyncio.run(go())
    assert [row["number"] for row in b_fails[1]] == [1] and b_fails[2] == [{"status": "todo", "worker_id": None}]
    assert a_late[1] == [] and a_late[2] == [{"status": "doing", "worker_id": b}], "B's job is B's to settle"
    assert [row["number"] for row in b_succeeds[1]] == [2] and b_succeeds[2] == []
    assert a_later[1] == [] and a_later[2] == []
    [delivery] = admin.sql("SELECT status, attempts FROM webhook_deliveries")
    assert (delivery["status"], delivery["attempts"]) == ("succeeded", 2)
    numbers = admin.sql("SELECT number, status_code FROM webhook_attempts ORDER BY number")
    assert numbers == [{"number": 1, "status_code": None}, {"number": 2, "status_code": 200}]


def test_a_secret_that_cannot_be_opened_fails_its_attempt_not_the_worker(databases: Databases) -> None:
    """A batch is built from what the claim returned; an endpoint whose sealed secret no longer opens (tampered,
    or sealed under another SERVICE_SECRET_KEY) must cost its own delivery an attempt, recorded with the reason,
    and leave the worker delivering the rest."""
    url = databases.copy()
    settings = settings_for(url, WEBHOOK_RETRY_WAITS="0")
    admin = Admin(url, settings)
    with Receiver() as receiver:
        broken, working = subscribe(admin, receiver), subscribe(admin, receiver)
        admin.sql("UPDATE webhook_endpoints SET secret_sealed = '\\x00'::bytea WHERE account_id = %(a)s", {"a": broken})
        for account_id in (broken, working):
            emit(url, settings, account_id, 1)
        rows = admin.sql(
            "SELECT d.id::text AS id, e.account_id::text AS account FROM webhook_deliveries AS d "
            "JOIN webhook_endpoints AS e ON e.id = d.endpoint_id"
        )

        async def go() -> None:
            async with open_pool(settings, url) as pool, Sender(None) as sender:
                deliverer = Deliverer(settings, pool, sender)
                for row in sorted(rows, key=lambda row: row["account"] != broken):  # the broken one first
                    await deliverer.attempt(row["id"])

        asyncio.run(go())
        seen = receiver.seen
    outcomes = admin.sql(
        "SELECT e.account_id::text AS account, d.status, d.attempts, a.error FROM webhook_deliveries AS d "
        "JOIN webhook_endpoints AS e ON e.id = d.endpoint_id JOIN webhook_attempts AS a ON a.delivery_id = d.id"
    )
    by_account = {row["account"]: row for row in outcomes}
    assert (by_account[broken]["status"], by_account[broken]["attempts"]) == ("failed", 1)
    assert by_account[broken]["error"].startswith("the endpoint's secret cannot be opened")
    assert (by_account[working]["status"], by_account[working]["error"], seen) == ("succeeded", None, 1)
