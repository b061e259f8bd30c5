"""`bin/bench`: the benchmarks of docs/benchmarks.md, every figure measured beside a reference in the same run.

It makes a private database (`hire_bench_<random>`) on the PostgreSQL server of TEST_DATABASE_URL or
DATABASE_URL (else 127.0.0.1:5432), seeds it with COPY, starts `bin/serve --no-worker` and the bare Starlette
ceiling (`bench.ceiling`), one uvicorn process each, and drives them with `wrk -t1 -c32` interleaved
(ceiling, service, ceiling, service, ...) over rounds. Then one `bin/worker` drains a backlog of webhook
events into a loopback receiver, and payment notifications are sent when the billing provider exists.

Rate limits stay on and count in the server's memory (`RATE_LIMIT_STORAGE=memory://`): every request
rotates among the API keys (or session tokens) of many enterprise accounts, so that their combined budget
(accounts × 1,000/minute) is far above what one process can serve. Every process started here is stopped
and the database dropped at the end, also on Ctrl-C or SIGTERM. Everything listens on loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import datetime as dt
import hashlib
import hmac
import math
import os
import platform
import random
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import msgspec
import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench import mixes, one_endpoint, search_index, sync
from bench.churn import Churn
from bench.delivery import emit_events
from procedures.vocabulary import VOCABULARY
from rpc.app import prepare_database
from rpc.core.types import Connection
from rpc.core.vocabulary import Vocabulary
from rpc.ops import admin as ops
from rpc.ops.cli import SERVERS, WORKER_CONCURRENCY
from rpc.outbox.emit import build_emitter
from rpc.outbox.endpoints import Webhooks
from rpc.outbox.queue import DELIVER_TASK, DELIVERY_QUEUE
from rpc.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
LOCAL_SERVER = "postgresql://127.0.0.1:5432/postgres"
HOST = "127.0.0.1"
SCOPES = ("read:jobs", "write:jobs", "read:applications", "write:applications", "read:profile")
PLAN = "enterprise"
TOKEN_SECONDS = 6 * 3600
QUERY = "python"
MIX_LINES = 20_000  # request lines of a Zipf mix (each names its own target)
# Request lines of a never-seen mix, each target made at random and sent once: more than any run sends.
NEVER_SEEN_LINES = {True: 30_000, False: 150_000}
CHURN = 20  # jobs published (and as many closed) a second during the churn scenario
WRITE_TARGET = "interview_scheduled"
HOOK_EVENTS = ("application.status_changed",)
DUPLICATE_SHARE = 0.3
WRK_TIMEOUT = "10s"
READY_SECONDS = 300.0  # a service at a million jobs builds its search index first
STOP_SECONDS = 15.0

# Settings of the service that the bench sets itself; anything else in the environment (DB_POOL_*) passes on.
_OWN_SETTINGS = (
    "DATABASE_URL",
    "TEST_DATABASE_URL",
    "SERVICE_",
    "PUBLIC_URL",
    "DATA_DIR",
    "RATE_LIMIT_",
    "WEBHOOK_",
    "WORKER_",
    "AUTH_",
    "PAYTR_",
    "FORWARDED_",
    "SIGNIN_",
)

LEVELS = ("Junior", "Senior", "Staff", "Lead", "Principal", "")
FIELDS = (
    "Python", "Go", "Java", "TypeScript", "Rust", "Data", "Cloud", "Frontend",
    "Backend", "Mobile", "Security", "Machine Learning", "Platform", "Site Reliability", "QA", "Embedded",
)  # fmt: skip
ROLES = ("Engineer", "Developer", "Analyst", "Architect", "Manager", "Scientist", "Consultant", "Designer")
COMPANIES = (
    "Anatolia Software", "Bosphorus Labs", "Galata Payments", "Kapadokya Tech", "Marmara Data", "Ege Dijital",
    "Northwind Traders", "Globex", "Initech", "Umbrella Health", "Hooli", "Pied Piper", "Vandelay Imports",
    "Cyberdyne Systems", "Tyrell Robotics", "Aperture Science", "Wayne Logistics", "Stark Industries",
    "Oceanic Airlines", "Monarch Solutions", "Acme Analytics", "Soylent Foods", "Wonka Confectionery",
    "Black Mesa Energy", "Gringotts Finance", "Blue Sun Media", "Massive Dynamic", "Dunder Mifflin",
)  # fmt: skip
LOCATIONS = (
    "Istanbul", "Ankara", "Izmir", "Bursa", "Antalya", "Berlin", "Munich", "London", "Dublin", "Amsterdam",
    "Paris", "Madrid", "Barcelona", "Lisbon", "Warsaw", "Prague", "Vienna", "Zurich", "Stockholm", "Copenhagen",
    "New York", "Toronto", "Remote", "Remote (EU)", "Remote (Turkey)", "İstanbul", "İzmir", "Eskişehir",
    "Muğla", "Çanakkale", "München", "Zürich", "Kraków",
)  # fmt: skip
# One job in ten is advertised in Turkish: accented titles for a search that must ignore the marks.
TURKISH_TITLES = (
    "Kıdemli Yazılım Mühendisi", "Yazılım Geliştirici", "Veri Analisti", "Ürün Yöneticisi", "Satış Danışmanı",
    "Müşteri İlişkileri Uzmanı", "Grafik Tasarımcı", "Öğretmen", "Muhasebe Uzmanı", "Backend Geliştirici",
)  # fmt: skip
EMPLOYMENT_TYPES = ("full_time", "part_time", "contract", "internship", "temporary", r"\N")


class BenchError(Exception):
    """The benchmark cannot go on; the message says why."""


# ---------------------------------------------------------------------------------------------------------
# Configuration and progress
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """How much to seed and how long to measure."""

    quick: bool
    seconds: int  # one wrk run
    warmup: int
    rounds: int
    sizes: tuple[int, ...]
    connections: int
    accounts: int  # enterprise accounts whose keys and tokens the requests rotate among
    candidates: int
    applications: int
    webhook_events: int  # the backlog one worker drains, per round
    worker_concurrency: int  # bin/worker --concurrency: attempts in flight
    webhook_rate: float  # events/s emitted for the latency figures (less if the worker drained slower)
    paced_seconds: int  # how long they are emitted at that rate
    payments: int
    only: str | None = None  # one scenario alone (`--only`): the feed at every size, or webhook delivery
    server: str = "uvicorn"  # bin/serve --server: the HTTP server under the service (the ceiling stays uvicorn)

    @property
    def only_webhooks(self) -> bool:
        """Seed the accounts and their endpoints, measure webhook delivery, nothing else."""
        return self.only == WEBHOOKS


QUICK = Config(
    quick=True,
    seconds=2,
    warmup=1,
    rounds=1,
    sizes=(10_000,),
    connections=32,
    accounts=100,
    candidates=1_000,
    applications=10_000,
    webhook_events=1_000,
    worker_concurrency=WORKER_CONCURRENCY,
    webhook_rate=1_000.0,
    paced_seconds=2,
    payments=3_000,
)
FULL = Config(
    quick=False,
    seconds=10,
    warmup=2,
    rounds=3,
    sizes=(10_000, 1_000_000),
    connections=32,
    accounts=1_000,
    candidates=5_000,
    applications=150_000,
    webhook_events=5_000,
    worker_concurrency=WORKER_CONCURRENCY,
    webhook_rate=1_000.0,
    paced_seconds=10,
    payments=40_000,
)


class Progress:
    """Progress lines on stderr, with the time since the start."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        sys.stderr.write(f"[{time.monotonic() - self.started:6.1f}s] {message}\n")
        sys.stderr.flush()


# ---------------------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------------------


