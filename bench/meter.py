"""CPU accounting: the server's and PostgreSQL's CPU time per request, and how busy the machine was."""

from __future__ import annotations

import contextlib
import resource
import time
from dataclasses import dataclass
from typing import Any

import psutil
import psycopg

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
