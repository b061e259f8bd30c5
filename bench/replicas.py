"""The replica scenario (docs/scaling.md): `bin/bench --only replica`, or `python -m bench.replicas [--quick]
[--json FILE]`.

A primary made with `initdb` and a streaming replica of it (`bench.clusters`, the tests' own servers) on this
machine, the primary seeded with jobs and enterprise employers. One `bin/serve --no-worker` process, started anew
for each run, is driven by wrk at 32 connections with a read-heavy mix — `jobs.get`, `jobs.list` (the first page
and a filtered one), `jobs.search`, a job's public page, a page of `jobs.changes` (a sync client's read: a hundred
rows) — in which one request in twenty is a write (`jobs.update`
of a published job, moving the position every read must see): once reading from the primary alone, once with
`DATABASE_REPLICA_URLS`, in turn, over rounds.

On one machine the replica's CPU is the same machine's, so requests per second say little; the figure that
matters is the primary's CPU per request (every process of its cluster, the WAL sender included), which should
fall by the share of the reads' work the replica takes. Each request's credential check stays on the primary.
Reported beside it: the replica's and the server's CPU per request, the share of reads the replica answered and
the fallbacks to the primary by reason (the server's `/metrics`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import urllib.parse
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import msgspec
from prometheus_client.parser import text_string_to_metric_families

from bench import clusters
from bench.config import HOST, PLAN, Progress
from bench.meter import process_cpu
from bench.processes import Child, free_port, script, service_env, wait_ready
from bench.seeding import load_jobs, seed_employers
from bench.wrk import RequestFile, Wrk, WrkSummary, ensure_wrk
from procedures.vocabulary import VOCABULARY
from rpc.app import prepare_database
from rpc.ops import admin as ops
from rpc.settings import Settings

FULL = {"jobs": 100_000, "employers": 200, "seconds": 10, "rounds": 3}
QUICK = {"jobs": 10_000, "employers": 60, "seconds": 3, "rounds": 1}
CONNECTIONS = 32
LINES = 20_000
WRITE_EVERY = 20  # one request in twenty is a write
WORDS = ("python", "data", "cloud", "senior", "engineer", "platform", "security", "mobile", "analyst", "backend")
SETUPS = ("primary alone", "with a replica")
Line = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class Run:
    """One wrk run against a fresh server: requests, latency, and CPU seconds spent meanwhile."""

    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    primary_cpu: float
    replica_cpu: float
    server_cpu: float
    reads: dict[str, float]  # reads answered, by database (the server's /metrics)
    fallbacks: dict[str, float]


@dataclass(frozen=True)
class Setup:
    """The runs of one setup, summed."""

    name: str
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    primary_cpu_ms_per_request: float
    replica_cpu_ms_per_request: float
    server_cpu_ms_per_request: float
    replica_share_of_reads: float
    fallbacks: dict[str, float]
    errors: int

    @classmethod
    def of(cls, name: str, runs: Sequence[Run]) -> Setup:
        requests = sum(run.requests for run in runs)
        reads = {database: sum(run.reads.get(database, 0.0) for run in runs) for run in runs for database in run.reads}
        on_replicas = sum(count for database, count in reads.items() if database != "primary")
        fallbacks = {reason: sum(run.fallbacks.get(reason, 0.0) for run in runs) for reason in runs[0].fallbacks}
        return cls(
            name=name,
            requests_per_second=round(requests / sum(run.seconds for run in runs), 1),
            p50_ms=round(max(run.p50_ms for run in runs), 2),
            p99_ms=round(max(run.p99_ms for run in runs), 2),
            primary_cpu_ms_per_request=_per(sum(run.primary_cpu for run in runs), requests),
            replica_cpu_ms_per_request=_per(sum(run.replica_cpu for run in runs), requests),
            server_cpu_ms_per_request=_per(sum(run.server_cpu for run in runs), requests),
            replica_share_of_reads=round(on_replicas / max(1.0, sum(reads.values())), 3),
            fallbacks=fallbacks,
            errors=sum(run.errors for run in runs),
        )


@dataclass(frozen=True)
class Figures:
    jobs: int
    setups: list[Setup]
    primary_cpu_ratio: float  # with a replica / primary alone, per request


def _per(cpu_seconds: float, requests: int) -> float:
    return round(1000 * cpu_seconds / max(1, requests), 4)


async def seed(url: str, settings: Settings, jobs: int, employers: int) -> tuple[list[str], list[Line]]:
    """The schema, the employers and the jobs; the employers' keys, and one write line per published job
    sampled (its own account's key)."""
    await prepare_database(settings, url)
    async with await ops.connect(url) as conn:
        hired = await seed_employers(conn, settings, VOCABULARY, employers, f"http://{HOST}:9/hooks")
        published = await load_jobs(conn, random.Random(34), jobs, hired.accounts, collect=True, rebuild=True)  # noqa: S311 - test data
    keys = hired.key_of()
    writes = [
        ("POST", "/v1/jobs.update", f"Bearer {keys[account]}", "application/json",
         msgspec.json.encode({"id": job, "title": f"Updated engineer {n}"}).decode())
        for n, (job, account) in enumerate(published[:500])
    ]  # fmt: skip
    return hired.keys, [*writes, *_reads(published, hired.keys)]


def _reads(published: Sequence[tuple[str, str]], keys: Sequence[str]) -> list[Line]:
    """Read lines of every kind, each with the next key: tagged by the path they ask."""
    rng = random.Random(29)  # noqa: S311 - test data
    lines: list[Line] = []
    for number in range(LINES):
        job = rng.choice(published)[0]
        key = f"Bearer {keys[number % len(keys)]}"
        word = rng.choice(WORDS)
        target = (
            f"/v1/jobs.get?id={job}",
            "/v1/jobs.list",
            f"/v1/jobs.list?{urllib.parse.urlencode({'q': word})}",
            f"/v1/jobs.search?{urllib.parse.urlencode({'q': word})}",
            f"/jobs/{job}",
            "/v1/jobs.changes?per_page=100",
        )[number % 6]
        lines.append(("GET", target, key if target.startswith("/v1/") else "", "", ""))
    return lines


def mix(lines: list[Line]) -> list[Line]:
    """The reads with a write every `WRITE_EVERY` requests, the writes taken in turn."""
    writes = [line for line in lines if line[0] == "POST"]
    reads = [line for line in lines if line[0] == "GET"]
    mixed: list[Line] = []
    for number, read in enumerate(reads):
        if number % (WRITE_EVERY - 1) == 0:
            mixed.append(writes[(number // (WRITE_EVERY - 1)) % len(writes)])
        mixed.append(read)
    return mixed


def scrape(base: str) -> tuple[dict[str, float], dict[str, float]]:
    """Reads by database and fallbacks by reason, from the server's /metrics."""
    reads: dict[str, float] = {}
    fallbacks: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == "hire_db_reads_total":
                reads[sample.labels["database"]] = sample.value
            elif sample.name == "hire_replica_fallbacks_total":
                fallbacks[sample.labels["reason"]] = sample.value
    return reads, fallbacks


class Stage:
    """The servers, the environment of the service, the request file and wrk."""

    def __init__(self, servers: clusters.Servers, work: Path, size: dict[str, int], say: Progress) -> None:
        self.primary = servers.primary()
        self.primary.sql("CREATE DATABASE hire")
        url = self.primary.url("hire")
        self.port = free_port()
        self.env = service_env(url, self.port, work / "data")
        say(f"seeding {size['jobs']:,} jobs and {size['employers']} {PLAN} employers on the primary")
        _, lines = asyncio.run(seed(url, Settings.from_env(self.env), size["jobs"], size["employers"]))
        say("making the replica (pg_basebackup)")
        self.replica = servers.replica(self.primary, "replica")
        self.requests = RequestFile.write(work / "mix.txt", mix(lines))
        self.wrk = Wrk(ensure_wrk(say), work, CONNECTIONS)
        self.work = work

    def run(self, setup: str, seconds: int, name: str) -> Run:
        env = dict(self.env)
        if setup == "with a replica":
            env["DATABASE_REPLICA_URLS"] = self.replica.url("hire")
        argv = [*script("serve"), "--no-worker", "--host", HOST, "--port", str(self.port)]
        server = Child(name, argv, env, self.work)
        try:
            base = f"http://{HOST}:{self.port}"
            wait_ready(server, f"{base}/readyz")
            self.wrk.run(base, self.requests, 1)  # warm: imports, pools, credentials seen once
            before = self._cpu(server), scrape(base)
            summary = self.wrk.run(base, self.requests, seconds)
            after = self._cpu(server), scrape(base)
        finally:
            server.stop()
        return _run(summary, before, after)

    def _cpu(self, server: Child) -> tuple[float, float, float]:
        return (
            process_cpu(self.primary.postmaster()),
            process_cpu(self.replica.postmaster()),
            process_cpu(server.pid),
        )


Sampled = tuple[tuple[float, float, float], tuple[dict[str, float], dict[str, float]]]


def _run(summary: WrkSummary, before: Sampled, after: Sampled) -> Run:
    (cpu_before, (reads_before, fallbacks_before)), (cpu_after, (reads_after, fallbacks_after)) = before, after
    primary, replica, server = (end - start for start, end in zip(cpu_before, cpu_after, strict=True))
    return Run(
        requests=summary.requests,
        errors=summary.errors,
        seconds=summary.duration_us / 1e6,
        p50_ms=summary.p50_us / 1000,
        p99_ms=summary.p99_us / 1000,
        primary_cpu=primary,
        replica_cpu=replica,
        server_cpu=server,
        reads={key: value - reads_before.get(key, 0.0) for key, value in reads_after.items()},
        fallbacks={key: value - fallbacks_before.get(key, 0.0) for key, value in fallbacks_after.items()},
    )


def measure(size: dict[str, int], say: Progress) -> Figures:
    with tempfile.TemporaryDirectory(prefix="hire-replica-bench-") as work, clusters.Servers() as servers:
        stage = Stage(servers, Path(work), size, say)
        runs: dict[str, list[Run]] = {setup: [] for setup in SETUPS}
        for round_number in range(size["rounds"]):
            for setup in SETUPS:  # in turn, so that a noisy moment of the machine falls on both
                say(f"round {round_number + 1}: {setup}")
                runs[setup].append(stage.run(setup, size["seconds"], f"serve-{len(runs[setup])}-{setup[:4]}"))
    setups = [Setup.of(setup, runs[setup]) for setup in SETUPS]
    alone, replicated = setups
    ratio = replicated.primary_cpu_ms_per_request / max(1e-9, alone.primary_cpu_ms_per_request)
    return Figures(jobs=size["jobs"], setups=setups, primary_cpu_ratio=round(ratio, 3))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.replicas", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK['jobs']:,} jobs, one short round")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args(argv)
    figures = measure(QUICK if args.quick else FULL, Progress())
    for setup in figures.setups:
        print(
            f"{setup.name}: {setup.requests_per_second:,} requests/s (p50 {setup.p50_ms} ms, p99 {setup.p99_ms} ms, "
            f"{setup.errors} errors); CPU per request: primary {setup.primary_cpu_ms_per_request} ms, replica "
            f"{setup.replica_cpu_ms_per_request} ms, server {setup.server_cpu_ms_per_request} ms; reads answered by "
            f"the replica {100 * setup.replica_share_of_reads:.1f} %; fallbacks {setup.fallbacks}"
        )
    print(f"the primary's CPU per request with a replica: {figures.primary_cpu_ratio:.2f} of its CPU alone")
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n")


if __name__ == "__main__":
    main()
