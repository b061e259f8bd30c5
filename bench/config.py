"""The benchmark's settings (quick and full), its constants and word lists, and its progress lines."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rpc.ops.cli import WORKER_CONCURRENCY

ROOT = Path(__file__).resolve().parent.parent
LOCAL_SERVER = "postgresql://127.0.0.1:5432/postgres"
HOST = "127.0.0.1"
SCOPES = ("read:jobs", "write:jobs", "read:applications", "write:applications", "read:profile")
PLAN = "enterprise"
TOKEN_SECONDS = 6 * 3600
QUERY = "python"
MIX_LINES = 20_000  # request lines of a Zipf mix (each names its own target)
# Request lines of a never-seen mix, each target made at random and sent once: more than any run sends.
NEVER_SEEN_LINES = {True: 30_000, False: 150_000}
CHURN = 20  # jobs published (and as many closed) a second during the churn scenario
WRITE_TARGET = "interview_scheduled"
HOOK_EVENTS = ("application.status_changed",)
DUPLICATE_SHARE = 0.3
WRK_TIMEOUT = "10s"
READY_SECONDS = 300.0  # a service at a million jobs builds its search index first
STOP_SECONDS = 15.0

# Settings of the service that the bench sets itself; anything else in the environment (DB_POOL_*) passes on.
_OWN_SETTINGS = (
    "DATABASE_URL",
    "TEST_DATABASE_URL",
    "SERVICE_",
    "PUBLIC_URL",
    "DATA_DIR",
    "RATE_LIMIT_",
    "WEBHOOK_",
    "WORKER_",
    "AUTH_",
    "PAYTR_",
    "FORWARDED_",
    "SIGNIN_",
)

LEVELS = ("Junior", "Senior", "Staff", "Lead", "Principal", "")
FIELDS = (
    "Python", "Go", "Java", "TypeScript", "Rust", "Data", "Cloud", "Frontend",
    "Backend", "Mobile", "Security", "Machine Learning", "Platform", "Site Reliability", "QA", "Embedded",
)  # fmt: skip
ROLES = ("Engineer", "Developer", "Analyst", "Architect", "Manager", "Scientist", "Consultant", "Designer")
COMPANIES = (
    "Anatolia Software", "Bosphorus Labs", "Galata Payments", "Kapadokya Tech", "Marmara Data", "Ege Dijital",
    "Northwind Traders", "Globex", "Initech", "Umbrella Health", "Hooli", "Pied Piper", "Vandelay Imports",
    "Cyberdyne Systems", "Tyrell Robotics", "Aperture Science", "Wayne Logistics", "Stark Industries",
    "Oceanic Airlines", "Monarch Solutions", "Acme Analytics", "Soylent Foods", "Wonka Confectionery",
    "Black Mesa Energy", "Gringotts Finance", "Blue Sun Media", "Massive Dynamic", "Dunder Mifflin",
)  # fmt: skip
LOCATIONS = (
    "Istanbul", "Ankara", "Izmir", "Bursa", "Antalya", "Berlin", "Munich", "London", "Dublin", "Amsterdam",
    "Paris", "Madrid", "Barcelona", "Lisbon", "Warsaw", "Prague", "Vienna", "Zurich", "Stockholm", "Copenhagen",
    "New York", "Toronto", "Remote", "Remote (EU)", "Remote (Turkey)", "İstanbul", "İzmir", "Eskişehir",
    "Muğla", "Çanakkale", "München", "Zürich", "Kraków",
)  # fmt: skip
# One job in ten is advertised in Turkish: accented titles for a search that must ignore the marks.
TURKISH_TITLES = (
    "Kıdemli Yazılım Mühendisi", "Yazılım Geliştirici", "Veri Analisti", "Ürün Yöneticisi", "Satış Danışmanı",
    "Müşteri İlişkileri Uzmanı", "Grafik Tasarımcı", "Öğretmen", "Muhasebe Uzmanı", "Backend Geliştirici",
)  # fmt: skip
EMPLOYMENT_TYPES = ("full_time", "part_time", "contract", "internship", "temporary", r"\N")


# The jobs' text `--text` may name: the small vocabulary, or one like a real board's (bench.board).
SMALL_TEXT = "small"
BOARD_TEXT = "board"

# The scenarios `--only` may name.
WRITES = "applications.update_status"
CHANGES = "jobs.changes"
SEARCH = "jobs.search"
WEBHOOKS = "webhooks"
PAYMENTS = "payments.notify"


class BenchError(Exception):
    """The benchmark cannot go on; the message says why."""


# ---------------------------------------------------------------------------------------------------------
# Configuration and progress
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """How much to seed and how long to measure."""

    quick: bool
    seconds: int  # one wrk run
    warmup: int
    rounds: int
    sizes: tuple[int, ...]
    connections: int
    accounts: int  # enterprise accounts whose keys and tokens the requests rotate among
    candidates: int
    applications: int
    webhook_events: int  # the backlog one worker drains, per round
    worker_concurrency: int  # bin/worker --concurrency: attempts in flight
    webhook_rate: float  # events/s emitted for the latency figures (less if the worker drained slower)
    paced_seconds: int  # how long they are emitted at that rate
    payments: int
    only: str | None = None  # one scenario alone (`--only`): the feed at every size, or webhook delivery
    server: str = "uvicorn"  # bin/serve --server: the HTTP server under the service (the ceiling stays uvicorn)
    text: str = "small"  # the jobs' text: the small seed's (`SMALL_TEXT`) or a real board's (`BOARD_TEXT`, bench.board)

    @property
    def only_webhooks(self) -> bool:
        """Seed the accounts and their endpoints, measure webhook delivery, nothing else."""
        return self.only == WEBHOOKS


QUICK = Config(
    quick=True,
    seconds=2,
    warmup=1,
    rounds=1,
    sizes=(10_000,),
    connections=32,
    accounts=100,
    candidates=1_000,
    applications=10_000,
    webhook_events=1_000,
    worker_concurrency=WORKER_CONCURRENCY,
    webhook_rate=1_000.0,
    paced_seconds=2,
    payments=3_000,
)
FULL = Config(
    quick=False,
    seconds=10,
    warmup=2,
    rounds=3,
    sizes=(10_000, 1_000_000),
    connections=32,
    accounts=1_000,
    candidates=5_000,
    applications=150_000,
    webhook_events=5_000,
    worker_concurrency=WORKER_CONCURRENCY,
    webhook_rate=1_000.0,
    paced_seconds=10,
    payments=40_000,
)


class Progress:
    """Progress lines on stderr, with the time since the start."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        sys.stderr.write(f"[{time.monotonic() - self.started:6.1f}s] {message}\n")
        sys.stderr.flush()