class Child:
    """A process this run started, its output in a log file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.log = logs / f"{name}.log"
        with self.log.open("wb") as out:
            # A session of its own: Ctrl-C reaches only the bench, which then stops this process itself.
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and scripts, no shell
                list(argv),
                env=env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 20) -> str:
        text = self.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        stop_all([self])


def stop_all(children: Sequence[Child]) -> None:
    """SIGTERM to every one still running, then wait for them together; SIGKILL whoever is late."""
    running = [child.process for child in children if child.process.poll() is None]
    for process in running:
        process.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for process in running:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def script(name: str) -> list[str]:
    """How to run `bin/<name>`: the script of this checkout, else its entry point in rpc.ops.cli."""
    path = ROOT / "bin" / name
    if path.exists():
        return [sys.executable, str(path)]
    return [sys.executable, "-c", f"from rpc.ops.cli import {name}; {name}()"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def wait_ready(child: Child, url: str, deadline_seconds: float = READY_SECONDS) -> None:
    """Until `url` answers 200; fail at once if the process exits."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if not child.alive():
            raise BenchError(f"{child.name} exited with {child.process.returncode}:\n{child.tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise BenchError(f"{child.name} did not answer {url} within {deadline_seconds:g} s:\n{child.tail()}")


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Ctrl-C and SIGTERM ignored for the duration: the clean-up they asked for runs to its end (bounded)."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


# ---------------------------------------------------------------------------------------------------------
# The private database
# ---------------------------------------------------------------------------------------------------------


def server_dsn() -> str:
    """The PostgreSQL server to make the private database on."""
    return os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL") or LOCAL_SERVER


@contextlib.contextmanager
def private_database(server: str) -> Iterator[str]:
    """A new, empty database on `server`, dropped (connections and all) at the end."""
    name = f"hire_bench_{secrets.token_hex(6)}"
    with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(server, dbname=name)
    finally:
        with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def service_env(database_url: str, port: int, data_dir: Path) -> dict[str, str]:
    """The environment of the service and worker processes (and the settings the bench mints tokens with)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(_OWN_SETTINGS)}
    env.update(
        DATABASE_URL=database_url,
        SERVICE_SECRET_KEY=secrets.token_urlsafe(32),
        SERVICE_ENV="development",
        PUBLIC_URL=f"http://{HOST}:{port}",
        DATA_DIR=str(data_dir),
        RATE_LIMIT_STORAGE="memory://",
        PAYTR_MERCHANT_ID="100000",
        PAYTR_MERCHANT_KEY=secrets.token_hex(8),
        PAYTR_MERCHANT_SALT=secrets.token_hex(8),
        # The bench plays PayTR from one address: the receiver still counts every notification against it, with
        # a budget the size of the provider's traffic being measured rather than the default 600 a minute.
        PAYMENT_NOTIFICATION_LIMIT_PER_ADDRESS="1000000/minute",
    )
    return env


# ---------------------------------------------------------------------------------------------------------
# Seeding (COPY, with triggers off; the published total set afterwards)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Employers:
    """The enterprise accounts, each with one API key, one session token and one webhook endpoint."""

    accounts: list[str]
    keys: list[str]
    tokens: list[str]

    def key_of(self) -> dict[str, str]:
        return dict(zip(self.accounts, self.keys, strict=True))


@dataclass(frozen=True, slots=True)
class Write:
    """One application to move to `interview_scheduled`, with the API key of its job's account."""

    key: str
    application_id: str


@dataclass(frozen=True, slots=True)
class Seeded:
    employers: Employers
    writes: list[Write]
    payments: list[tuple[str, int]]  # (merchant_oid, amount) of pending payments


@contextlib.asynccontextmanager
async def replica(conn: Connection) -> AsyncIterator[None]:
    """Triggers (foreign-key checks, the published-jobs counter) off for a bulk load on this connection."""
    await conn.execute("SET session_replication_role = replica")
    try:
        yield
    finally:
        await conn.execute("RESET session_replication_role")


async def copy_lines(conn: Connection, statement: str, chunks: Iterator[str]) -> None:
    async with conn.cursor() as cursor, cursor.copy(statement) as copy:
        for chunk in chunks:
            await copy.write(chunk)


def chunked(lines: Iterator[str], size: int = 20_000) -> Iterator[str]:
    """COPY text in chunks of `size` lines."""
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= size:
            yield "".join(batch)
            batch = []
    if batch:
        yield "".join(batch)


def stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(epoch))


def employer_email(number: int) -> str:
    return f"bench-employer-{number}@example.com"


async def seed_employers(
    conn: Connection, settings: Settings, vocabulary: Vocabulary, count: int, hook_url: str
) -> Employers:
    """One employer through bin/admin's operations, the others copied; then a key, token and endpoint each."""
    first = await ops.create_user(
        conn, email=employer_email(0), password=secrets.token_urlsafe(16), role="employer", account_name="Bench 0"
    )
    await ops.set_plan(conn, vocabulary, email=employer_email(0), plan=PLAN)
    others = [str(uuid.uuid4()) for _ in range(count - 1)]
    async with replica(conn):
        accounts = (f"{account}\tBench {n}\t{PLAN}\n" for n, account in enumerate(others, 1))
        await copy_lines(conn, "COPY accounts (id, name, plan) FROM STDIN", chunked(accounts))
        users = (f"{account}\temployer\t{employer_email(n)}\n" for n, account in enumerate(others, 1))
        await copy_lines(conn, "COPY users (account_id, role, email) FROM STDIN", chunked(users))
    webhooks = Webhooks(settings, build_emitter(settings, vocabulary.event_kinds))
    keys, tokens = [], []
    for number in range(count):
        email = employer_email(number)
        key = await ops.create_api_key(
            conn, settings, vocabulary, email=email, name="bench", scopes=SCOPES, mode="test"
        )
        token = await ops.mint_token(conn, settings, email=email, expires_in=TOKEN_SECONDS)
        await ops.create_webhook(conn, webhooks, email=email, url=hook_url, events=HOOK_EVENTS)
        keys.append(str(key["key"]))
        tokens.append(str(token["access_token"]))
    return Employers(accounts=[str(first["account_id"]), *others], keys=keys, tokens=tokens)


_COPY_JOBS = """COPY jobs (id, account_id, title, company, location, description, employment_type, status,
created_at, updated_at, published_at, closed_at) FROM STDIN"""
_RECOUNT = """
INSERT INTO job_totals (status, total) SELECT 'published', count(*) FROM jobs WHERE status = 'published'
ON CONFLICT (status) DO UPDATE SET total = excluded.total, version = job_totals.version + 1
"""
# COPY under `replica` fires no trigger: the search document is made here, as the trigger would make it.
_SEARCH_DOCUMENTS = """
UPDATE jobs SET search_doc = job_document(title, company, location, description) WHERE search_doc IS NULL
"""
_SECONDARY_INDEXES = """
SELECT c.relname AS name, pg_get_indexdef(c.oid) AS definition
FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
WHERE i.indrelid = 'jobs'::regclass AND NOT EXISTS (SELECT FROM pg_constraint WHERE conindid = i.indexrelid)
"""


def job_lines(
    rng: random.Random, count: int, accounts: Sequence[str], published: list[tuple[str, str]] | None
) -> Iterator[str]:
    """COPY lines of `count` jobs over two years: 90 % published, 6 % closed, 4 % drafts; `published`
    collects (id, account) of the published ones when given."""
    now = time.time()
    for _ in range(count):
        job_id, account = str(uuid.uuid4()), rng.choice(accounts)
        title = f"{rng.choice(LEVELS)} {rng.choice(FIELDS)} {rng.choice(ROLES)}".strip()
        if rng.random() < 0.1:
            title = rng.choice(TURKISH_TITLES)
        company, location = rng.choice(COMPANIES), rng.choice(LOCATIONS)
        created = now - rng.uniform(60, 730 * 86_400)
        roll = rng.random()
        status = "published" if roll < 0.90 else "closed" if roll < 0.96 else "draft"
        published_at = stamp(created + 3_600) if status != "draft" else r"\N"
        closed_at = stamp(created + 86_400) if status == "closed" else r"\N"
        description = f"{title} at {company} in {location}: build and run what our customers rely on every day."
        yield (
            f"{job_id}\t{account}\t{title}\t{company}\t{location}\t{description}\t{rng.choice(EMPLOYMENT_TYPES)}\t"
            f"{status}\t{stamp(created)}\t{stamp(created)}\t{published_at}\t{closed_at}\n"
        )
        if published is not None and status == "published":
            published.append((job_id, account))


async def load_jobs(
    conn: Connection, rng: random.Random, count: int, accounts: Sequence[str], *, collect: bool, rebuild: bool
) -> list[tuple[str, str]]:
    """COPY `count` jobs (with `rebuild`, the secondary indexes dropped first and built again after), set the
    published total to the true count, analyse; (id, account) of the new published jobs when `collect`."""
    published: list[tuple[str, str]] | None = [] if collect else None
    async with replica(conn):
        indexes = await drop_secondary_indexes(conn) if rebuild else []
        await copy_lines(conn, _COPY_JOBS, chunked(job_lines(rng, count, accounts, published)))
        await conn.execute(_SEARCH_DOCUMENTS)
        await conn.execute("SET maintenance_work_mem = '512MB'")
        for definition in indexes:
            await conn.execute(definition)  # pg_get_indexdef's own text, as the schema made it
        await conn.execute(_RECOUNT)
    await conn.execute("ANALYZE jobs")
    return published or []


