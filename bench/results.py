"""Results: a run's figures, a scenario's row of the report, and how they are summarized."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from bench.meter import Usage
from bench.wrk import WrkSummary

# ---------------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One measured run: answers that counted, errors, throughput, latency and CPU."""

    ok: int
    errors: int
    rate: float
    p50_ms: float | None
    p99_ms: float | None
    usage: Usage

    @classmethod
    def of(cls, summary: WrkSummary, usage: Usage) -> Run:
        return cls(
            ok=summary.ok,
            errors=summary.errors,
            rate=summary.ok / (summary.duration_us / 1e6),
            p50_ms=summary.p50_us / 1000,
            p99_ms=summary.p99_us / 1000,
            usage=usage,
        )

    def ms_per(self, seconds: float | None) -> float | None:
        return None if seconds is None or self.ok == 0 else 1000 * seconds / self.ok


class Row(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One scenario at one size, as printed and as written to `--json`."""

    name: str
    jobs: int
    unit: str
    req_s: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    rounds: int
    ceiling_req_s: float | None = None
    ratio_to_ceiling: float | None = None
    server_cpu_ms_per_req: float | None = None
    db_cpu_ms_per_req: float | None = None
    load_generator_cpu_ms_per_req: float | None = None
    cpu_pct: dict[str, float] = msgspec.field(default_factory=dict)
    bound_by: str = ""
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class Report(msgspec.Struct, kw_only=True):
    machine: dict[str, Any]
    scenarios: list[Row]
    notes: list[str]


def median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def bound_by(pct: dict[str, float], cores: int, process_name: str = "server") -> str:
    """The likeliest limit: a single-threaded process near a full core, else the machine, else waiting."""
    process, generator, database = pct["server"], pct["load_generator"], pct["database"]
    if process >= 85 and process >= generator:
        return f"{process_name} CPU ({process:.0f}% of a core)"
    if generator >= 85:
        return f"load generator CPU ({generator:.0f}%)"
    if pct["machine"] >= 90 * cores:
        return f"machine CPU ({pct['machine']:.0f}%/{cores * 100}, others {pct['others']:.0f}%)"
    if database >= max(process, 50):
        return f"database CPU ({database:.0f}%)"
    return f"waits ({process_name} {process:.0f}%, db {database:.0f}%)"


def summarize(
    name: str,
    jobs: int,
    unit: str,
    runs: Sequence[Run],
    ceilings: Sequence[Run] = (),
    cores: int = 1,
    process: str = "server",
) -> Row:
    """Medians over the rounds; the ratio to the ceiling is the median of each round's own ratio."""
    pct_keys = ("server", "load_generator", "database", "machine", "others")
    pct = {key: median([run.usage.percent()[key] for run in runs]) or 0.0 for key in pct_keys}
    row = Row(
        name=name,
        jobs=jobs,
        unit=unit,
        req_s=round(median([run.rate for run in runs]) or 0.0, 1),
        p50_ms=rounded(median([run.p50_ms for run in runs]), 2),
        p99_ms=rounded(median([run.p99_ms for run in runs]), 2),
        errors=sum(run.errors for run in runs),
        rounds=len(runs),
        server_cpu_ms_per_req=rounded(median([run.ms_per(run.usage.process) for run in runs]), 3),
        db_cpu_ms_per_req=rounded(median([run.ms_per(run.usage.database) for run in runs]), 3),
        load_generator_cpu_ms_per_req=rounded(median([run.ms_per(run.usage.load_generator) for run in runs]), 3),
        cpu_pct=pct,
        bound_by=bound_by(pct, cores, process),
    )
    if ceilings:
        row.ceiling_req_s = round(median([run.rate for run in ceilings]) or 0.0, 1)
        ratios = [run.rate / top.rate for run, top in zip(runs, ceilings, strict=True) if top.rate]
        row.ratio_to_ceiling = rounded(median(ratios), 4)
        ceiling_cpu = median([top.ms_per(top.usage.process) for top in ceilings])
        row.details["ceiling_server_cpu_ms_per_req"] = rounded(ceiling_cpu, 3)
    return row
