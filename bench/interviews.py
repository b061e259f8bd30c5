"""The recruiting loop at scale (issue 32): `interviews.create` (its conflict check, its invitations queued) and
an interviewer's week in `interviews.list`, at a thousand and at a million interviews, each beside the unfiltered
`jobs.list` page measured in the same round. The targets: at a million, each at least 25 % of that `jobs.list`
figure, with the p99 it had at a thousand.

`python -m bench.interviews [--quick] [--json FILE]`, or `bin/bench --only interviews` (`--quick`: a thousand and
ten thousand interviews, one round of 2 s). The data is `bench.calendars`'. Every figure is taken with
`wrk -t1 -c32` from a `bin/serve --no-worker` started just before it, nothing asked ahead; rate limits stay on,
the requests rotating among the API keys of 200 enterprise accounts. Each booking is a new one that conflicts with
nothing, for a new application; with no worker running, its mails and events stay queued as a request leaves
them. After each run of bookings they are deleted again, so that every figure is taken at the size it names.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import psycopg

from bench.calendars import (
    ACCOUNTS,
    JOBS,
    SLOTS,
    Calendar,
    book,
    booking_lines,
    fresh_applications,
    seed_teams,
    week_lines,
)
from bench.config import FULL, QUICK, BenchError, Config, Progress
from bench.meter import Meter, Usage
from bench.processes import free_port, interrupt, private_database, server_dsn, service_env, shielded
from bench.receiver import Receiver
from bench.report import machine
from bench.results import Row, Run, median, rounded, summarize
from bench.targets import Reserve, Targets, read_lines
from bench.wrk import RequestFile, Wrk, WrkSummary, ensure_wrk
from rpc.app import prepare_database
from rpc.ops import admin as ops
from rpc.settings import Settings

SIZES = {False: (1_000, 1_000_000), True: (1_000, 10_000)}
BOOKINGS_A_SECOND = 1_000  # the most the seeded applications allow for; a faster run says so in its notes
WEEK_LINES = 20_000
LIST, CREATE, WEEK = "jobs.list", "interviews.create", "interviews.list (an interviewer's week)"
SHARE_TARGET = 0.25

_QUEUED = "SELECT count(*) FROM mail_messages WHERE kind IN ('interview_candidate', 'interview_interviewer')"
_INTERVIEWS = "SELECT count(*) FROM interviews"
# Seeded interviews were booked days before; `created_at` is stored to the second.
_FORGET = "DELETE FROM interviews WHERE created_at >= to_timestamp(%(since)s) - interval '1 second'"


class Target(msgspec.Struct, kw_only=True):
    """One of the two procedures against its targets at the largest size."""

    name: str
    interviews: int
    share_of_jobs_list: float | None  # the median of each round's own ratio
    p99_ms: float | None
    smallest: int
    p99_ms_at_smallest: float | None
    p99_growth: float | None  # p99 at the largest size / p99 at the smallest


class Figures(msgspec.Struct, kw_only=True):
    machine: dict[str, Any]
    scenarios: list[Row]
    targets: list[Target]
    notes: list[str]


@dataclasses.dataclass
class Loop:
    """What the rounds measure with: the processes, the meter, wrk, and the request files."""

    config: Config
    targets: Targets
    meter: Meter
    wrk: Wrk
    database_url: str
    say: Progress
    jobs_list: RequestFile
    bookings: Reserve
    notes: list[str] = dataclasses.field(default_factory=list)

    def measure(self, requests: RequestFile, first: int = 0) -> tuple[Run, WrkSummary]:
        """One wrk run at a `bin/serve --no-worker` started for it."""
        self.targets.start_service()
        service = self.targets.service
        before = self.meter.sample(service.pid)
        summary = self.wrk.run(self.targets.url, requests, self.config.seconds, first)
        after = self.meter.sample(service.pid)
        if not service.alive():
            raise BenchError(f"{service.name} died during the run:\n{service.tail()}")
        return Run.of(summary, Usage.between(before, after)), summary

    def count(self, statement: str) -> int:
        return int(self.meter.query(statement)[0][0])

    def book(self) -> tuple[Run, float] | None:
        """A run of bookings, each sent once, and the invitations queued per booking; then the bookings are
        deleted (with their interviewers' rows), the calendar back at its size. None when too few are left."""
        left = self.bookings.left()
        if left < self.config.connections * 4:
            self.notes.append(f"{CREATE}: not enough seeded bookings left for another run")
            return None
        queued = self.count(_QUEUED)
        since = float(self.meter.query("SELECT extract(epoch FROM now())")[0][0])
        run, summary = self.measure(self.bookings.requests, self.bookings.first)
        self.targets.service.stop()  # it answers what wrk left in flight, and those commit before they are counted
        self.bookings.used(summary, self.config.connections)
        if summary.requests > left:
            self.notes.append(f"{CREATE}: the seeded bookings ran out during a run; later ones repeated earlier ones")
        invitations = self.count(_QUEUED) - queued
        booked = asyncio.run(forget(self.database_url, since))
        return run, invitations / max(1, booked)

    def said(self, name: str, run: Run) -> Run:
        self.say(f"  {name}: {run.rate:,.0f}/s, p99 {run.p99_ms:.1f} ms, {run.errors} errors")
        return run

    def size(self, size: int, weeks: RequestFile, per_week: float) -> list[Row]:
        """The rounds at one size: jobs.list, the week, the bookings, each on a server started for it."""
        runs: dict[str, list[Run]] = {LIST: [], WEEK: [], CREATE: []}
        shares: dict[str, list[float]] = {WEEK: [], CREATE: []}
        invitations: list[float] = []
        for number in range(1, self.config.rounds + 1):
            self.say(f"round {number}/{self.config.rounds} at {size:,} interviews")
            reference = self.said(LIST, self.measure(self.jobs_list)[0])
            week = self.said(WEEK, self.measure(weeks)[0])
            runs[LIST].append(reference)
            runs[WEEK].append(week)
            shares[WEEK].append(week.rate / reference.rate)
            booked = self.book()
            if booked is not None:
                run, per_booking = booked
                runs[CREATE].append(self.said(CREATE, run))
                shares[CREATE].append(run.rate / reference.rate)
                invitations.append(per_booking)
        details = {
            LIST: {},
            WEEK: {"interviews_in_a_week_asked": round(per_week, 1)},
            CREATE: {"invitations_queued_per_booking": rounded(median(invitations), 2)},
        }
        rows = []
        for name, unit in ((LIST, "requests/s"), (WEEK, "requests/s"), (CREATE, "bookings/s")):
            if runs[name]:
                row = summarize(name, JOBS, unit, runs[name], cores=os.cpu_count() or 1)
                row.details.update(interviews=size, **details[name])
                if name in shares:
                    row.details["share_of_jobs_list"] = rounded(median(shares[name]), 4)
                rows.append(row)
        return rows


async def forget(url: str, since: float) -> int:
    """Delete the interviews booked since `since` (seeded ones were booked earlier), and vacuum their rows; how
    many there were (wrk's count leaves out those still in flight when it stopped)."""
    async with await ops.connect(url) as conn:
        deleted = (await conn.execute(_FORGET, {"since": since})).rowcount
        await conn.execute("VACUUM ANALYZE interviews, interview_interviewers")
    return deleted


async def prepare(
    url: str, settings: Settings, hook_url: str, largest: int, bookings: int
) -> tuple[Calendar, list[tuple[int, str]]]:
    """The schema, the accounts and their plans for `largest` interviews, and the applications to book for."""
    await prepare_database(settings, url)
    async with await ops.connect(url) as conn:
        calendar = await seed_teams(conn, settings, hook_url, largest)
        applications = await fresh_applications(conn, calendar, bookings)
    return calendar, applications


async def grow(url: str, calendar: Calendar, size: int) -> None:
    """The calendar grown to `size` interviews."""
    async with await ops.connect(url) as conn:
        await book(conn, calendar, size)


def targets_of(rows: Sequence[Row], sizes: Sequence[int]) -> list[Target]:
    """Each procedure at the largest size against its targets, beside its p99 at the smallest."""
    found = {(row.name, row.details["interviews"]): row for row in rows}
    made = []
    for name in (CREATE, WEEK):
        large, small = found.get((name, sizes[-1])), found.get((name, sizes[0]))
        if large is None or small is None:
            continue
        growth = large.p99_ms / small.p99_ms if large.p99_ms and small.p99_ms else None
        made.append(
            Target(
                name=name,
                interviews=sizes[-1],
                share_of_jobs_list=large.details.get("share_of_jobs_list"),
                p99_ms=large.p99_ms,
                smallest=sizes[0],
                p99_ms_at_smallest=small.p99_ms,
                p99_growth=rounded(growth, 3),
            )
        )
    return made


def run(quick: bool, say: Progress, sizes: Sequence[int] = ()) -> Figures:
    """Seed, measure each size in turn, and stop every process and drop the database however it ends."""
    config = dataclasses.replace(QUICK if quick else FULL, accounts=ACCOUNTS)
    sizes = sizes or SIZES[quick]
    if list(sizes) != sorted(sizes) or sizes[-1] > ACCOUNTS * SLOTS:
        raise BenchError(f"give sizes smallest first, at most {ACCOUNTS * SLOTS:,} interviews (the calendar's slots)")
    count = len(sizes) * config.rounds * config.seconds * BOOKINGS_A_SECOND
    stack = contextlib.ExitStack()
    try:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hire-bench-")))
        binary = ensure_wrk(say)
        url = stack.enter_context(private_database(server_dsn()))
        say(f"private database {psycopg.conninfo.conninfo_to_dict(url).get('dbname')}")
        receiver = stack.enter_context(Receiver())
        env = service_env(url, free_port(), work)
        say(f"seeding {ACCOUNTS} enterprise accounts, {JOBS:,} jobs, {count:,} applications to book for")
        calendar, applications = asyncio.run(prepare(url, Settings.from_env(env), receiver.url, sizes[-1], count))
        keys = [team.key for team in calendar.teams]
        loop = Loop(
            config=config,
            targets=Targets(stack, work, env, "uvicorn", say),
            meter=stack.enter_context(contextlib.closing(Meter(url))),
            wrk=Wrk(binary, work, config.connections),
            database_url=url,
            say=say,
            jobs_list=RequestFile.write(work / "jobs-list", read_lines("/v1/jobs.list", keys)),
            bookings=Reserve(RequestFile.write(work / "bookings", booking_lines(calendar, applications))),
        )
        rows: list[Row] = []
        for size in sizes:
            say(f"seeding interviews up to {size:,}")
            asyncio.run(grow(url, calendar, size))
            if loop.count(_INTERVIEWS) != size:
                raise BenchError(f"the calendar holds {loop.count(_INTERVIEWS):,} interviews, not {size:,}")
            lines, per_week = week_lines(calendar, WEEK_LINES)
            rows += loop.size(size, RequestFile.write(work / f"weeks-{size}", lines), per_week)
        about = machine(loop.wrk.version() or binary, url, config)
        return Figures(machine=about, scenarios=rows, targets=targets_of(rows, sizes), notes=loop.notes)
    finally:
        with shielded():
            say("stopping processes, dropping the private database")
            stack.close()


def table(figures: Figures) -> str:
    """The rows as a fixed-width table, then each procedure against its targets, then the notes."""
    lines = [f"{'scenario':40}  {'interviews':>10}  {'req/s':>7}  {'p50 ms':>7}  {'p99 ms':>7}  {'of list':>7}  "
             f"{'srv ms/req':>10}  {'db ms/req':>9}  errors  bound by"]  # fmt: skip
    for row in figures.scenarios:
        share = row.details.get("share_of_jobs_list")
        cells = [
            f"{row.name:40}",
            f"{row.details['interviews']:>10,}",
            f"{row.req_s:>7,.0f}",
            f"{row.p50_ms or 0:>7.2f}",
            f"{row.p99_ms or 0:>7.2f}",
            f"{'-' if share is None else f'{100 * share:.1f}%':>7}",
            f"{row.server_cpu_ms_per_req or 0:>10.3f}",
            f"{row.db_cpu_ms_per_req or 0:>9.3f}",
            f"{row.errors:>6}",
            row.bound_by,
        ]
        lines.append("  ".join(cells))
    for target in figures.targets:
        share = "-" if target.share_of_jobs_list is None else f"{100 * target.share_of_jobs_list:.1f} %"
        lines.append(
            f"- {target.name} at {target.interviews:,} interviews: {share} of jobs.list (target ≥ "
            f"{100 * SHARE_TARGET:.0f} %); p99 {target.p99_ms} ms against {target.p99_ms_at_smallest} ms at "
            f"{target.smallest:,} (×{target.p99_growth}; target: the same)"
        )
    lines += [f"- {note}" for note in figures.notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.interviews", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 interviews, one round of 2 s")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--sizes", metavar="N,N", help="interviews at each size, smallest first (default 1000,1000000)")
    args = parser.parse_args(argv)
    try:
        sizes = tuple(int(size) for size in args.sizes.split(",")) if args.sizes else ()
    except ValueError:
        parser.error("--sizes takes numbers of interviews separated by commas, e.g. 1000,100000")
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        figures = run(args.quick, Progress(), sizes)
    except BenchError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: processes stopped, private database dropped\n")
        raise SystemExit(130) from None
    print(table(figures))
    if args.json is not None:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(figures)) + b"\n")


if __name__ == "__main__":
    main()
