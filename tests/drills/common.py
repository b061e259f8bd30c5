"""What the drills share: the service's commands run as real processes (stopped whatever happens), a
fixed-rate load generator that records every answer, a database outage, and a receiver that resets
every connection instead of answering."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import psycopg
from psycopg import sql

from tests.support import TEST_SECRET_KEY, eventually, free_port, settings_for

ROOT = Path(__file__).resolve().parents[2]
START_DEADLINE = 60.0  # seconds for a process to answer /healthz or print its first line, on a busy machine
STOP_DEADLINE = 30.0
# Settings of the service that an outer environment (a developer's shell, CI) must not leak into a drill.
_SETTING_PREFIXES = (
    "DATABASE_URL",
    "TEST_DATABASE_URL",
    "SERVICE_",
    "PUBLIC_URL",
    "DATA_DIR",
    "RATE_LIMIT_",
    "WEBHOOK_",
    "WORKER_",
    "DB_POOL_",
    "AUTH_",
    "PAYTR_",
    "METRICS_",
    "FORWARDED_",
    "SIGNIN_",
    "OAUTH_",
)


def service_env(database_url: str, data_dir: Path, **settings: str) -> dict[str, str]:
    """The environment of a `bin/` process: the tests' secret key (tokens minted by `Admin` verify), the
    database, a private data directory, and `settings`; nothing of the service's own from the outer one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SETTING_PREFIXES)}
    return {
        **env,
        "DATABASE_URL": database_url,
        "SERVICE_SECRET_KEY": TEST_SECRET_KEY,
        "SERVICE_ENV": "test",  # not production: receivers on 127.0.0.1 are allowed
        "PUBLIC_URL": settings_for(database_url).public_url,  # the issuer of the tokens `Admin` mints
        "DATA_DIR": str(data_dir),
        **settings,
    }


@dataclass
class Started:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid


class Fleet:
    """`bin/serve` and `bin/worker` processes of one drill, each logging to its own file under `log_dir`;
    on exit every one still running gets SIGTERM, then SIGKILL if it does not stop in time."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.started: list[Started] = []
        self._logs: list[IO[bytes]] = []

    def _start(self, name: str, argv: list[str], port: int | None) -> Started:
        log_path = self.log_dir / f"{name}.log"
        log = log_path.open("ab")
        self._logs.append(log)
        process = subprocess.Popen(
            [sys.executable, *argv],
            env=self.env,
            cwd=self.log_dir,  # a stray ./.data of an embedded database would land here, not in the repo
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started = Started(name, process, log_path, port)
        self.started.append(started)
        return started

    def serve(self, name: str, *, worker: bool = False, wait: bool = True) -> Started:
        """`bin/serve --port P [--no-worker]`, healthy (its /healthz answers 200) when this returns, unless
        not `wait` (then `ready()` waits)."""
        port = free_port()
        argv = [str(ROOT / "bin" / "serve"), "--port", str(port)] + ([] if worker else ["--no-worker"])
        started = self._start(name, argv, port)
        if wait:
            self.ready(started)
        return started

    def worker(self, name: str, *, concurrency: int = 10, wait: bool = True) -> Started:
        """`bin/worker --concurrency N`, past its migration and start line when this returns, unless not `wait`."""
        argv = [str(ROOT / "bin" / "worker"), "--concurrency", str(concurrency)]
        started = self._start(name, argv, None)
        if wait:
            self.ready(started)
        return started

    def ready(self, *processes: Started) -> None:
        """Wait until each server answers /healthz with 200 and each worker has printed its start line."""
        for started in processes:
            if started.port is None:
                self._wait_for(started, lambda s=started: _worker_started(s), "print its start line")
            else:
                self._wait_for(started, lambda s=started: _healthy(s.url), "answer /healthz with 200")

    def _wait_for(self, started: Started, condition: Callable[[], bool], what: str) -> None:

        def met() -> bool:
            if started.process.poll() is not None:
                raise AssertionError(f"{started.name} exited ({started.process.returncode}):\n{self.tail(started)}")
            return condition()

        eventually(met, lambda: f"{started.name} to {what}:\n{self.tail(started)}", START_DEADLINE)

    def check_running(self) -> None:
        for started in self.started:
            if started.process.poll() is not None:
                raise AssertionError(f"{started.name} exited ({started.process.returncode}):\n{self.tail(started)}")

    def tail(self, started: Started, lines: int = 40) -> str:
        for log in self._logs:
            log.flush()
        return "\n".join(started.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, started: Started) -> int:
        """SIGTERM, and the exit status (SIGKILL after STOP_DEADLINE seconds)."""
        if started.process.poll() is None:
            started.process.send_signal(signal.SIGTERM)
        try:
            return started.process.wait(timeout=STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            started.process.kill()
            return started.process.wait(timeout=STOP_DEADLINE)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        for started in self.started:
            if started.process.poll() is None:
                started.process.send_signal(signal.SIGTERM)
        for started in self.started:
            self.stop(started)
        for log in self._logs:
            log.close()


def _worker_started(started: Started) -> bool:
    return b'"worker"' in started.log_path.read_bytes()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


# --- the database going away --------------------------------------------------------------------------------


class Outage:
    """One database refusing new connections with the ones it had cut (`pg_terminate_backend`), until `end()`.
    (The same cut as tests/test_health.py's, for a drill under load.)"""

    def __init__(self, server_url: str, database_url: str) -> None:
        self.server_url = server_url
        self.name = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
        self.terminated = 0

    def begin(self) -> None:
        self._run("ALTER DATABASE {} ALLOW_CONNECTIONS false")
        with psycopg.connect(self.server_url, autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.name,),
            )
            row = cursor.fetchone()
            self.terminated += int(row[0]) if row else 0

    def end(self) -> None:
        self._run("ALTER DATABASE {} ALLOW_CONNECTIONS true")

    def _run(self, statement: str) -> None:
        with psycopg.connect(self.server_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL(statement).format(sql.Identifier(self.name)))