async def drop_secondary_indexes(conn: Connection) -> list[str]:
    """Drop the indexes of `jobs` that back no constraint; their definitions, to build them again."""
    cursor = await conn.execute(_SECONDARY_INDEXES)
    rows = await cursor.fetchall()
    for row in rows:
        await conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(row["name"])))
    return [str(row["definition"]) for row in rows]


async def seed_candidates(conn: Connection, count: int) -> list[tuple[str, str]]:
    """`count` candidates, each in an account of their own: (user id, account id)."""
    people = [(str(uuid.uuid4()), str(uuid.uuid4())) for _ in range(count)]
    async with replica(conn):
        accounts = (f"{account}\tCandidate {n}\n" for n, (_, account) in enumerate(people))
        await copy_lines(conn, "COPY accounts (id, name) FROM STDIN", chunked(accounts))
        users = (
            f"{user}\t{account}\tcandidate\tbench-candidate-{n}@example.com\tCandidate {n}\n"
            for n, (user, account) in enumerate(people)
        )
        await copy_lines(conn, "COPY users (id, account_id, role, email, display_name) FROM STDIN", chunked(users))
    return people


async def seed_applications(
    conn: Connection,
    count: int,
    jobs: Sequence[tuple[str, str]],
    candidates: Sequence[tuple[str, str]],
    key_of: dict[str, str],
) -> list[Write]:
    """`count` applications in `reviewed`, by distinct candidates per job (candidate n, job n + round)."""
    if count > len(jobs) * len(candidates):
        raise BenchError("not enough published jobs and candidates for the applications asked for")
    writes: list[Write] = []

    def lines() -> Iterator[str]:
        created = stamp(time.time() - 86_400)
        for n in range(count):
            user, account = candidates[n % len(candidates)]
            job, job_account = jobs[(n % len(candidates) + n // len(candidates)) % len(jobs)]
            application = str(uuid.uuid4())
            writes.append(Write(key=key_of[job_account], application_id=application))
            yield f"{application}\t{job}\t{user}\t{account}\treviewed\t{created}\t{created}\n"

    statement = """COPY applications (id, job_id, candidate_id, candidate_account_id, status, created_at, updated_at)
    FROM STDIN"""
    async with replica(conn):
        await copy_lines(conn, statement, chunked(lines()))
    await conn.execute("ANALYZE applications")
    return writes


_COPY_PAYMENTS = """COPY payments (account_id, subscription_id, provider, merchant_oid, amount, currency, status)
FROM STDIN"""


async def seed_payments(conn: Connection, count: int) -> list[tuple[str, int]]:
    """`count` pending payments of `pro` subscriptions, each account its own: (merchant_oid, amount)."""
    rows = [(str(uuid.uuid4()), str(uuid.uuid4()), secrets.token_hex(12)) for _ in range(count)]
    amount = VOCABULARY.plans["pro"].price
    async with replica(conn):
        accounts = (f"{account}\tPayer {n}\n" for n, (account, _, _) in enumerate(rows))
        await copy_lines(conn, "COPY accounts (id, name) FROM STDIN", chunked(accounts))
        subscriptions = (f"{sub}\t{account}\tpro\tpending\n" for account, sub, _ in rows)
        await copy_lines(conn, "COPY subscriptions (id, account_id, plan, status) FROM STDIN", chunked(subscriptions))
        payments = (f"{account}\t{sub}\tpaytr\t{oid}\t{amount}\tTRY\tpending\n" for account, sub, oid in rows)
        await copy_lines(conn, _COPY_PAYMENTS, chunked(payments))
    return [(oid, amount) for _, _, oid in rows]


async def seed(url: str, settings: Settings, config: Config, hook_url: str, say: Progress) -> Seeded:
    """The schema, the employers, jobs of the first size, candidates, applications and payments."""
    rng = random.Random(7)  # noqa: S311 - reproducible data, not secrets
    vocabulary = VOCABULARY
    await prepare_database(settings, url)
    async with await ops.connect(url) as conn:
        say(f"seeding {config.accounts} enterprise accounts (an API key, a session token and a webhook each)")
        employers = await seed_employers(conn, settings, vocabulary, config.accounts, hook_url)
        if config.only_webhooks:
            return Seeded(employers=employers, writes=[], payments=[])
        say(f"seeding {config.sizes[0]:,} jobs, {config.applications:,} applications")
        jobs = await load_jobs(conn, rng, config.sizes[0], employers.accounts, collect=True, rebuild=False)
        candidates = await seed_candidates(conn, config.candidates)
        writes = await seed_applications(conn, config.applications, jobs, candidates, employers.key_of())
        oids = await seed_payments(conn, config.payments)
        await conn.execute("ANALYZE")
    return Seeded(employers=employers, writes=writes, payments=oids)


async def grow_jobs(url: str, total: int, accounts: Sequence[str]) -> None:
    """Add jobs up to `total` (indexes dropped for the load and built again)."""
    rng = random.Random(11)  # noqa: S311 - reproducible data, not secrets
    async with await ops.connect(url) as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM jobs")
        row = await cursor.fetchone()
        present = int(row["n"]) if row else 0
        await load_jobs(conn, rng, total - present, accounts, collect=False, rebuild=True)
        await conn.execute("VACUUM ANALYZE jobs")


# ---------------------------------------------------------------------------------------------------------
# The load generator
# ---------------------------------------------------------------------------------------------------------

LUA = r"""
-- bin/bench: rotates through pre-formatted requests read from a file, one a line (method, target,
-- Authorization, Content-Type, body; tab-separated), from line `first` for at most `limit` lines;
-- prints the summary as one JSON line.
local prepared = {}
local count = 0
local index = 0

function init(args)
  local path, first, limit = args[1], tonumber(args[2]), tonumber(args[3])
  local number = 0
  for line in io.lines(path) do
    if count >= limit then break end
    if number >= first then
      local method, target, authorization, content_type, body =
        line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
      local headers = {}
      if authorization ~= "" then headers["Authorization"] = authorization end
      if content_type ~= "" then headers["Content-Type"] = content_type end
      count = count + 1
      prepared[count] = wrk.format(method, target, headers, body ~= "" and body or nil)
    end
    number = number + 1
  end
  if count == 0 then error("no requests in " .. path .. " from line " .. first) end
end

function request()
  index = index % count + 1
  return prepared[index]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"status_errors":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"timeouts":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


class WrkSummary(msgspec.Struct, frozen=True):
    """What the script's `done` prints: counts, and latency percentiles in microseconds."""

    requests: int
    duration_us: int
    status_errors: int  # answers with a status above 399
    connect_errors: int
    read_errors: int
    write_errors: int
    timeouts: int
    p50_us: int
    p99_us: int

    @property
    def ok(self) -> int:
        return self.requests - self.status_errors

    @property
    def errors(self) -> int:
        return self.status_errors + self.connect_errors + self.read_errors + self.write_errors + self.timeouts


@dataclass(frozen=True, slots=True)
class RequestFile:
    """Requests for the wrk script, one a line."""

    path: Path
    count: int

    @classmethod
    def write(cls, path: Path, lines: Sequence[tuple[str, str, str, str, str]]) -> RequestFile:
        path.write_text("".join("\t".join(fields) + "\n" for fields in lines))
        return cls(path, len(lines))


def ensure_wrk(say: Progress) -> str:
    """The wrk binary; installed from the Debian package when missing (as root)."""
    found = shutil.which("wrk")
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise BenchError("wrk is not installed: install the Debian package `wrk` (apt-get install wrk)")
    say("installing wrk (apt-get install -y wrk)")
    if not _apt(apt, "install", "-y", "wrk"):
        _apt(apt, "update")
        _apt(apt, "install", "-y", "wrk")
    found = shutil.which("wrk")
    if found is None:
        raise BenchError("could not install wrk with apt-get; install the Debian package `wrk`")
    return found


def _apt(apt: str, *args: str) -> bool:
    done = subprocess.run(  # noqa: S603 - apt-get with fixed arguments
        [apt, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False
    )
    return done.returncode == 0


class Wrk:
    """`wrk -t1 -cN -dS --latency` with the rotating script."""

    def __init__(self, binary: str, work: Path, connections: int) -> None:
        self._binary = binary
        self._script = work / "rotate.lua"
        self._script.write_text(LUA)
        self.connections = connections

    def run(self, url: str, requests: RequestFile, seconds: int, first: int = 0) -> WrkSummary:
        argv = [
            self._binary, "-t1", f"-c{self.connections}", f"-d{seconds}s", "--latency", "--timeout", WRK_TIMEOUT,
            "-s", str(self._script), url, "--", str(requests.path), str(first), str(requests.count - first),
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120, check=False)  # noqa: S603
        for line in done.stdout.splitlines():
            if line.startswith("BENCH "):
                return msgspec.json.decode(line.removeprefix("BENCH "), type=WrkSummary)
        raise BenchError(f"wrk printed no summary (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")

    def version(self) -> str:
        done = subprocess.run([self._binary, "-v"], capture_output=True, text=True, timeout=10, check=False)  # noqa: S603
        return (done.stdout or done.stderr).split("\n", 1)[0].split(" Copyright", 1)[0].strip()


# ---------------------------------------------------------------------------------------------------------
# CPU accounting
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """Cumulative CPU seconds at one moment."""

    wall: float
    process: float  # the measured process (service, ceiling or worker)
    backends: dict[int, float] | None  # the private database's backends, by pid; None when not visible here
    children: float  # reaped children of the bench: wrk
    machine: float  # busy time of every core


@dataclass(frozen=True, slots=True)
class Usage:
    """CPU seconds spent between two samples."""

    seconds: float
    process: float
    database: float | None
    load_generator: float
    machine: float

    @classmethod
    def between(cls, before: Sample, after: Sample) -> Usage:
        database = None
        if before.backends is not None and after.backends is not None:
            database = sum(cpu - before.backends.get(pid, 0.0) for pid, cpu in after.backends.items())
        return cls(
            seconds=after.wall - before.wall,
            process=after.process - before.process,
            database=database,
            load_generator=after.children - before.children,
            machine=after.machine - before.machine,
        )

    def percent(self) -> dict[str, float]:
        """Each consumer's share of one core; `others` is what the rest of the machine used."""
        shares = {"server": self.process, "load_generator": self.load_generator, "database": self.database or 0.0}
        pct = {name: round(100 * value / self.seconds, 1) for name, value in shares.items()}
        machine = 100 * self.machine / self.seconds
        pct["machine"] = round(machine, 1)
        pct["others"] = round(max(0.0, machine - sum(100 * value / self.seconds for value in shares.values())), 1)
        return pct


def process_cpu(pid: int) -> float:
    """CPU seconds of the process and its live descendants (granian serves from worker processes)."""
    try:
        process = psutil.Process(pid)
        family = [process, *process.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0
    total = 0.0
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            times = member.cpu_times()
            total += times.user + times.system
    return total


def _is_postgres(pid: int) -> bool:
    try:
        return "postgres" in psutil.Process(pid).name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def machine_busy() -> float:
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


class Meter:
    """Samples CPU time; finds the database's backends through pg_stat_activity on its own connection."""

    _BACKENDS = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"

    def __init__(self, database_url: str) -> None:
        self._conn = psycopg.connect(database_url, autocommit=True)

    def close(self) -> None:
        self._conn.close()

    def query(self, statement: str) -> list[tuple[Any, ...]]:
        return self._conn.execute(statement).fetchall()

    def sample(self, pid: int) -> Sample:
        return Sample(
            wall=time.monotonic(),
            process=process_cpu(pid),
            backends=self._backends(),
            children=self._children(),
            machine=machine_busy(),
        )

    def _backends(self) -> dict[int, float] | None:
        pids = [int(row[0]) for row in self._conn.execute(self._BACKENDS).fetchall()]
        visible = {pid: process_cpu(pid) for pid in pids if _is_postgres(pid)}
        return visible if visible or not pids else None  # another host or pid namespace: not measurable

    @staticmethod
    def _children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One measured run: answers that counted, errors, throughput, latency and CPU."""

    ok: int
    errors: int
    rate: float
    p50_ms: float | None
    p99_ms: float | None
    usage: Usage

    @classmethod
    def of(cls, summary: WrkSummary, usage: Usage) -> Run:
        return cls(
            ok=summary.ok,
            errors=summary.errors,
            rate=summary.ok / (summary.duration_us / 1e6),
            p50_ms=summary.p50_us / 1000,
            p99_ms=summary.p99_us / 1000,
            usage=usage,
        )

    def ms_per(self, seconds: float | None) -> float | None:
        return None if seconds is None or self.ok == 0 else 1000 * seconds / self.ok


class Row(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One scenario at one size, as printed and as written to `--json`."""

    name: str
    jobs: int
    unit: str
    req_s: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    rounds: int
    ceiling_req_s: float | None = None
    ratio_to_ceiling: float | None = None
    server_cpu_ms_per_req: float | None = None
    db_cpu_ms_per_req: float | None = None
    load_generator_cpu_ms_per_req: float | None = None
    cpu_pct: dict[str, float] = msgspec.field(default_factory=dict)
    bound_by: str = ""
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class Report(msgspec.Struct, kw_only=True):
    machine: dict[str, Any]
    scenarios: list[Row]
    notes: list[str]


def median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def bound_by(pct: dict[str, float], cores: int, process_name: str = "server") -> str:
    """The likeliest limit: a single-threaded process near a full core, else the machine, else waiting."""
    process, generator, database = pct["server"], pct["load_generator"], pct["database"]
    if process >= 85 and process >= generator:
        return f"{process_name} CPU ({process:.0f}% of a core)"
    if generator >= 85:
        return f"load generator CPU ({generator:.0f}%)"
    if pct["machine"] >= 90 * cores:
        return f"machine CPU ({pct['machine']:.0f}%/{cores * 100}, others {pct['others']:.0f}%)"
    if database >= max(process, 50):
        return f"database CPU ({database:.0f}%)"
    return f"waits ({process_name} {process:.0f}%, db {database:.0f}%)"


def summarize(
    name: str,
    jobs: int,
    unit: str,
    runs: Sequence[Run],
    ceilings: Sequence[Run] = (),
    cores: int = 1,
    process: str = "server",
) -> Row:
    """Medians over the rounds; the ratio to the ceiling is the median of each round's own ratio."""
    pct_keys = ("server", "load_generator", "database", "machine", "others")
    pct = {key: median([run.usage.percent()[key] for run in runs]) or 0.0 for key in pct_keys}
    row = Row(
        name=name,
        jobs=jobs,
        unit=unit,
        req_s=round(median([run.rate for run in runs]) or 0.0, 1),
        p50_ms=rounded(median([run.p50_ms for run in runs]), 2),
        p99_ms=rounded(median([run.p99_ms for run in runs]), 2),
        errors=sum(run.errors for run in runs),
        rounds=len(runs),
        server_cpu_ms_per_req=rounded(median([run.ms_per(run.usage.process) for run in runs]), 3),
        db_cpu_ms_per_req=rounded(median([run.ms_per(run.usage.database) for run in runs]), 3),
        load_generator_cpu_ms_per_req=rounded(median([run.ms_per(run.usage.load_generator) for run in runs]), 3),
        cpu_pct=pct,
        bound_by=bound_by(pct, cores, process),
    )
    if ceilings:
        row.ceiling_req_s = round(median([run.rate for run in ceilings]) or 0.0, 1)
        ratios = [run.rate / top.rate for run, top in zip(runs, ceilings, strict=True) if top.rate]
        row.ratio_to_ceiling = rounded(median(ratios), 4)
        ceiling_cpu = median([top.ms_per(top.usage.process) for top in ceilings])
        row.details["ceiling_server_cpu_ms_per_req"] = rounded(ceiling_cpu, 3)
    return row


# ---------------------------------------------------------------------------------------------------------
# The webhook receiver
# ---------------------------------------------------------------------------------------------------------

_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


class Receiver:
    """A webhook receiver on a loopback port, in a thread: answers 200 at once and notes when each delivery
    (`X-Service-Delivery`) first arrived. It does not check signatures: the tests do that."""

    def __init__(self) -> None:
        self.port = 0
        self._arrivals: dict[str, float] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/hook"

    def __enter__(self) -> Receiver:
        self._thread.start()
        if not self._ready.wait(10):
            raise BenchError("the webhook receiver did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def arrivals(self) -> dict[str, float]:
        """Wall-clock arrival time of every delivery so far."""
        with self._lock:
            return dict(self._arrivals)

    async def _main(self) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._serve, HOST, 0)
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        async with server:
            await self._stopping.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = dict(
                    (name.strip().lower(), value.strip())
                    for name, _, value in (line.partition(":") for line in head.decode("latin-1").split("\r\n")[1:])
                )
                await reader.readexactly(int(headers.get("content-length") or 0))
                delivery = headers.get("x-service-delivery")
                if delivery:
                    with self._lock:
                        self._arrivals.setdefault(delivery, time.time())
                writer.write(_OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()


# ---------------------------------------------------------------------------------------------------------
# The scenarios
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Reserve:
    """Requests that may be sent once each (writes), handed out run after run."""

    requests: RequestFile
    first: int = 0

    def left(self) -> int:
        return self.requests.count - self.first

    def used(self, summary: WrkSummary, connections: int) -> None:
        """Skip what was sent, and what may have been in flight when wrk stopped."""
        self.first += summary.requests + summary.timeouts + connections


@dataclass(frozen=True, slots=True)
class Read:
    """An HTTP read measured beside the ceiling."""

    name: str
    target: str
    requests: RequestFile
    churn_per_second: float = 0.0  # jobs published and closed while the service is measured (bench.churn)
    once: Reserve | None = None  # lines sent once each (a never-seen mix): no target is ever asked twice

    @classmethod
    def never_seen(cls, name: str, target: str, path: Path, lines: list[tuple[str, str, str, str, str]]) -> Read:
        requests = RequestFile.write(path, lines)
        return cls(name, target, requests, once=Reserve(requests))


def read_lines(target: str, credentials: Sequence[str]) -> list[tuple[str, str, str, str, str]]:
    return [("GET", target, f"Bearer {credential}", "", "") for credential in credentials]


def write_lines(writes: Sequence[Write]) -> list[tuple[str, str, str, str, str]]:
    return [
        (
            "POST",
            "/v1/applications.update_status",
            f"Bearer {write.key}",
            "application/json",
            msgspec.json.encode({"id": write.application_id, "status": WRITE_TARGET}).decode(),
        )
        for write in writes
    ]


def paytr_body(oid: str, amount: int, key: str, salt: str) -> str:
    """A PayTR success notification as PayTR sends it: form fields, hash = base64 HMAC-SHA256 of
    merchant_oid + salt + status + total_amount, keyed with the merchant key."""
    total = str(amount)
    digest = hmac.new(key.encode(), f"{oid}{salt}success{total}".encode(), hashlib.sha256).digest()
    fields = {
        "merchant_oid": oid,
        "status": "success",
        "total_amount": total,
        "hash": base64.b64encode(digest).decode(),
        "failed_reason_code": "",
        "failed_reason_msg": "",
        "test_mode": "1",
        "payment_type": "card",
        "currency": "TL",
        "payment_amount": total,
    }
    return urllib.parse.urlencode(fields)


def payment_lines(
    payments: Sequence[tuple[str, int]], key: str, salt: str, duplicates: float
) -> list[tuple[str, str, str, str, str]]:
    """Every payment notified once, and `duplicates` of all notifications repeats of a recent one."""
    rng = random.Random(13)  # noqa: S311 - reproducible order, not secrets
    bodies: list[str] = []
    pending = iter(payments)
    while True:
        if bodies and rng.random() < duplicates:
            bodies.append(bodies[max(0, len(bodies) - 1 - rng.randrange(64))])
            continue
        payment = next(pending, None)
        if payment is None:
            break
        bodies.append(paytr_body(payment[0], payment[1], key, salt))
    form = "application/x-www-form-urlencoded"
    return [("POST", "/api/webhooks/paytr", "", form, body) for body in bodies]


class Targets:
    """The processes measured: `bin/serve --no-worker`, the ceiling, and `bin/worker`s; all stopped at the end."""

    def __init__(
        self, stack: contextlib.ExitStack, work: Path, env: dict[str, str], server: str, say: Progress
    ) -> None:
        self.work, self.env, self.server, self.say = work, env, server, say
        self.port = int(env["PUBLIC_URL"].rsplit(":", 1)[1])
        self.ceiling_port = free_port()
        self.children: list[Child] = []
        self._service: Child | None = None
        self._ceiling: Child | None = None
        stack.callback(lambda: stop_all(self.children))

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ceiling_url(self) -> str:
        return f"http://{HOST}:{self.ceiling_port}"

    @property
    def service(self) -> Child:
        if self._service is None:
            raise BenchError("the service is not running")
        return self._service

    @property
    def ceiling(self) -> Child:
        if self._ceiling is None:
            raise BenchError("the ceiling is not running")
        return self._ceiling

    def start(self, name: str, argv: list[str]) -> Child:
        """A child process, stopped at the end of the run at the latest."""
        child = Child(f"{len(self.children) + 1:02d}-{name}", argv, self.env, self.work)
        self.children.append(child)
        return child

    def start_service(self) -> float:
        """`bin/serve --no-worker` on the bench's port (stopped first when running), ready: its search index
        opened (or built) and caught up. The seconds from its start to ready."""
        if self._service is not None:
            self._service.stop()
        argv = [*script("serve"), "--no-worker", "--server", self.server, "--host", HOST, "--port", str(self.port)]
        started = time.monotonic()
        self._service = self.start("serve", argv)
        wait_ready(self._service, f"{self.url}/readyz")
        seconds = time.monotonic() - started
        self.say(f"bin/serve --no-worker --server {self.server} is up on {self.url}, ready in {seconds:.1f} s")
        return seconds

    def start_ceiling(self, key: str) -> None:
        """The ceiling app, answering the bytes of the service's own first `jobs.list` page."""
        page = httpx.get(f"{self.url}/v1/jobs.list", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        if page.status_code != 200:
            raise BenchError(f"jobs.list answered {page.status_code}: {page.text[:500]}")
        body = self.work / "page.json"
        body.write_bytes(page.content)
        argv = [sys.executable, "-m", "bench.ceiling", "--port", str(self.ceiling_port), "--body", str(body)]
        self._ceiling = self.start("ceiling", argv)
        wait_ready(self._ceiling, f"{self.ceiling_url}/")
        self.say(f"the ceiling is up on {self.ceiling_url} ({len(page.content):,}-byte page)")


@dataclass
class Tally:
    """Runs by scenario over the rounds, and the ceiling runs beside the reads."""

    service: dict[str, list[Run]] = field(default_factory=dict)
    ceiling: dict[str, list[Run]] = field(default_factory=dict)

    def add(self, name: str, run: Run | None, ceiling: Run | None = None) -> None:
        if run is not None:
            self.service.setdefault(name, []).append(run)
        if ceiling is not None:
            self.ceiling.setdefault(name, []).append(ceiling)


WRITES = "applications.update_status"
CHANGES = "jobs.changes"
SEARCH = "jobs.search"
WEBHOOKS = "webhooks"
PAYMENTS = "payments.notify"


class Bench:
    """The scenarios, measured on the targets over the rounds."""

    def __init__(
        self,
        config: Config,
        stack: contextlib.ExitStack,
        targets: Targets,
        seeded: Seeded,
        receiver: Receiver,
        wrk: str,
        say: Progress,
    ) -> None:
        self.config, self.targets, self.seeded, self.receiver, self.say = config, targets, seeded, receiver, say
        self.database_url = targets.env["DATABASE_URL"]
        self.cores = os.cpu_count() or 1
        self.meter = stack.enter_context(contextlib.closing(Meter(self.database_url)))
        self.wrk = Wrk(wrk, targets.work, config.connections)
        self.notes: list[str] = []
        self._request_files()

    def _request_files(self) -> None:
        employers, work = self.seeded.employers, self.targets.work
        self.reads = [
            Read(name, target, RequestFile.write(work / f"reads-{n}", read_lines(target, credentials)))
            for n, (name, target, credentials) in enumerate(
                [
                    ("jobs.list", "/v1/jobs.list", employers.keys),
                    (f"jobs.list q={QUERY}", f"/v1/jobs.list?q={QUERY}", employers.keys),
                    ("profile.me", "/v1/profile.me", employers.tokens),
                ]
            )
        ]
        rng = random.Random(13)  # noqa: S311 - a reproducible mix, not secrets
        filters, queries = tuple(mixes.list_targets()), tuple(mixes.search_targets(rng))
        lists = mixes.zipf_lines(filters, employers.keys, MIX_LINES, rng)
        searches = RequestFile.write(work / "search-mix", mixes.zipf_lines(queries, employers.keys, MIX_LINES, rng))
        count = NEVER_SEEN_LINES[self.config.quick]
        unseen_searches = mixes.once_each(mixes.never_seen_searches(rng, count), employers.keys)
        unseen_lists = mixes.once_each(mixes.never_seen_lists(rng, count), employers.keys)
        self.reads += [
            Read("jobs.list one filter (Zipf mix)", "/v1/jobs.list", RequestFile.write(work / "list-mix", lists)),
            Read("jobs.search (Zipf mix)", "/v1/jobs.search", searches),
            Read(f"jobs.search (Zipf mix, {CHURN}/s published+closed)", "/v1/jobs.search", searches, CHURN),
            Read.never_seen("jobs.search (never seen)", "/v1/jobs.search", work / "search-unseen", unseen_searches),
            Read.never_seen("jobs.list filters (never seen)", "/v1/jobs.list", work / "list-unseen", unseen_lists),
        ]
        self.rss: dict[int, float] = {}  # the most memory the service held at each size, in MB
        self.writes = Reserve(RequestFile.write(work / "writes", write_lines(self.seeded.writes)))
        self.payments: Reserve | None = None
        if self.seeded.payments:
            key, salt = self.targets.env["PAYTR_MERCHANT_KEY"], self.targets.env["PAYTR_MERCHANT_SALT"]
            lines = payment_lines(self.seeded.payments, key, salt, DUPLICATE_SHARE)
            self.payments = Reserve(RequestFile.write(work / "payments", lines))

    # --- running --------------------------------------------------------------------------------------------

    def run(self) -> list[Row]:
        """Every scenario at the first size, then the job reads and the feed at each larger one (or webhook
        delivery alone, or the feed alone)."""
        if self.config.only_webhooks:
            hooks = Hooks(self)
            for number in range(1, self.config.rounds + 1):
                self.say(f"round {number}/{self.config.rounds}")
                hooks.round(number)
            events = one_endpoint.QUICK_EVENTS if self.config.quick else one_endpoint.FULL_EVENTS
            return [hooks.row(0), one_endpoint.measure(hooks, 0, events, 1)]
        if self.config.only == CHANGES:
            return self.changes_only()
        if self.config.only == SEARCH:
            return self.job_reads_only()
        self.targets.start_service()
        self.targets.start_ceiling(self.seeded.employers.keys[0])
        self.warm_up()
        rows = self.first_size(self.config.sizes[0])
        for size in self.config.sizes[1:]:
            rows.extend(self.larger_size(size))
        return rows

    def first_size(self, size: int) -> list[Row]:
        tally, hooks = Tally(), Hooks(self)
        for number in range(1, self.config.rounds + 1):
            self.say(f"round {number}/{self.config.rounds} at {size:,} jobs")
            self.read_round(size, self.reads, tally)
            tally.add(WRITES, self.reserved(self.writes, WRITES))
            if self.payments is not None:
                tally.add(PAYMENTS, self.reserved(self.payments, PAYMENTS))
            hooks.round(number)
        rows = [*self.read_rows(size, self.reads, tally), search_index.row(self, size)]
        if WRITES in tally.service:
            rows.append(self.write_row(size, tally.service[WRITES]))
        if PAYMENTS in tally.service:
            rows.append(self.payment_row(size, tally.service[PAYMENTS]))
        rows.append(hooks.row(size))
        events = one_endpoint.QUICK_EVENTS if self.config.quick else one_endpoint.FULL_EVENTS
        rows.append(one_endpoint.measure(hooks, size, events, 1))
        rows.append(self.changes_row(size))
        return rows

    def changes_only(self) -> list[Row]:
        """`--only jobs.changes`: the feed at each size, nothing else."""
        rows = []
        for size in self.config.sizes:
            self.serve_at(size)
            rows.append(self.changes_row(size))
        return rows

    def job_reads_only(self) -> list[Row]:
        """`--only jobs.search`: the job reads (the list, its filters, the searches, with churn) at each size."""
        self.targets.start_service()
        self.targets.start_ceiling(self.seeded.employers.keys[0])  # it copies a page the service gives
        rows = []
        for size in self.config.sizes:
            rows.extend(self.job_reads(size))
        return rows

    def changes_row(self, size: int) -> Row:
        """The feed followed by one client: a full pass, then incremental ones after recent writes."""
        self.say(f"  {CHANGES}: a full pass over {size:,} jobs, then {sync.INCREMENTAL_PASSES} incremental ones")
        try:
            figures = sync.measure(self.targets.url, self.database_url, self.seeded.employers.keys)
        except sync.SyncError as exc:
            raise BenchError(str(exc)) from exc
        details, pages = figures.details(), figures.page_ms()
        self.say(f"  {CHANGES}: {details['full_pass_seconds']} s full pass, incremental {details['incremental_ms']} ms")
        return Row(
            name=CHANGES,
            jobs=size,
            unit="jobs/s (full pass)",
            req_s=figures.jobs_per_s,
            p50_ms=pages["median"],
            p99_ms=pages["p99"],
            errors=0,
            rounds=1,
            details=details,
        )

    def larger_size(self, size: int) -> list[Row]:
        """Grow the jobs to `size`, restart the service (fresh plans), and measure the job reads again."""
        return [*self.job_reads(size), self.changes_row(size)]

    def serve_at(self, size: int) -> None:
        """Grow the jobs to `size` (unless it is the size seeded) and start the service afresh (fresh plans)."""
        if size != self.config.sizes[0]:
            self.say(f"growing to {size:,} jobs (COPY, indexes rebuilt after)")
            asyncio.run(grow_jobs(self.database_url, size, self.seeded.employers.accounts))
        self.targets.start_service()

    def job_reads(self, size: int) -> list[Row]:
        """The job reads at `size`, on a service started afresh (the jobs grown to it first)."""
        self.serve_at(size)
        self.warm_up()
        reads, tally = [read for read in self.reads if read.name.startswith("jobs.")], Tally()
        for number in range(1, self.config.rounds + 1):
            self.say(f"round {number}/{self.config.rounds} at {size:,} jobs")
            self.read_round(size, reads, tally)
        return [*self.read_rows(size, reads, tally), search_index.row(self, size)]

    def measure(self, child: Child, url: str, requests: RequestFile, first: int = 0) -> tuple[Run, WrkSummary]:
        """One wrk run, with the CPU the measured process, the database and wrk spent over it."""
        before = self.meter.sample(child.pid)
        summary = self.wrk.run(url, requests, self.config.seconds, first)
        after = self.meter.sample(child.pid)
        if not child.alive():
            raise BenchError(f"{child.name} died during the run:\n{child.tail()}")
        return Run.of(summary, Usage.between(before, after)), summary

    def warm_up(self) -> None:
        """The ceiling's connections made before anything counts. The service is not warmed: every scenario
        measures a process started just before it, with nothing asked ahead, as after a restart or a deploy."""
        read = self.reads[0]
        self.wrk.run(self.targets.ceiling_url + read.target, read.requests, self.config.warmup)
        if not self.targets.ceiling.alive():
            raise BenchError(f"the ceiling died while warming up:\n{self.targets.ceiling.tail()}")

    def read_round(self, size: int, reads: Sequence[Read], tally: Tally) -> None:
        """Each read: the ceiling, then the service, back to back with the same requests."""
        for read in reads:
            first = read.once.first if read.once else 0
            ceiling, _ = self.measure(
                self.targets.ceiling, self.targets.ceiling_url + read.target, read.requests, first
            )
            self.targets.start_service()  # a fresh process: nothing asked of it before the run
            churn = Churn(self.targets.url, self.seeded.employers.keys, read.churn_per_second or 1)
            with churn if read.churn_per_second else contextlib.nullcontext():
                service, summary = self.measure(
                    self.targets.service, self.targets.url + read.target, read.requests, first
                )
            if read.once:
                read.once.used(summary, self.config.connections)
            held = psutil.Process(self.targets.service.pid).memory_info().rss / 1e6
            self.rss[size] = max(self.rss.get(size, 0.0), held)
            if read.churn_per_second:
                rate = churn.published / churn.seconds if churn.seconds else 0.0
                self.say(
                    f"  meanwhile {churn.published:,} jobs published ({rate:.1f}/s) and {churn.closed:,} closed, "
                    f"{churn.failed} calls failed"
                )
            tally.add(read.name, service, ceiling)
            self.say(
                f"  {read.name}: {service.rate:,.0f} req/s (p99 {service.p99_ms:.1f} ms, {service.errors} errors) "
                f"beside a ceiling of {ceiling.rate:,.0f} req/s"
            )

    def reserved(self, reserve: Reserve, name: str) -> Run | None:
        """One run of requests sent once each; None (with a note) when too few are left."""
        left = reserve.left()
        if left < self.config.connections * 4:
            self.notes.append(f"{name}: not enough seeded requests left for another round")
            return None
        run, summary = self.measure(self.targets.service, self.targets.url, reserve.requests, reserve.first)
        reserve.used(summary, self.config.connections)
        if summary.requests > left:
            self.notes.append(f"{name}: the seeded requests ran out during a run; later ones repeated earlier ones")
        self.say(f"  {name}: {run.rate:,.0f}/s (p99 {run.p99_ms:.1f} ms, {run.errors} not 2xx)")
        return run

    # --- rows -----------------------------------------------------------------------------------------------

    def read_rows(self, size: int, reads: Sequence[Read], tally: Tally) -> list[Row]:
        rows = []
        for read in reads:
            row = summarize(
                read.name, size, "requests/s", tally.service[read.name], tally.ceiling[read.name], self.cores
            )
            rows.append(row)
        return rows

    def write_row(self, size: int, runs: list[Run]) -> Row:
        row = summarize(WRITES, size, "writes/s", runs, cores=self.cores)
        row.details["what"] = "reviewed → interview_scheduled, a different application each request; 200s only"
        row.details["deliveries_per_write"] = 1
        return row

    def payment_row(self, size: int, runs: list[Run]) -> Row:
        row = summarize(PAYMENTS, size, "notifications/s", runs, cores=self.cores)
        verdicts = {str(name): int(count) for name, count in self.meter.query(_VERDICTS)}
        row.details.update(duplicates=DUPLICATE_SHARE, verdicts=verdicts)
        if row.errors or set(verdicts) - {"applied", "duplicate"}:
            self.notes.append(
                f"{PAYMENTS}: not every notification was applied or recognised as a duplicate; see the verdicts "
                "(the bench's PayTR fields may not match procedures/paytr.py)"
            )
        return row


@dataclass(frozen=True, slots=True)
class HookRound:
    drain: Run
    paced_rate: float
    latencies_ms: list[float]


class Hooks:
    """Webhook delivery by one `bin/worker` into the loopback receiver: its throughput on a backlog, and the
    latency from emit (the event's transaction) to receipt at the target rate (`Config.webhook_rate`)."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.emitter = build_emitter(Settings.from_env(bench.targets.env), VOCABULARY.event_kinds)
        self.rounds: list[HookRound] = []

    def round(self, number: int) -> None:
        """Purge the writes' backlog, emit a burst with no worker running, start one worker and time the drain;
        then emit at the target rate (or below what the worker drained at) and time each event from emit to
        receipt."""
        bench, config = self.bench, self.bench.config
        asyncio.run(purge_backlog(bench.database_url))
        expected, _ = self.emit(config.webhook_events, rate=None)
        bench.say(f"  webhooks: {len(expected)} events emitted with no worker running; starting one bin/worker")
        concurrency = ["--concurrency", str(config.worker_concurrency)]
        worker = bench.targets.start(f"worker-{number}", [*script("worker"), *concurrency])
        try:
            drain = self.drain(worker, expected)
            bench.say(f"  webhooks: drained at {drain.rate:,.0f} events/s; now paced")
            rate = min(config.webhook_rate, 0.9 * drain.rate)
            created, rate = self.emit(int(rate * config.paced_seconds), rate=rate)
            arrivals = self.wait_for(worker, created)
        finally:
            worker.stop()
        latencies = [1000 * (arrivals[delivery] - moment) for delivery, moment in created.items()]
        bench.say(
            f"  webhooks: {len(latencies)} paced at {rate:.0f}/s: emit to receipt p50 "
            f"{percentile(latencies, 50):.0f} ms, p99 {percentile(latencies, 99):.0f} ms"
        )
        self.rounds.append(HookRound(drain=drain, paced_rate=rate, latencies_ms=latencies))

    def emit(self, count: int, rate: float | None) -> tuple[dict[str, float], float]:
        """`count` events, straight through the emitter: the deliveries they created (what the database holds),
        and the rate they were emitted at."""
        started = time.time()
        accounts = self.bench.seeded.employers.accounts
        emitted = asyncio.run(emit_events(self.bench.database_url, self.emitter, accounts, count, rate))
        if rate is not None and emitted < 0.95 * rate:
            self.bench.notes.append(
                f"webhooks.delivery: asked for {rate:.0f} events/s, emitted {emitted:.0f} (the bench's own emitter "
                "was short of CPU): the latency figures are at that rate"
            )
        created = asyncio.run(deliveries_since(self.bench.database_url, started))
        if not created:
            raise BenchError("the emitted events created no webhook deliveries")
        return created, emitted

    def drain(self, worker: Child, expected: dict[str, float]) -> Run:
        """First arrival to last: one worker's throughput on a backlog, and its CPU over the same span."""
        deadline = time.monotonic() + READY_SECONDS + len(expected) / 20
        while not set(expected) & set(self.bench.receiver.arrivals()):
            self._check(worker, deadline, "the first webhook delivery")
            time.sleep(0.005)
        before = self.bench.meter.sample(worker.pid)
        arrivals = self.wait_for(worker, expected, deadline)
        after = self.bench.meter.sample(worker.pid)
        moments = sorted(arrivals[delivery] for delivery in expected)
        span = moments[-1] - moments[0]
        lag = [1000 * (arrivals[delivery] - created) for delivery, created in expected.items()]
        rate = (len(moments) - 1) / span if span > 0 else 0.0
        usage = Usage.between(before, after)
        return Run(len(moments), 0, rate, percentile(lag, 50), percentile(lag, 99), usage)

    def wait_for(self, worker: Child, expected: dict[str, float], deadline: float | None = None) -> dict[str, float]:
        """Until the receiver has every expected delivery; their arrival times."""
        deadline = deadline or time.monotonic() + READY_SECONDS + len(expected) / 20
        while True:
            arrivals = self.bench.receiver.arrivals()
            if all(delivery in arrivals for delivery in expected):
                return arrivals
            self._check(worker, deadline, f"{len(expected)} webhook deliveries")
            time.sleep(0.01)

    @staticmethod
    def _check(worker: Child, deadline: float, what: str) -> None:
        if not worker.alive():
            raise BenchError(f"{worker.name} exited:\n{worker.tail()}")
        if time.monotonic() > deadline:
            raise BenchError(f"the receiver did not get {what} in time:\n{worker.tail()}")

    def row(self, size: int) -> Row:
        drains = [hook.drain for hook in self.rounds]
        row = summarize("webhooks.delivery", size, "events/s", drains, cores=self.bench.cores, process="worker")
        latencies = [latency for hook in self.rounds for latency in hook.latencies_ms]
        row.p50_ms, row.p99_ms = rounded(percentile(latencies, 50), 2), rounded(percentile(latencies, 99), 2)
        row.details.update(
            worker=f"one bin/worker --concurrency {self.bench.config.worker_concurrency}; server CPU = the worker's",
            backlog_events=self.bench.config.webhook_events,
            backlog_p50_ms=rounded(median([drain.p50_ms for drain in drains]), 1),
            backlog_p99_ms=rounded(median([drain.p99_ms for drain in drains]), 1),
            paced_events_s=rounded(median([hook.paced_rate for hook in self.rounds]), 1),
            paced_events=len(latencies),
        )
        return row


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(pct / 100 * len(ordered)) - 1))]


_VERDICTS = "SELECT verdict, count(*) FROM payment_notifications GROUP BY verdict ORDER BY verdict"
_PURGE_JOBS = "DELETE FROM procrastinate_jobs WHERE queue_name = %(queue)s AND task_name = %(task)s AND status = 'todo'"
_PURGE_DELIVERIES = """
UPDATE webhook_deliveries
SET status = 'failed', last_error = 'bench: purged before the delivery scenario', next_attempt_at = NULL
WHERE status = 'pending'
"""
_VACUUM_QUEUE = "VACUUM (ANALYZE) procrastinate_jobs, procrastinate_events, webhook_deliveries"
_CREATED_SINCE = """
SELECT id::text AS id, extract(epoch FROM created_at)::float8 AS created
FROM webhook_deliveries WHERE created_at >= to_timestamp(%(since)s)
"""


async def purge_backlog(url: str) -> None:
    """Forget the deliveries the write scenario queued (no worker ran then), so that a round starts empty.

    And vacuum what the purge left dead: thousands of deleted jobs at the head of the queue's index would make
    every fetch step over them until autovacuum came (measured: 2.4 ms a fetch instead of 0.3 ms, half the
    rate), which times the purge, not the worker. A running service never deletes a backlog like that."""
    async with await ops.connect(url) as conn:
        async with conn.transaction():
            await conn.execute(_PURGE_JOBS, {"queue": DELIVERY_QUEUE, "task": DELIVER_TASK})
            await conn.execute(_PURGE_DELIVERIES)
        await conn.execute(_VACUUM_QUEUE)


async def deliveries_since(url: str, since: float) -> dict[str, float]:
    """Deliveries created at or after `since` (wall clock): their creation time, in the emitting transaction."""
    async with await ops.connect(url) as conn:
        cursor = await conn.execute(_CREATED_SINCE, {"since": since})
        return {str(row["id"]): float(row["created"]) for row in await cursor.fetchall()}


# ---------------------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------------------


def machine(wrk: str, database_url: str, config: Config) -> dict[str, Any]:
    with psycopg.connect(database_url, connect_timeout=10) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    model = next(
        (line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")), platform.processor()
    )
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "os": platform.platform(),
        "python": platform.python_version(),
        "postgresql": row[0] if row else None,
        "wrk": wrk,
        "mode": "quick" if config.quick else "full",
        "rounds": config.rounds,
        "seconds_per_run": config.seconds,
        "connections": config.connections,
        "accounts": config.accounts,
    }


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


_HEADINGS = ("scenario", "jobs", "req/s", "p50 ms", "p99 ms", "ceiling", "ratio", "srv ms/req", "db ms/req")
_WIDTHS = (38, 9, 9, 7, 7, 8, 6, 10, 9, 6, 0)


def _line(cells: Sequence[str]) -> str:
    """The first and last cells to the left, the figures to the right."""
    last = len(cells) - 1
    pairs = enumerate(zip(cells, _WIDTHS, strict=True))
    fitted = [cell.ljust(width) if n in (0, last) else cell.rjust(width) for n, (cell, width) in pairs]
    return "  ".join(fitted).rstrip()


def _cell(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(rows: Sequence[Row]) -> str:
    """The figures as a fixed-width table: one line per scenario and size."""
    lines = [_line([*_HEADINGS, "errors", "bound by"])]
    for row in rows:
        name = row.name if row.unit == "requests/s" else f"{row.name} ({row.unit})"
        ratio = "-" if row.ratio_to_ceiling is None else f"{100 * row.ratio_to_ceiling:.1f}%"
        figures = [_cell(row.req_s, 0), _cell(row.p50_ms, 2), _cell(row.p99_ms, 2), _cell(row.ceiling_req_s, 0)]
        cpu = [_cell(row.server_cpu_ms_per_req, 3), _cell(row.db_cpu_ms_per_req, 3)]
        lines.append(_line([name, f"{row.jobs:,}", *figures, ratio, *cpu, str(row.errors), row.bound_by]))
    return "\n".join(lines)


def explanations(config: Config) -> list[str]:
    return [
        f"wrk -t1 -c{config.connections} -d{config.seconds}s, {config.rounds} round(s), ceiling and service back to "
        "back in each (figures: medians; ratio: the median of each round's own ratio).",
        f"Rate limits stay on (memory counters): requests rotate among the API keys, or session tokens, of "
        f"{config.accounts} enterprise accounts ({config.accounts} × 1,000/minute in all).",
        "ms/req: CPU time of the server process (the worker for webhooks) and of the database's backends per "
        "answer that counted; bound by: a process near a full core, else the machine, else waits.",
        f"webhooks.delivery: events/s of one bin/worker draining a backlog of {config.webhook_events:,} events "
        "(first to last arrival), emitted through the service's Emitter, one transaction each; p50/p99: emit (the "
        f"event's transaction) to the receiver at {config.webhook_rate:,.0f} events/s for {config.paced_seconds} s "
        "(or 90 % of the drain rate, if lower).",
        f"jobs.changes: one client following the feed, {sync.PER_PAGE:,} jobs a page (p50/p99: per page); then "
        f"{sync.INCREMENTAL_PASSES} incremental passes, each after {sync.RECENT} jobs changed (details).",
    ]


# ---------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------


def options(argv: list[str] | None) -> tuple[Config, Path | None, Path | None]:
    parser = argparse.ArgumentParser(prog="bin/bench", description=main.__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 jobs, one short round: under a minute")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--seconds", type=int, help="seconds per wrk run (default 10, quick 2)")
    parser.add_argument("--rounds", type=int, help="rounds of every scenario (default 3, quick 1)")
    parser.add_argument("--only", choices=[CHANGES, SEARCH, WEBHOOKS], help="measure only this scenario")
    parser.add_argument("--logs", type=Path, metavar="DIR", help="keep the output of every process started in DIR")
    parser.add_argument("--concurrency", type=int, help=f"bin/worker --concurrency (default {WORKER_CONCURRENCY})")
    parser.add_argument(
        "--server", choices=SERVERS, default="uvicorn", help="bin/serve --server (the ceiling: uvicorn)"
    )
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.concurrency is not None:
        config = dataclasses.replace(config, worker_concurrency=max(1, args.concurrency))
    if args.seconds is not None:
        config = dataclasses.replace(config, seconds=max(1, args.seconds))
    if args.rounds is not None:
        config = dataclasses.replace(config, rounds=max(1, args.rounds))
    if args.only is not None:
        config = dataclasses.replace(config, only=args.only)
    return dataclasses.replace(config, server=args.server), args.json, args.logs


def keep_logs(work: Path, logs: Path) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    for log in work.glob("*.log"):
        shutil.copy(log, logs / log.name)


def benchmark(config: Config, say: Progress, logs: Path | None) -> Report:
    """Everything, with every process stopped and the database dropped however it ends."""
    stack = contextlib.ExitStack()
    try:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hire-bench-")))
        if logs is not None:
            stack.callback(keep_logs, work, logs)  # after the processes have stopped, before the directory goes
        wrk = ensure_wrk(say)
        url = stack.enter_context(private_database(server_dsn()))
        say(f"private database {psycopg.conninfo.conninfo_to_dict(url).get('dbname')}")
        receiver = stack.enter_context(Receiver())
        env = service_env(url, free_port(), work)
        seeded = asyncio.run(seed(url, Settings.from_env(env), config, receiver.url, say))
        bench = Bench(config, stack, Targets(stack, work, env, config.server, say), seeded, receiver, wrk, say)
        about = machine(bench.wrk.version() or wrk, url, config)
        rows = bench.run()
        notes = [*explanations(config), *bench.notes]
        return Report(machine=about, scenarios=rows, notes=notes)
    finally:
        with shielded():
            say("stopping processes, dropping the private database")
            stack.close()


def main(argv: list[str] | None = None) -> None:
    """bin/bench: seed a private database, measure the service beside a bare Starlette ceiling, print a table."""
    config, json_path, logs = options(argv)
    say = Progress()
    signal.signal(signal.SIGINT, _interrupt)  # also when started with SIGINT ignored (a background job)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = benchmark(config, say, logs)
    except BenchError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: processes stopped, private database dropped\n")
        raise SystemExit(130) from None
    sys.stdout.write(table(report.scenarios) + "\n\n" + "\n".join(f"- {note}" for note in report.notes) + "\n")
    if json_path is not None:
        json_path.write_bytes(msgspec.json.format(msgspec.json.encode(report)) + b"\n")
    say(f"done in {time.monotonic() - say.started:.0f} s")
