"""Seeding the private database: employers, jobs, candidates, applications and payments by COPY, with triggers
off and the totals set afterwards."""

from __future__ import annotations

import contextlib
import random
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass

from psycopg import sql

from bench.board import board
from bench.config import (
    BOARD_TEXT,
    COMPANIES,
    EMPLOYMENT_TYPES,
    FIELDS,
    HOOK_EVENTS,
    LEVELS,
    LOCATIONS,
    PLAN,
    ROLES,
    SCOPES,
    TOKEN_SECONDS,
    TURKISH_TITLES,
    BenchError,
    Config,
    Progress,
)
from procedures.vocabulary import VOCABULARY
from rpc.app import prepare_database
from rpc.core.types import Connection
from rpc.core.vocabulary import Vocabulary
from rpc.ops import admin as ops
from rpc.outbox.emit import build_emitter
from rpc.outbox.endpoints import Webhooks
from rpc.settings import Settings

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


JobText = Callable[[random.Random], tuple[str, str, str, str]]  # a job's title, company, location, description


def small_text(rng: random.Random) -> tuple[str, str, str, str]:
    """The small seed's text: a few dozen titles, 28 companies, 33 locations, a one-sentence description."""
    title = f"{rng.choice(LEVELS)} {rng.choice(FIELDS)} {rng.choice(ROLES)}".strip()
    if rng.random() < 0.1:
        title = rng.choice(TURKISH_TITLES)
    company, location = rng.choice(COMPANIES), rng.choice(LOCATIONS)
    return (
        title,
        company,
        location,
        f"{title} at {company} in {location}: build and run what our customers rely on every day.",
    )


def job_text(name: str) -> JobText:
    """The text generator `--text` names."""
    if name == BOARD_TEXT:
        return board().job
    return small_text


def job_lines(
    rng: random.Random,
    count: int,
    accounts: Sequence[str],
    published: list[tuple[str, str]] | None,
    text: JobText = small_text,
) -> Iterator[str]:
    """COPY lines of `count` jobs over two years: 90 % published, 6 % closed, 4 % drafts; `published`
    collects (id, account) of the published ones when given."""
    now = time.time()
    for _ in range(count):
        job_id, account = str(uuid.uuid4()), rng.choice(accounts)
        title, company, location, description = (_copied(value) for value in text(rng))
        created = now - rng.uniform(60, 730 * 86_400)
        roll = rng.random()
        status = "published" if roll < 0.90 else "closed" if roll < 0.96 else "draft"
        published_at = stamp(created + 3_600) if status != "draft" else r"\N"
        closed_at = stamp(created + 86_400) if status == "closed" else r"\N"
        yield (
            f"{job_id}\t{account}\t{title}\t{company}\t{location}\t{description}\t{rng.choice(EMPLOYMENT_TYPES)}\t"
            f"{status}\t{stamp(created)}\t{stamp(created)}\t{published_at}\t{closed_at}\n"
        )
        if published is not None and status == "published":
            published.append((job_id, account))


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": " ", "\n": " ", "\r": " "})


def _copied(value: str) -> str:
    """`value` as COPY's text format reads it back."""
    return value.translate(_COPY_ESCAPES)


async def load_jobs(
    conn: Connection,
    rng: random.Random,
    count: int,
    accounts: Sequence[str],
    *,
    collect: bool,
    rebuild: bool,
    text: JobText = small_text,
) -> list[tuple[str, str]]:
    """COPY `count` jobs (with `rebuild`, the secondary indexes dropped first and built again after), set the
    published total to the true count, analyse; (id, account) of the new published jobs when `collect`."""
    published: list[tuple[str, str]] | None = [] if collect else None
    async with replica(conn):
        indexes = await drop_secondary_indexes(conn) if rebuild else []
        await copy_lines(conn, _COPY_JOBS, chunked(job_lines(rng, count, accounts, published, text)))
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
        text = job_text(config.text)
        jobs = await load_jobs(conn, rng, config.sizes[0], employers.accounts, collect=True, rebuild=False, text=text)
        candidates = await seed_candidates(conn, config.candidates)
        writes = await seed_applications(conn, config.applications, jobs, candidates, employers.key_of())
        oids = await seed_payments(conn, config.payments)
        await conn.execute("ANALYZE")
    return Seeded(employers=employers, writes=writes, payments=oids)


async def grow_jobs(url: str, total: int, accounts: Sequence[str], text: JobText = small_text) -> None:
    """Add jobs up to `total` (indexes dropped for the load and built again)."""
    rng = random.Random(11)  # noqa: S311 - reproducible data, not secrets
    async with await ops.connect(url) as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM jobs")
        row = await cursor.fetchone()
        present = int(row["n"]) if row else 0
        await load_jobs(conn, rng, total - present, accounts, collect=False, rebuild=True, text=text)
        await conn.execute("VACUUM ANALYZE jobs")