# --- fixed-rate load ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One call of a load: `kind` names it in the figures; `title` marks a write whose effect is checked."""

    kind: str
    method: str
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    title: str | None = None
    write: bool = False


@dataclass
class Answer:
    """What one request got: times are `time.monotonic()`; `status` None means a transport error."""

    request: Request
    sent: float
    done: float
    status: int | None = None
    code: str | None = None
    retry_after: str | None = None
    result: Any = None
    error: str | None = None

    @property
    def latency(self) -> float:
        return self.done - self.sent


@dataclass
class Load:
    """Open-loop load: request `i` is sent at `start + i / rate` whether or not earlier ones were answered
    (a fixed rate, as real clients arrive), for `duration` seconds. `plan(i)` makes request `i`; `answered`
    sees each answer as it comes (to feed later requests, e.g. publish a created draft)."""

    base_url: str
    rate: float
    duration: float
    plan: Callable[[int], Request]
    answered: Callable[[Answer], None] = lambda answer: None
    timeout: float = 30.0
    answers: list[Answer] = field(default_factory=list)
    started: float = 0.0
    late: float = 0.0  # the largest delay of a send behind its schedule (the load generator's own lag)

    def run(self, *during: Callable[[Load], Awaitable[None]]) -> list[Answer]:
        """Run the load (and the `during` coroutines beside it) to the end; every answer, in sending order."""
        asyncio.run(self._run(during))
        return self.answers

    async def _run(self, during: tuple[Callable[[Load], Awaitable[None]], ...]) -> None:
        limits = httpx.Limits(max_connections=500, max_keepalive_connections=100)
        total = round(self.rate * self.duration)
        async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, limits=limits) as client:
            self.started = time.monotonic()
            side = [asyncio.create_task(action(self)) for action in during]
            calls: list[asyncio.Task[None]] = []
            for i in range(total):
                due = self.started + i / self.rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                self.late = max(self.late, time.monotonic() - due)
                answer = Answer(self.plan(i), time.monotonic(), 0.0)
                self.answers.append(answer)
                calls.append(asyncio.create_task(self._call(client, answer)))
            await asyncio.gather(*calls)
            await asyncio.gather(*side)

    async def _call(self, client: httpx.AsyncClient, answer: Answer) -> None:
        request = answer.request
        try:
            response = await client.request(
                request.method, request.path, headers=request.headers, json=request.json, params=request.params
            )
        except httpx.HTTPError as exc:
            answer.done = time.monotonic()
            answer.error = f"{type(exc).__name__}: {exc}"
            return
        answer.done = time.monotonic()
        answer.status = response.status_code
        answer.retry_after = response.headers.get("Retry-After")
        with contextlib.suppress(ValueError):
            body = response.json()
            if response.status_code == 200:
                answer.result = body.get("result")
            else:
                answer.code = (body.get("error") or {}).get("code")
        self.answered(answer)

    def at(self, seconds: float) -> float:
        """The monotonic time `seconds` into the load."""
        return self.started + seconds


def percentile(values: list[float], fraction: float) -> float:
    """The `fraction` quantile (nearest rank) of `values`; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def tally(answers: list[Answer]) -> dict[str, int]:
    """Answers counted by status (and error code), e.g. `{"200": 700, "503 unavailable": 140}`."""
    counts: dict[str, int] = {}
    for answer in answers:
        key = (
            "transport error" if answer.status is None else f"{answer.status}{' ' + answer.code if answer.code else ''}"
        )
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


# --- a receiver that resets ---------------------------------------------------------------------------------


class Resetter:
    """A loopback TCP server that reads the start of each request and closes the connection with a reset
    (SO_LINGER 0: RST, not FIN), never answering. `connections` counts what arrived."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(128)
        self._socket.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/hooks"
        self.connections = 0
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def __enter__(self) -> Resetter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._thread.join(timeout=10)
        self._socket.close()
