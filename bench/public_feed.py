"""The public feed scenario: `python -m bench.public_feed [--quick]` reads `/feeds/jobs.xml` of a database of a
million jobs (90 % of them published) from `bin/serve --no-worker` twice — the first reader waits for the
feed's rendition to be rendered into a file, the second is served that file — and reports the seconds of each,
the second's bytes/s and the server's resident memory before and while both read (the feed is rendered and
served in constant memory), then asks again with the `ETag` it got (a `304`). `--quick` does the same at 10,000
jobs.

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
    first_seconds: float  # the first reader: the rendition rendered, then served
    seconds: float  # a later reader: the rendition served
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


class PeakMemory:
    """The server's most resident memory while the block runs, sampled every SAMPLE_SECONDS."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._done = threading.Event()
        self.peak = rss(pid)

    def __enter__(self) -> PeakMemory:
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._watcher.join()

    def _watch(self) -> None:
        while not self._done.wait(SAMPLE_SECONDS):
            self.peak = max(self.peak, rss(self._pid))


def stream(url: str) -> tuple[int, int, float, str]:
    """Bytes and jobs streamed, the seconds it took, and the ETag."""
    size = jobs = 0
    carry = b""
    started = time.monotonic()
    with httpx.stream("GET", f"{url}/feeds/jobs.xml", timeout=600) as answer:
        answer.raise_for_status()
        etag = answer.headers["ETag"]
        for chunk in answer.iter_raw():
            size += len(chunk)
            window = carry + chunk
            jobs += window.count(b"</job>")
            carry = window[-5:] if not window.endswith(b"</job>") else b""
    return size, jobs, time.monotonic() - started, etag


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
            with PeakMemory(service.pid) as memory:
                _, _, first_seconds, _ = stream(base)
                size, jobs, seconds, etag = stream(base)
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
        first_seconds=round(first_seconds, 2),
        seconds=round(seconds, 2),
        megabytes_per_second=round(size / mb / seconds, 1),
        jobs_per_second=round(jobs / seconds),
        rss_before_mb=round(before / mb, 1),
        rss_peak_mb=round(memory.peak / mb, 1),
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
        f"/feeds/jobs.xml at {figures.jobs:,} jobs: {figures.published:,} published jobs, {figures.bytes:,} bytes; "
        f"the first reader (rendered, then served) in {figures.first_seconds} s, a later one (served) in "
        f"{figures.seconds} s ({figures.megabytes_per_second} MB/s, {figures.jobs_per_second:,} jobs/s); server RSS "
        f"{figures.rss_before_mb} MB before, {figures.rss_peak_mb} MB at most while they read; "
        f"304 to its ETag in {figures.not_modified_ms} ms"
    )
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n")


if __name__ == "__main__":
    main()
