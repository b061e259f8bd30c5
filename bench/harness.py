"""`bin/bench`: the benchmarks of docs/benchmarks.md, every figure measured beside a reference in the same run.

It makes a private database (`hire_bench_<random>`) on the PostgreSQL server of TEST_DATABASE_URL or
DATABASE_URL (else 127.0.0.1:5432), seeds it with COPY, starts `bin/serve --no-worker` and the bare Starlette
ceiling (`bench.ceiling`), one uvicorn process each, and drives them with `wrk -t1 -c32` interleaved
(ceiling, service, ceiling, service, ...) over rounds. Then one `bin/worker` drains a backlog of webhook
events into a loopback receiver, and payment notifications are sent when the billing provider exists.

Rate limits stay on and count in the server's memory (`RATE_LIMIT_STORAGE=memory://`): every request
rotates among the API keys (or session tokens) of many enterprise accounts, so that their combined budget
(accounts × 1,000/minute) is far above what one process can serve. Every process started here is stopped
and the database dropped at the end, also on Ctrl-C or SIGTERM. Everything listens on loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import psycopg

from bench.config import BOARD_TEXT, CHANGES, FULL, QUICK, SEARCH, SMALL_TEXT, WEBHOOKS, BenchError, Config, Progress
from bench.processes import free_port, interrupt, private_database, server_dsn, service_env, shielded
from bench.receiver import Receiver
from bench.report import explanations, machine, table
from bench.results import Report
from bench.scenarios import Bench
from bench.seeding import seed
from bench.targets import Targets
from bench.wrk import ensure_wrk
from rpc.ops.cli import SERVERS, WORKER_CONCURRENCY
from rpc.settings import Settings

# ---------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------

# Scenarios with a database and processes of their own, outside the table (docs/benchmarks.md): `--only NAME`
# runs one, with `--quick` and `--json` handed on; each is also `python -m bench.<module>`.
APART = {
    "feed": "bench.public_feed",
    "alerts": "bench.alerts",
    "restarts": "bench.restarts",
    "recover": "bench.recover",
    "interviews": "bench.interviews",
    "replica": "bench.replicas",
}


def options(argv: list[str] | None) -> tuple[Config, Path | None, Path | None, tuple[str, list[str]] | None]:
    """The table's configuration, where to write its JSON and logs; or, for a scenario apart, its arguments."""
    parser = argparse.ArgumentParser(prog="bin/bench", description=main.__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 jobs, one short round: under a minute")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--seconds", type=int, help="seconds per wrk run (default 10, quick 2)")
    parser.add_argument("--rounds", type=int, help="rounds of every scenario (default 3, quick 1)")
    parser.add_argument(
        "--only", choices=[CHANGES, SEARCH, WEBHOOKS, *APART], help="measure only this scenario (docs/benchmarks.md)"
    )
    parser.add_argument("--logs", type=Path, metavar="DIR", help="keep the output of every process started in DIR")
    parser.add_argument("--concurrency", type=int, help=f"bin/worker --concurrency (default {WORKER_CONCURRENCY})")
    parser.add_argument(
        "--server", choices=SERVERS, default="uvicorn", help="bin/serve --server (the ceiling: uvicorn)"
    )
    parser.add_argument(
        "--text",
        choices=[SMALL_TEXT, BOARD_TEXT],
        default=SMALL_TEXT,
        help="the jobs' text: a small vocabulary, or one like a real board's (docs/benchmarks.md)",
    )
    parser.add_argument(
        "--sizes",
        type=lambda text: tuple(int(size) for size in text.split(",")),
        metavar="N,N",
        help="the numbers of jobs measured, smallest first (default 10000,1000000; quick 10000)",
    )
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.only in APART:
        handed = ["--quick"] * args.quick + (["--json", str(args.json)] if args.json is not None else [])
        return config, None, None, (APART[args.only], handed)
    if args.concurrency is not None:
        config = dataclasses.replace(config, worker_concurrency=max(1, args.concurrency))
    if args.seconds is not None:
        config = dataclasses.replace(config, seconds=max(1, args.seconds))
    if args.rounds is not None:
        config = dataclasses.replace(config, rounds=max(1, args.rounds))
    if args.only is not None:
        config = dataclasses.replace(config, only=args.only)
    if args.sizes:
        config = dataclasses.replace(config, sizes=tuple(sorted(args.sizes)))
    return dataclasses.replace(config, server=args.server, text=args.text), args.json, args.logs, None


def keep_logs(work: Path, logs: Path) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    for log in work.glob("*.log"):
        shutil.copy(log, logs / log.name)


def benchmark(config: Config, say: Progress, logs: Path | None) -> Report:
    """Everything, with every process stopped and the database dropped however it ends."""
    stack = contextlib.ExitStack()
    try:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hire-bench-")))
        if logs is not None:
            stack.callback(keep_logs, work, logs)  # after the processes have stopped, before the directory goes
        wrk = ensure_wrk(say)
        url = stack.enter_context(private_database(server_dsn()))
        say(f"private database {psycopg.conninfo.conninfo_to_dict(url).get('dbname')}")
        receiver = stack.enter_context(Receiver())
        env = service_env(url, free_port(), work)
        seeded = asyncio.run(seed(url, Settings.from_env(env), config, receiver.url, say))
        bench = Bench(config, stack, Targets(stack, work, env, config.server, say), seeded, receiver, wrk, say)
        about = machine(bench.wrk.version() or wrk, url, config)
        rows = bench.run()
        notes = [*explanations(config), *bench.notes]
        return Report(machine=about, scenarios=rows, notes=notes)
    finally:
        with shielded():
            say("stopping processes, dropping the private database")
            stack.close()


def main(argv: list[str] | None = None) -> None:
    """bin/bench: seed a private database, measure the service beside a bare Starlette ceiling, print a table."""
    config, json_path, logs, apart = options(argv)
    if apart is not None:
        module, handed = apart
        importlib.import_module(module).main(handed)
        return
    say = Progress()
    signal.signal(signal.SIGINT, interrupt)  # also when started with SIGINT ignored (a background job)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        report = benchmark(config, say, logs)
    except BenchError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: processes stopped, private database dropped\n")
        raise SystemExit(130) from None
    sys.stdout.write(table(report.scenarios) + "\n\n" + "\n".join(f"- {note}" for note in report.notes) + "\n")
    if json_path is not None:
        json_path.write_bytes(msgspec.json.format(msgspec.json.encode(report)) + b"\n")
    say(f"done in {time.monotonic() - say.started:.0f} s")
