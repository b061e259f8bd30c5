"""The report: the machine, the table of rows and what each column means."""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import psycopg

from bench import sync
from bench.config import Config
from bench.results import Row

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
