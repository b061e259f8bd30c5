"""Job alerts at scale (issue 27): 100,000 alerts with realistic searches, jobs published at 20 a second for a
minute; how long from a publish to its instant alerts' mail queued (p50, p99), and the CPU that matching one
published job against every alert costs.

`python -m bench.alerts [--quick] [--json FILE]` (`--quick`: 5,000 alerts, 10 seconds of publishing). It runs the
service's own tick (`procedures.alerts.matcher.Matcher.tick`, the periodic work of every worker) once a second in
this process, on a private database, while another connection publishes drafts as `jobs.publish` does (the
same triggers write the log of changes the tick reads). Nothing sends the queued mail: what is measured ends when
the message is in the durable queue.

Alerts are what people save on a job board: a field and a role (`python developer`), a level and a field, a
word, a typed prefix, a phrase, an exclusion, an `or`; three in four name a city (as typed: lower case, without
accents), some a type or a company; one in three is instant.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import resource
import secrets
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import psycopg
from psycopg.rows import dict_row

from bench import mixes
from bench.config import COMPANIES, FIELDS, LEVELS, LOCATIONS, ROLES
from bench.processes import private_database, server_dsn
from bench.seeding import chunked, copy_lines, replica, stamp
from procedures.alerts.matcher import Matcher
from procedures.jobs.search.text import fold
from rpc.app import prepare_database
from rpc.settings import Settings

PER_SECOND = 20
TYPES = ("full_time", "part_time", "contract", "internship", "temporary")


@dataclass(frozen=True, slots=True)
class Size:
    alerts: int
    seconds: int


FULL = Size(alerts=100_000, seconds=60)
QUICK = Size(alerts=5_000, seconds=10)


class Figures(msgspec.Struct, kw_only=True):
    alerts: int
    searches: int  # distinct searches among them (matched once for all their alerts)
    published: int
    matches: int
    matches_per_publish: float
    instant_mails: int
    instant_jobs_mailed: int
    instant_jobs_waiting: int  # matched, never mailed by the end: must be 0 for the latencies to be all of them
    latency_p50_s: float | None
    latency_p99_s: float | None
    latency_max_s: float | None
    match_cpu_ms_per_publish: float
    match_cpu_ms_per_publish_p99_tick: float | None
    tick_cpu_ms_per_publish: float  # the whole tick: reading, matching, writing, composing and queueing mail
    ticks: int
    tick_wall_p50_s: float
    tick_wall_max_s: float
    first_tick_s: float  # wall time of the first tick that matched: it reads and files every alert
    rss_mb: float
    instant_seconds: float
    workers: int  # processes ticking: the matching one and the others, which mail


@dataclass(slots=True)
class Run:
    published_at: dict[str, float] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    mails: set[tuple[str, float]] = field(default_factory=set)
    match_cpu: float = 0.0
    tick_cpu: float = 0.0
    per_tick: list[float] = field(default_factory=list)  # matching CPU per job, each tick that matched
    walls: list[float] = field(default_factory=list)  # each tick's wall time
    matches: int = 0
    load_seconds: float = 0.0


def alert_query(rng: random.Random) -> str | None:
    roll = rng.random()
    field_, role, level = rng.choice(FIELDS).lower(), rng.choice(ROLES).lower(), rng.choice(LEVELS[:-1]).lower()
    if roll < 0.35:
        return f"{field_} {role}"
    if roll < 0.50:
        return f"{level} {field_}"
    if roll < 0.62:
        return rng.choice(mixes.WORDS)
    if roll < 0.72:
        return f"{role} {rng.choice(mixes.PREFIXES)}"
    if roll < 0.82:
        return rng.choice(mixes.PHRASES)
    if roll < 0.88:
        return rng.choice(mixes.EXCLUSIONS)
    if roll < 0.95:
        return f"{field_} or {rng.choice(FIELDS).lower()}"
    return None


def alert_lines(rng: random.Random, count: int, people: Sequence[str]) -> Iterator[str]:
    """The alerts, created over the last day (so their digests fall due through the next one)."""
    for number in range(count):
        created = stamp(time.time() - rng.uniform(60, 86_400))
        q = alert_query(rng)
        city = fold(rng.choice(LOCATIONS)) if q is None or rng.random() < 0.75 else None
        kind = rng.choice(TYPES) if rng.random() < 0.3 else None
        company = rng.choice(COMPANIES).split()[0].lower() if rng.random() < 0.03 else None
        frequency = "instant" if rng.random() < 1 / 3 else "daily"
        values = [
            str(uuid.uuid4()),
            people[number % len(people)],
            q or r"\N",
            city or r"\N",
            company or r"\N",
            f"{{{kind}}}" if kind else r"\N",
            frequency,
            "\\\\x" + secrets.token_hex(32),
            created,
        ]
        yield "\t".join(values) + "\n"


def job_rows(rng: random.Random, count: int) -> Iterator[str]:
    for _ in range(count):
        title = f"{rng.choice(LEVELS)} {rng.choice(FIELDS)} {rng.choice(ROLES)}".strip()
        company, location = rng.choice(COMPANIES), rng.choice(LOCATIONS)
        description = f"{title} at {company} in {location}: build and run what our customers rely on every day."
        kind = rng.choice(TYPES)
        yield f"{uuid.uuid4()}\t{ACCOUNT}\t{title}\t{company}\t{location}\t{description}\t{kind}\tdraft\n"


ACCOUNT = str(uuid.uuid4())


async def seed(url: str, size: Size, rng: random.Random) -> list[str]:
    """Candidates (verified), their alerts, one employer account and the drafts to publish; the drafts' ids."""
    people = [str(uuid.uuid4()) for _ in range(max(1, size.alerts // 2))]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as conn:
        async with replica(conn):
            await copy_lines(conn, "COPY accounts (id, name) FROM STDIN", iter([f"{ACCOUNT}\tBench employer\n"]))
            users = (
                f"{person}\t{ACCOUNT}\tcandidate\tbench-{n}@example.com\t{stamp(time.time())}\n"
                for n, person in enumerate(people)
            )
            statement = "COPY users (id, account_id, role, email, email_verified_at) FROM STDIN"
            await copy_lines(conn, statement, chunked(users))
            columns = "id, user_id, q, location, company, employment_type, frequency, unsubscribe_hash, created_at"
            await copy_lines(
                conn, f"COPY job_alerts ({columns}) FROM STDIN", chunked(alert_lines(rng, size.alerts, people))
            )
            jobs = list(job_rows(rng, PER_SECOND * size.seconds))
            statement = (
                "COPY jobs (id, account_id, title, company, location, description, employment_type, status) FROM STDIN"
            )
            await copy_lines(conn, statement, chunked(iter(jobs)))
        await conn.execute("ANALYZE")
    return [line.split("\t", 1)[0] for line in jobs]


async def publish(url: str, drafts: Sequence[str], run: Run) -> None:
    """`PER_SECOND` publishes a second, each its own transaction, on the clock (a late one does not shift the
    rest)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        started = time.monotonic()
        for number, job_id in enumerate(drafts):
            await asyncio.sleep(max(0.0, started + number / PER_SECOND - time.monotonic()))
            await conn.execute(
                "UPDATE jobs SET status = 'published', published_at = now() WHERE id = %(id)s", {"id": job_id}
            )
            run.published_at[job_id] = time.time()


async def tick_forever(url: str, matcher: Matcher, run: Run, stop: asyncio.Event) -> None:
    """The worker's periodic tick, once a second (procrastinate's cron `* * * * * *`)."""
    async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
        while not stop.is_set():
            began = time.monotonic()
            cpu = time.process_time()
            async with conn.transaction():
                tick = await matcher.tick(conn)
            committed = time.time()
            run.walls.append(time.monotonic() - began)
            if not run.load_seconds and tick.jobs:
                run.load_seconds = time.monotonic() - began
            run.tick_cpu += time.process_time() - cpu
            run.match_cpu += tick.cpu
            run.matches += tick.matched
            if tick.jobs:
                run.per_tick.append(tick.cpu / tick.jobs)
            for frequency, alert_id, job_id in tick.mailed:
                if frequency == "instant":
                    run.latencies.append(committed - run.published_at[job_id])
                    run.mails.add((alert_id, committed))
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))


async def drained(url: str, deadline: float) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as conn:
        while time.monotonic() < deadline:
            await asyncio.sleep(1.0)
            if not (await (await conn.execute(_WAITING)).fetchone() or {"n": 0})["n"]:
                return


async def mail_forever(url: str, settings: Settings, stop: Any, out: Any) -> None:
    """Another worker's tick: the same work, taking turns with the first at matching (the cursor's lock) and
    sharing the mail; what it matched and mailed goes back through `out`."""
    mailed: list[tuple[str, str, float]] = []
    matched = jobs = 0
    cpu = 0.0
    matcher = Matcher(settings)
    async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
        while not stop.is_set():
            began = time.monotonic()
            async with conn.transaction():
                tick = await matcher.tick(conn)
            committed = time.time()
            matched, jobs, cpu = matched + tick.matched, jobs + tick.jobs, cpu + tick.cpu
            mailed += [
                (alert_id, job_id, committed) for frequency, alert_id, job_id in tick.mailed if frequency == "instant"
            ]
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
    out.put((mailed, matched, jobs, cpu))


def mailer_process(url: str, settings: Settings, stop: Any, out: Any) -> None:
    asyncio.run(mail_forever(url, settings, stop, out))


async def measure(size: Size, mailers: int) -> Figures:
    rng = random.Random(27)  # noqa: S311 - the same alerts and jobs every run
    with private_database(server_dsn()) as url, tempfile.TemporaryDirectory() as data:
        settings = Settings.from_env(
            {"DATABASE_URL": url, "SERVICE_SECRET_KEY": secrets.token_urlsafe(32), "DATA_DIR": data}
        )
        await prepare_database(settings, url)
        drafts = await seed(url, size, rng)
        matcher = Matcher(settings)
        run = Run()
        stop = asyncio.Event()
        context = multiprocessing.get_context("spawn")
        stopping, out = context.Event(), context.Queue()
        others = [context.Process(target=mailer_process, args=(url, settings, stopping, out)) for _ in range(mailers)]
        for other in others:
            other.start()
        ticking = asyncio.create_task(tick_forever(url, matcher, run, stop))
        await publish(url, drafts, run)
        # The instant alerts of the last publishes fall due ALERT_INSTANT_SECONDS later: until every instant match
        # is mailed (or a minute more than that has passed, and what waits is counted).
        await drained(url, time.monotonic() + matcher.settings.instant_seconds + 60)
        stop.set()
        stopping.set()
        await ticking
        for _ in others:
            mailed, matched, _jobs, cpu = out.get()
            run.matches += matched
            run.match_cpu += cpu
            for alert_id, job_id, committed in mailed:
                run.latencies.append(committed - run.published_at[job_id])
                run.mails.add((alert_id, committed))
        for other in others:
            other.join()
        async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
            groups = (await (await conn.execute(_SEARCHES)).fetchone() or {"n": 0})["n"]
            waiting = (await (await conn.execute(_WAITING)).fetchone() or {"n": 0})["n"]
    latencies = sorted(run.latencies)
    published = len(run.published_at)
    return Figures(
        alerts=size.alerts,
        searches=int(groups),
        published=published,
        matches=run.matches,
        matches_per_publish=round(run.matches / published, 1),
        instant_mails=len(run.mails),
        instant_jobs_mailed=len(latencies),
        instant_jobs_waiting=int(waiting),
        latency_p50_s=round(statistics.median(latencies), 2) if latencies else None,
        latency_p99_s=round(latencies[int(0.99 * (len(latencies) - 1))], 2) if latencies else None,
        latency_max_s=round(latencies[-1], 2) if latencies else None,
        match_cpu_ms_per_publish=round(1000 * run.match_cpu / published, 2),
        # Of this process's ticks that matched (the other worker may have taken every turn at matching).
        match_cpu_ms_per_publish_p99_tick=(
            round(1000 * sorted(run.per_tick)[int(0.99 * (len(run.per_tick) - 1))], 2) if run.per_tick else None
        ),
        tick_cpu_ms_per_publish=round(1000 * run.tick_cpu / published, 2),
        ticks=len(run.walls),
        tick_wall_p50_s=round(statistics.median(run.walls), 2),
        tick_wall_max_s=round(max(run.walls), 2),
        first_tick_s=round(run.load_seconds, 2),
        rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        instant_seconds=matcher.settings.instant_seconds,
        workers=1 + mailers,
    )


# Instant matches not mailed when the bench stops (their latency is not among the figures: it must be none).
_WAITING = """
SELECT count(*) AS n FROM job_alert_matches AS m JOIN job_alerts AS a ON a.id = m.alert_id
WHERE a.frequency = 'instant' AND m.sent_at IS NULL
"""
_SEARCHES = """
SELECT count(*) AS n FROM (SELECT DISTINCT q, lower(location), lower(company), employment_type FROM job_alerts) AS s
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.alerts", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5,000 alerts, 10 seconds of publishing")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--mailers", type=int, default=1, help="other worker processes ticking (default 1)")
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(QUICK if args.quick else FULL, args.mailers))
    encoded = msgspec.json.format(msgspec.json.encode(figures))
    print(encoded.decode())
    if args.json is not None:
        args.json.write_bytes(encoded + b"\n")


if __name__ == "__main__":
    main()
