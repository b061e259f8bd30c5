"""The processes a run starts (servers, workers, wrk) and stops, also on Ctrl-C or SIGTERM; and the private
database they share."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

import httpx
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.config import _OWN_SETTINGS, HOST, LOCAL_SERVER, READY_SECONDS, ROOT, STOP_SECONDS, BenchError

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


def interrupt(signum: int, frame: FrameType | None) -> None:
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
