"""Rolling restarts during writes (issue 28): two `bin/serve --no-worker` and one `bin/worker`, and while a client
writes at a steady rate for a minute, a server or the worker is restarted every few seconds, in turn. Measured
beside the same writes without restarts: requests failed (the goal is none) and the p99 the restarts add.

A server is restarted as a load balancer does it: taken out of the rotation, stopped with SIGTERM (the requests it
holds are answered), started again, and put back once `/healthz` answers. The worker is stopped with SIGTERM and
started again. Each write is `jobs.create` with an Idempotency-Key, sent once (no retry: a failure counts), and
every tenth is followed by `jobs.publish`, whose `job.published` event must reach the receiver.

    python -m bench.restarts [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import msgspec

from bench.config import HOST, Progress
from bench.hooks import percentile
from bench.processes import Child, free_port, script, wait_ready
from bench.stage import Stage, stage

RATE = 20.0  # writes a second
FULL_SECONDS, QUICK_SECONDS = 60.0, 10.0
FULL_EVERY, QUICK_EVERY = 5.0, 2.0  # seconds between restarts
PUBLISH_EVERY = 10
DELIVERED_WITHIN = 60.0
SETTINGS = {"WORKER_HEARTBEAT": "1", "WEBHOOK_RETRY_WAITS": "0,1,2,5,10", "WEBHOOK_TIMEOUT": "5"}


class Figures(msgspec.Struct, kw_only=True):
    writes: int
    failed: int
    p50_ms: float
    p99_ms: float
    restarts: int
    published: int
    delivered: int


@dataclass
class Fleet:
    """The servers in the rotation, and the worker."""

    stage: Stage
    ports: list[int]
    servers: dict[int, Child] = field(default_factory=dict)
    rotation: list[int] = field(default_factory=list)
    worker: Child | None = None
    restarts: int = 0
    generation: itertools.count[int] = field(default_factory=itertools.count)

    def start_server(self, port: int) -> None:
        argv = [*script("serve"), "--no-worker", "--host", HOST, "--port", str(port)]
        child = self.stage.targets.start(f"serve-{port}-{next(self.generation)}", argv)
        wait_ready(child, f"http://{HOST}:{port}/healthz")
        self.servers[port] = child
        self.rotation.append(port)

    def start_worker(self) -> None:
        self.worker = self.stage.targets.start(f"worker-{next(self.generation)}", script("worker"))

    def restart(self, number: int) -> None:
        """A server (out of the rotation first) or the worker, in turn."""
        if number % 3 == 2 and self.worker is not None:
            self.worker.stop()
            self.start_worker()
        else:
            port = self.ports[number % 2]
            self.rotation.remove(port)
            self.servers[port].stop()
            self.start_server(port)
        self.restarts += 1


async def write(stage: Stage, fleet: Fleet, seconds: float, every: float | None) -> tuple[Figures, list[str]]:
    """Writes at RATE for `seconds`, restarting every `every` seconds (never, with None)."""
    latencies: list[float] = []
    failures: list[str] = []
    published: list[str] = []
    auth = {"Authorization": f"Bearer {stage.key}"}
    started = time.monotonic()

    async def one(client: httpx.AsyncClient, number: int, port: int) -> None:
        headers = {**auth, "Idempotency-Key": f"restart-{started}-{number}"}
        body = {"title": f"Restart {number}", "company": "Restarts", "location": "Loopback"}
        began = time.monotonic()
        try:
            answer = await client.post(f"http://{HOST}:{port}/v1/jobs.create", json=body, headers=headers)
        except httpx.HTTPError as exc:
            failures.append(type(exc).__name__)
            return
        latencies.append(1000 * (time.monotonic() - began))
        if answer.status_code != 200:
            failures.append(f"{answer.status_code} {answer.text[:120]}")
        elif number % PUBLISH_EVERY == 0:
            job = answer.json()["result"]["id"]
            answer = await client.post(f"http://{HOST}:{port}/v1/jobs.publish", json={"id": job}, headers=auth)
            if answer.status_code == 200:
                published.append(job)
            else:
                failures.append(f"publish {answer.status_code} {answer.text[:120]}")

    async def restarting() -> None:
        if every is None:
            return
        for number in itertools.count():
            await asyncio.sleep(every)
            if time.monotonic() - started > seconds - every / 2:
                return
            await asyncio.to_thread(fleet.restart, number)

    tasks: list[asyncio.Task[None]] = []
    restarts = asyncio.create_task(restarting())
    async with httpx.AsyncClient(timeout=30) as client:
        for number in range(int(seconds * RATE)):
            await asyncio.sleep(max(0.0, started + number / RATE - time.monotonic()))
            port = fleet.rotation[number % len(fleet.rotation)]
            tasks.append(asyncio.create_task(one(client, number, port)))
        await asyncio.gather(*tasks)
    await restarts
    figures = Figures(
        writes=len(tasks),
        failed=len(failures),
        p50_ms=round(percentile(latencies, 50), 1),
        p99_ms=round(percentile(latencies, 99), 1),
        restarts=fleet.restarts,
        published=len(published),
        delivered=0,
    )
    return figures, failures


def delivered(stage: Stage, before: int, published: int) -> int:
    """Deliveries that reached the receiver since `before`, waiting for `published` of them (bounded)."""
    deadline = time.monotonic() + DELIVERED_WITHIN
    while len(stage.receiver.arrivals()) - before < published and time.monotonic() < deadline:
        time.sleep(0.1)
    return len(stage.receiver.arrivals()) - before


def run(quick: bool, say: Progress) -> dict[str, Figures]:
    seconds = QUICK_SECONDS if quick else FULL_SECONDS
    every = QUICK_EVERY if quick else FULL_EVERY
    results: dict[str, Figures] = {}
    with stage(["job.published"], say, **SETTINGS) as on:
        fleet = Fleet(on, [free_port(), free_port()])
        for port in fleet.ports:
            fleet.start_server(port)
        fleet.start_worker()
        for name, restart_every in (("steady", None), ("restarts", every)):
            say(
                f"{name}: {RATE:g} writes/s for {seconds:g} s"
                + (f", a restart every {restart_every:g} s" if restart_every else "")
            )
            before = len(on.receiver.arrivals())
            figures, failures = asyncio.run(write(on, fleet, seconds, restart_every))
            figures.delivered = delivered(on, before, figures.published)
            fleet.restarts = 0
            results[name] = figures
            say(
                f"{name}: {msgspec.json.encode(figures).decode()}"
                + (f"; first failures {failures[:3]}" if failures else "")
            )
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.restarts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SECONDS:g} s of writes each, not a minute")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args(argv)
    say = Progress()
    results = run(args.quick, say)
    steady, restarts = results["steady"], results["restarts"]
    print(
        f"writes {restarts.writes} at {RATE:g}/s through {restarts.restarts} restarts: {restarts.failed} failed "
        f"(without restarts: {steady.failed}); p50 {restarts.p50_ms} ms (steady {steady.p50_ms}), "
        f"p99 {restarts.p99_ms} ms (steady {steady.p99_ms}, added {restarts.p99_ms - steady.p99_ms:.1f}); "
        f"events delivered {restarts.delivered}/{restarts.published}"
    )
    if args.json is not None:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(results)) + b"\n")


if __name__ == "__main__":
    main()
