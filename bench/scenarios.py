"""The scenarios: reads, writes, sync, search and payments, each interleaved with the ceiling."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Sequence
from pathlib import Path

import psutil

from bench import engine, mixes, one_endpoint, search_index, sync
from bench.board import board, material
from bench.churn import Churn
from bench.config import (
    BOARD_TEXT,
    CHANGES,
    CHURN,
    DUPLICATE_SHARE,
    MIX_LINES,
    NEVER_SEEN_LINES,
    PAYMENTS,
    QUERY,
    SEARCH,
    WRITES,
    BenchError,
    Config,
    Progress,
)
from bench.hooks import Hooks
from bench.meter import Meter, Usage
from bench.processes import Child
from bench.receiver import Receiver
from bench.results import Row, Run, median, rounded, summarize
from bench.seeding import Seeded, grow_jobs, job_text
from bench.targets import Read, Reserve, Tally, Targets, payment_lines, read_lines, write_lines
from bench.wrk import RequestFile, Wrk, WrkSummary

UNSEEN_SEARCHES = "jobs.search (never seen)"
UNSEEN_LISTS = "jobs.list filters (never seen)"
_VERDICTS = "SELECT verdict, count(*) FROM payment_notifications GROUP BY verdict ORDER BY verdict"


class Bench:
    """The scenarios, measured on the targets over the rounds."""

    def __init__(
        self,
        config: Config,
        stack: contextlib.ExitStack,
        targets: Targets,
        seeded: Seeded,
        receiver: Receiver,
        wrk: str,
        say: Progress,
    ) -> None:
        self.config, self.targets, self.seeded, self.receiver, self.say = config, targets, seeded, receiver, say
        self.database_url = targets.env["DATABASE_URL"]
        self.cores = os.cpu_count() or 1
        self.meter = stack.enter_context(contextlib.closing(Meter(self.database_url)))
        self.wrk = Wrk(wrk, targets.work, config.connections)
        self.notes: list[str] = []
        self._request_files()

    def _request_files(self) -> None:
        employers, work = self.seeded.employers, self.targets.work
        self.reads = [
            Read(name, target, RequestFile.write(work / f"reads-{n}", read_lines(target, credentials)))
            for n, (name, target, credentials) in enumerate(
                [
                    ("jobs.list", "/v1/jobs.list", employers.keys),
                    (f"jobs.list q={QUERY}", f"/v1/jobs.list?q={QUERY}", employers.keys),
                    ("profile.me", "/v1/profile.me", employers.tokens),
                ]
            )
        ]
        rng = random.Random(13)  # noqa: S311 - a reproducible mix, not secrets
        material = self.asked()
        filters, queries = tuple(mixes.list_targets(material)), tuple(mixes.search_targets(rng, material))
        list_mix = RequestFile.write(work / "list-mix", mixes.zipf_lines(filters, employers.keys, MIX_LINES, rng))
        searches = RequestFile.write(work / "search-mix", mixes.zipf_lines(queries, employers.keys, MIX_LINES, rng))
        count = NEVER_SEEN_LINES[self.config.quick]
        # Each never-seen mix's first targets are also answered by the engine alone, in-process (bench.engine).
        self.unseen = {
            UNSEEN_SEARCHES: mixes.never_seen_searches(rng, count, material),
            UNSEEN_LISTS: mixes.never_seen_lists(rng, count, material),
        }
        unseen_searches = mixes.once_each(self.unseen[UNSEEN_SEARCHES], employers.keys)
        unseen_lists = mixes.once_each(self.unseen[UNSEEN_LISTS], employers.keys)
        paced = not self.config.quick  # --quick paces the never-seen searches alone, to stay within a minute
        self.reads += [
            Read("jobs.list one filter (Zipf mix)", "/v1/jobs.list", list_mix, paced=paced),
            Read("jobs.search (Zipf mix)", "/v1/jobs.search", searches, paced=paced),
            Read(f"jobs.search (Zipf mix, {CHURN}/s published+closed)", "/v1/jobs.search", searches, CHURN),
            Read.never_seen(UNSEEN_SEARCHES, "/v1/jobs.search", work / "search-unseen", unseen_searches, paced=True),
            Read.never_seen(UNSEEN_LISTS, "/v1/jobs.list", work / "list-unseen", unseen_lists, paced=paced),
        ]
        self.rss: dict[int, float] = {}  # the most memory the service held at each size, in MB
        self.writes = Reserve(RequestFile.write(work / "writes", write_lines(self.seeded.writes)))
        self.payments: Reserve | None = None
        if self.seeded.payments:
            key, salt = self.targets.env["PAYTR_MERCHANT_KEY"], self.targets.env["PAYTR_MERCHANT_SALT"]
            lines = payment_lines(self.seeded.payments, key, salt, DUPLICATE_SHARE)
            self.payments = Reserve(RequestFile.write(work / "payments", lines))

    def asked(self) -> mixes.Material:
        """What the mixes type: the words of the jobs' text."""
        if self.config.text == BOARD_TEXT:
            return material(board())
        return mixes.SMALL

    # --- running --------------------------------------------------------------------------------------------

    def run(self) -> list[Row]:
        """Every scenario at the first size, then the job reads and the feed at each larger one (or webhook
        delivery alone, or the feed alone)."""
        if self.config.only_webhooks:
            hooks = Hooks(self)
            for number in range(1, self.config.rounds + 1):
                self.say(f"round {number}/{self.config.rounds}")
                hooks.round(number)
            events = one_endpoint.QUICK_EVENTS if self.config.quick else one_endpoint.FULL_EVENTS
            return [hooks.row(0), one_endpoint.measure(hooks, 0, events, 1)]
        if self.config.only == CHANGES:
            return self.changes_only()
        if self.config.only == SEARCH:
            return self.job_reads_only()
        self.targets.start_service()
        self.targets.start_ceiling(self.seeded.employers.keys[0])
        self.warm_up()
        rows = self.first_size(self.config.sizes[0])
        for size in self.config.sizes[1:]:
            rows.extend(self.larger_size(size))
        return rows

    def first_size(self, size: int) -> list[Row]:
        tally, hooks = Tally(), Hooks(self)
        for number in range(1, self.config.rounds + 1):
            self.say(f"round {number}/{self.config.rounds} at {size:,} jobs")
            self.read_round(size, self.reads, tally)
            tally.add(WRITES, self.reserved(self.writes, WRITES))
            if self.payments is not None:
                tally.add(PAYMENTS, self.reserved(self.payments, PAYMENTS))
            hooks.round(number)
        rows = [*self.engine_alone(self.read_rows(size, self.reads, tally)), search_index.row(self, size)]
        if WRITES in tally.service:
            rows.append(self.write_row(size, tally.service[WRITES]))
        if PAYMENTS in tally.service:
            rows.append(self.payment_row(size, tally.service[PAYMENTS]))
        rows.append(hooks.row(size))
        events = one_endpoint.QUICK_EVENTS if self.config.quick else one_endpoint.FULL_EVENTS
        rows.append(one_endpoint.measure(hooks, size, events, 1))
        rows.append(self.changes_row(size))
        return rows

    def changes_only(self) -> list[Row]:
        """`--only jobs.changes`: the feed at each size, nothing else."""
        rows = []
        for size in self.config.sizes:
            self.serve_at(size)
            rows.append(self.changes_row(size))
        return rows

    def job_reads_only(self) -> list[Row]:
        """`--only jobs.search`: the job reads (the list, its filters, the searches, with churn) at each size."""
        self.targets.start_service()
        self.targets.start_ceiling(self.seeded.employers.keys[0])  # it copies a page the service gives
        rows = []
        for size in self.config.sizes:
            rows.extend(self.job_reads(size))
        return rows

    def changes_row(self, size: int) -> Row:
        """The feed followed by one client: a full pass, then incremental ones after recent writes."""
        self.say(f"  {CHANGES}: a full pass over {size:,} jobs, then {sync.INCREMENTAL_PASSES} incremental ones")
        try:
            figures = sync.measure(self.targets.url, self.database_url, self.seeded.employers.keys)
        except sync.SyncError as exc:
            raise BenchError(str(exc)) from exc
        details, pages = figures.details(), figures.page_ms()
        self.say(f"  {CHANGES}: {details['full_pass_seconds']} s full pass, incremental {details['incremental_ms']} ms")
        return Row(
            name=CHANGES,
            jobs=size,
            unit="jobs/s (full pass)",
            req_s=figures.jobs_per_s,
            p50_ms=pages["median"],
            p99_ms=pages["p99"],
            errors=0,
            rounds=1,
            details=details,
        )

    def larger_size(self, size: int) -> list[Row]:
        """Grow the jobs to `size`, restart the service (fresh plans), and measure the job reads again."""
        return [*self.job_reads(size), self.changes_row(size)]

    def serve_at(self, size: int) -> None:
        """Grow the jobs to `size` (unless it is the size seeded) and start the service afresh (fresh plans)."""
        if size != self.config.sizes[0]:
            self.say(f"growing to {size:,} jobs (COPY, indexes rebuilt after)")
            accounts = self.seeded.employers.accounts
            asyncio.run(grow_jobs(self.database_url, size, accounts, job_text(self.config.text)))
        self.targets.start_service()

    def job_reads(self, size: int) -> list[Row]:
        """The job reads at `size`, on a service started afresh (the jobs grown to it first)."""
        self.serve_at(size)
        self.warm_up()
        reads, tally = [read for read in self.reads if read.name.startswith("jobs.")], Tally()
        for number in range(1, self.config.rounds + 1):
            self.say(f"round {number}/{self.config.rounds} at {size:,} jobs")
            self.read_round(size, reads, tally)
        return [*self.engine_alone(self.read_rows(size, reads, tally)), search_index.row(self, size)]

    def measure(
        self, child: Child, url: str, requests: RequestFile, first: int = 0, rate: float | None = None
    ) -> tuple[Run, WrkSummary]:
        """One wrk run (at a constant `rate` when given), with the CPU the measured process, the database and wrk
        spent over it."""
        before = self.meter.sample(child.pid)
        summary = self.wrk.run(url, requests, self.config.seconds, first, rate)
        after = self.meter.sample(child.pid)
        if not child.alive():
            raise BenchError(f"{child.name} died during the run:\n{child.tail()}")
        return Run.of(summary, Usage.between(before, after)), summary

    def warm_up(self) -> None:
        """The ceiling's connections made before anything counts. The service is not warmed: every scenario
        measures a process started just before it, with nothing asked ahead, as after a restart or a deploy."""
        read = self.reads[0]
        self.wrk.run(self.targets.ceiling_url + read.target, read.requests, self.config.warmup)
        if not self.targets.ceiling.alive():
            raise BenchError(f"the ceiling died while warming up:\n{self.targets.ceiling.tail()}")

    def read_round(self, size: int, reads: Sequence[Read], tally: Tally) -> None:
        """Each read: the ceiling, then the service, back to back with the same requests."""
        for read in reads:
            first = read.once.first if read.once else 0
            ceiling, _ = self.measure(
                self.targets.ceiling, self.targets.ceiling_url + read.target, read.requests, first
            )
            self.targets.start_service()  # a fresh process: nothing asked of it before the run
            churn = Churn(self.targets.url, self.seeded.employers.keys, read.churn_per_second or 1)
            with churn if read.churn_per_second else contextlib.nullcontext():
                service, summary = self.measure(
                    self.targets.service, self.targets.url + read.target, read.requests, first
                )
            if read.once:
                read.once.used(summary, self.config.connections)
            if read.paced:
                tally.add_paced(read.name, service.rate / 2, self.paced(read, service.rate / 2))
            held = psutil.Process(self.targets.service.pid).memory_info().rss / 1e6
            self.rss[size] = max(self.rss.get(size, 0.0), held)
            if read.churn_per_second:
                rate = churn.published / churn.seconds if churn.seconds else 0.0
                self.say(
                    f"  meanwhile {churn.published:,} jobs published ({rate:.1f}/s) and {churn.closed:,} closed, "
                    f"{churn.failed} calls failed"
                )
            tally.add(read.name, service, ceiling)
            self.say(
                f"  {read.name}: {service.rate:,.0f} req/s (p99 {service.p99_ms:.1f} ms, {service.errors} errors) "
                f"beside a ceiling of {ceiling.rate:,.0f} req/s"
            )

    def paced(self, read: Read, rate: float) -> Run:
        """`read` offered at a constant `rate` to a process started just before (a p99 at saturation measures the
        queue, not the service)."""
        self.targets.start_service()
        first = read.once.first if read.once else 0
        run, summary = self.measure(self.targets.service, self.targets.url + read.target, read.requests, first, rate)
        if read.once:
            read.once.used(summary, self.config.connections)
        self.say(f"  {read.name} at {rate:,.0f} req/s offered: p99 {run.p99_ms:.1f} ms, {run.errors} errors")
        return run

    def reserved(self, reserve: Reserve, name: str) -> Run | None:
        """One run of requests sent once each; None (with a note) when too few are left."""
        left = reserve.left()
        if left < self.config.connections * 4:
            self.notes.append(f"{name}: not enough seeded requests left for another round")
            return None
        run, summary = self.measure(self.targets.service, self.targets.url, reserve.requests, reserve.first)
        reserve.used(summary, self.config.connections)
        if summary.requests > left:
            self.notes.append(f"{name}: the seeded requests ran out during a run; later ones repeated earlier ones")
        self.say(f"  {name}: {run.rate:,.0f}/s (p99 {run.p99_ms:.1f} ms, {run.errors} not 2xx)")
        return run

    # --- rows -----------------------------------------------------------------------------------------------

    def read_rows(self, size: int, reads: Sequence[Read], tally: Tally) -> list[Row]:
        rows = []
        for read in reads:
            row = summarize(
                read.name, size, "requests/s", tally.service[read.name], tally.ceiling[read.name], self.cores
            )
            paced = tally.paced.get(read.name, [])
            if paced:
                runs = [run for _, run in paced]
                row.details["at_half_rate"] = {
                    "offered_req_s": rounded(median([offered for offered, _ in paced]), 1),
                    "req_s": rounded(median([run.rate for run in runs]), 1),
                    "p50_ms": rounded(median([run.p50_ms for run in runs]), 2),
                    "p99_ms": rounded(median([run.p99_ms for run in runs]), 2),
                    "errors": sum(run.errors for run in runs),
                }
            rows.append(row)
        return rows

    def engine_alone(self, rows: list[Row]) -> list[Row]:
        """The never-seen rows with what the engine alone spends on their first queries (`bench.engine`), over
        the index the last server process served, and the server's CPU per call as a multiple of it."""
        view, timed = engine.served_view(self.database_url, Path(self.targets.env["DATA_DIR"]) / "search")
        for row in rows:
            if row.name not in self.unseen:
                continue
            figures = engine.measure(view, timed, self.unseen[row.name][: engine.QUERIES[self.config.quick]])
            if row.server_cpu_ms_per_req and figures["engine_cpu_ms"]:
                figures["server_cpu_to_engine"] = round(row.server_cpu_ms_per_req / figures["engine_cpu_ms"], 2)
            row.details["engine_alone"] = figures
            self.say(f"  {row.name}, the engine alone: {figures}")
        return rows

    def write_row(self, size: int, runs: list[Run]) -> Row:
        row = summarize(WRITES, size, "writes/s", runs, cores=self.cores)
        row.details["what"] = "reviewed → interview_scheduled, a different application each request; 200s only"
        row.details["deliveries_per_write"] = 1
        return row

    def payment_row(self, size: int, runs: list[Run]) -> Row:
        row = summarize(PAYMENTS, size, "notifications/s", runs, cores=self.cores)
        verdicts = {str(name): int(count) for name, count in self.meter.query(_VERDICTS)}
        row.details.update(duplicates=DUPLICATE_SHARE, verdicts=verdicts)
        if row.errors or set(verdicts) - {"applied", "duplicate"}:
            self.notes.append(
                f"{PAYMENTS}: not every notification was applied or recognised as a duplicate; see the verdicts "
                "(the bench's PayTR fields may not match procedures/paytr.py)"
            )
        return row
