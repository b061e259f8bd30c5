"""The public feed scenario: `python -m bench.public_feed [--quick]` streams `/feeds/jobs.xml` of a database of a
million jobs (90 % of them published) from `bin/serve --no-worker`, and reports its bytes/s and the server's
resident memory before and while streaming — the feed is meant to stream in constant memory — then asks again
with the `ETag` it got (a `304`). `--quick` does the same at 10,000 jobs.

It builds on the harness's private database, seeding and process handling (`bench.processes`,
`bench.seeding`), and like it stops every process it started and drops the database at the end."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import psutil

from bench.config import HOST
from bench.processes import Child, free_port, private_database, script, server_dsn, service_env, wait_ready
from bench.seeding import copy_lines, load_jobs, replica
from rpc.app import prepare_database
from rpc.ops import admin as ops
from rpc.settings import Settings

FULL, QUICK = 1_000_000, 10_000
SAMPLE_SECONDS = 0.05


@dataclass(frozen=True)
class Figures:
    jobs: int
    published: int
    bytes: int
    seconds: float
    megabytes_per_second: float
    jobs_per_second: float
    rss_before_mb: float
    rss_peak_mb: float
    not_modified_ms: float


async def seed(url: str, count: int) -> None:
    async with await ops.connect(url) as conn:
        account = str(uuid.uuid4())
        async with replica(conn):
            await copy_lines(conn, "COPY accounts (id, name) FROM STDIN", iter([f"{account}\tFeed bench\n"]))
        await load_jobs(conn, random.Random(25), count, [account], collect=False, rebuild=True)  # noqa: S311 - test data


def rss(pid: int) -> int:
    """The resident memory of the server: the process and every child (uvicorn's worker) together."""
    process = psutil.Process(pid)
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


def stream(url: str, pid: int) -> tuple[int, int, float, int, str]:
    """Bytes and jobs streamed, the seconds it took, the peak RSS seen meanwhile, and the ETag."""
    peak, done = [rss(pid)], threading.Event()

    def watch() -> None:
        while not done.wait(SAMPLE_SECONDS):
            peak[0] = max(peak[0], rss(pid))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    size = jobs = 0
    carry = b""
    started = time.monotonic()
    try:
        with httpx.stream("GET", f"{url}/feeds/jobs.xml", timeout=600) as answer:
            answer.raise_for_status()
            etag = answer.headers["ETag"]
            for chunk in answer.iter_raw():
                size += len(chunk)
                window = carry + chunk
                jobs += window.count(b"</job>")
                carry = window[-5:] if not window.endswith(b"</job>") else b""
    finally:
        done.set()
        watcher.join()
    return size, jobs, time.monotonic() - started, peak[0], etag


def measure(count: int, logs: Path) -> Figures:
    with private_database(server_dsn()) as url:
        port = free_port()
        env = service_env(url, port, logs / "data")
        asyncio.run(prepare_database(Settings.from_env(env), url))
        print(f"seeding {count:,} jobs (COPY)", flush=True)
        asyncio.run(seed(url, count))
        service = Child("serve", [*script("serve"), "--no-worker", "--host", HOST, "--port", str(port)], env, logs)
        try:
            base = f"http://{HOST}:{port}"
            # Ready: its search index built (at a million jobs, half a minute of a core and of memory that is
            # not the feed's), so that the figures are the feed's alone.
            wait_ready(service, f"{base}/readyz")
            httpx.get(f"{base}/jobs", timeout=60)  # warm: imports, pool, templates
            before = rss(service.pid)
            size, jobs, seconds, peak, etag = stream(base, service.pid)
            started = time.monotonic()
            again = httpx.get(f"{base}/feeds/jobs.xml", headers={"If-None-Match": etag}, timeout=60)
            not_modified = (time.monotonic() - started) * 1000
            assert again.status_code == 304, again.status_code
        finally:
            service.stop()
    mb = 1024 * 1024
    return Figures(
        jobs=count,
        published=jobs,
        bytes=size,
        seconds=round(seconds, 2),
        megabytes_per_second=round(size / mb / seconds, 1),
        jobs_per_second=round(jobs / seconds),
        rss_before_mb=round(before / mb, 1),
        rss_peak_mb=round(peak / mb, 1),
        not_modified_ms=round(not_modified, 1),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.public_feed", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK:,} jobs instead of {FULL:,}")
    parser.add_argument("--jobs", type=int, help="this many jobs instead")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args(argv)
    count = args.jobs or (QUICK if args.quick else FULL)
    with tempfile.TemporaryDirectory(prefix="hire-feed-bench-") as work:
        figures = measure(count, Path(work))
    print(
        f"/feeds/jobs.xml at {figures.jobs:,} jobs: {figures.published:,} published jobs, {figures.bytes:,} bytes in "
        f"{figures.seconds} s ({figures.megabytes_per_second} MB/s, {figures.jobs_per_second:,} jobs/s); server RSS "
        f"{figures.rss_before_mb} MB before, {figures.rss_peak_mb} MB at most while streaming; "
        f"304 to its ETag in {figures.not_modified_ms} ms"
    )
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n")


if __name__ == "__main__":
    main()
