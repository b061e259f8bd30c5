"""What a scenario asks for: request lines for reads, writes and payment notifications, and their tally."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import random
import sys
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import msgspec

from bench.config import HOST, WRITE_TARGET, BenchError, Progress
from bench.processes import Child, free_port, script, stop_all, wait_ready
from bench.results import Run
from bench.seeding import Write
from bench.wrk import RequestFile, WrkSummary

# ---------------------------------------------------------------------------------------------------------
# The scenarios
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Reserve:
    """Requests that may be sent once each (writes), handed out run after run."""

    requests: RequestFile
    first: int = 0

    def left(self) -> int:
        return self.requests.count - self.first

    def used(self, summary: WrkSummary, connections: int) -> None:
        """Skip what was sent, and what may have been in flight when wrk stopped."""
        self.first += summary.requests + summary.timeouts + connections


@dataclass(frozen=True, slots=True)
class Read:
    """An HTTP read measured beside the ceiling."""

    name: str
    target: str
    requests: RequestFile
    churn_per_second: float = 0.0  # jobs published and closed while the service is measured (bench.churn)
    once: Reserve | None = None  # lines sent once each (a never-seen mix): no target is ever asked twice
    paced: bool = False  # also measured offered at half the rate it reached, on another fresh process

    @classmethod
    def never_seen(
        cls, name: str, target: str, path: Path, lines: list[tuple[str, str, str, str, str]], *, paced: bool
    ) -> Read:
        requests = RequestFile.write(path, lines)
        return cls(name, target, requests, once=Reserve(requests), paced=paced)


def read_lines(target: str, credentials: Sequence[str]) -> list[tuple[str, str, str, str, str]]:
    return [("GET", target, f"Bearer {credential}", "", "") for credential in credentials]


def write_lines(writes: Sequence[Write]) -> list[tuple[str, str, str, str, str]]:
    return [
        (
            "POST",
            "/v1/applications.update_status",
            f"Bearer {write.key}",
            "application/json",
            msgspec.json.encode({"id": write.application_id, "status": WRITE_TARGET}).decode(),
        )
        for write in writes
    ]


def paytr_body(oid: str, amount: int, key: str, salt: str) -> str:
    """A PayTR success notification as PayTR sends it: form fields, hash = base64 HMAC-SHA256 of
    merchant_oid + salt + status + total_amount, keyed with the merchant key."""
    total = str(amount)
    digest = hmac.new(key.encode(), f"{oid}{salt}success{total}".encode(), hashlib.sha256).digest()
    fields = {
        "merchant_oid": oid,
        "status": "success",
        "total_amount": total,
        "hash": base64.b64encode(digest).decode(),
        "failed_reason_code": "",
        "failed_reason_msg": "",
        "test_mode": "1",
        "payment_type": "card",
        "currency": "TL",
        "payment_amount": total,
    }
    return urllib.parse.urlencode(fields)


def payment_lines(
    payments: Sequence[tuple[str, int]], key: str, salt: str, duplicates: float
) -> list[tuple[str, str, str, str, str]]:
    """Every payment notified once, and `duplicates` of all notifications repeats of a recent one."""
    rng = random.Random(13)  # noqa: S311 - reproducible order, not secrets
    bodies: list[str] = []
    pending = iter(payments)
    while True:
        if bodies and rng.random() < duplicates:
            bodies.append(bodies[max(0, len(bodies) - 1 - rng.randrange(64))])
            continue
        payment = next(pending, None)
        if payment is None:
            break
        bodies.append(paytr_body(payment[0], payment[1], key, salt))
    form = "application/x-www-form-urlencoded"
    return [("POST", "/api/webhooks/paytr", "", form, body) for body in bodies]


class Targets:
    """The processes measured: `bin/serve --no-worker`, the ceiling, and `bin/worker`s; all stopped at the end."""

    def __init__(
        self, stack: contextlib.ExitStack, work: Path, env: dict[str, str], server: str, say: Progress
    ) -> None:
        self.work, self.env, self.server, self.say = work, env, server, say
        self.port = int(env["PUBLIC_URL"].rsplit(":", 1)[1])
        self.ceiling_port = free_port()
        self.children: list[Child] = []
        self._service: Child | None = None
        self._ceiling: Child | None = None
        stack.callback(lambda: stop_all(self.children))

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ceiling_url(self) -> str:
        return f"http://{HOST}:{self.ceiling_port}"

    @property
    def service(self) -> Child:
        if self._service is None:
            raise BenchError("the service is not running")
        return self._service

    @property
    def ceiling(self) -> Child:
        if self._ceiling is None:
            raise BenchError("the ceiling is not running")
        return self._ceiling

    def start(self, name: str, argv: list[str]) -> Child:
        """A child process, stopped at the end of the run at the latest."""
        child = Child(f"{len(self.children) + 1:02d}-{name}", argv, self.env, self.work)
        self.children.append(child)
        return child

    def start_service(self) -> float:
        """`bin/serve --no-worker` on the bench's port (stopped first when running), ready: its search index
        opened (or built) and caught up. The seconds from its start to ready."""
        if self._service is not None:
            self._service.stop()
        argv = [*script("serve"), "--no-worker", "--server", self.server, "--host", HOST, "--port", str(self.port)]
        started = time.monotonic()
        self._service = self.start("serve", argv)
        wait_ready(self._service, f"{self.url}/readyz")
        seconds = time.monotonic() - started
        self.say(f"bin/serve --no-worker --server {self.server} is up on {self.url}, ready in {seconds:.1f} s")
        return seconds

    def start_ceiling(self, key: str) -> None:
        """The ceiling app, answering the bytes of the service's own first `jobs.list` page."""
        page = httpx.get(f"{self.url}/v1/jobs.list", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        if page.status_code != 200:
            raise BenchError(f"jobs.list answered {page.status_code}: {page.text[:500]}")
        body = self.work / "page.json"
        body.write_bytes(page.content)
        argv = [sys.executable, "-m", "bench.ceiling", "--port", str(self.ceiling_port), "--body", str(body)]
        self._ceiling = self.start("ceiling", argv)
        wait_ready(self._ceiling, f"{self.ceiling_url}/")
        self.say(f"the ceiling is up on {self.ceiling_url} ({len(page.content):,}-byte page)")


@dataclass
class Tally:
    """Runs by scenario over the rounds, and the ceiling runs beside the reads."""

    service: dict[str, list[Run]] = field(default_factory=dict)
    ceiling: dict[str, list[Run]] = field(default_factory=dict)
    paced: dict[str, list[tuple[float, Run]]] = field(default_factory=dict)  # (the rate offered, the run)

    def add(self, name: str, run: Run | None, ceiling: Run | None = None) -> None:
        if run is not None:
            self.service.setdefault(name, []).append(run)
        if ceiling is not None:
            self.ceiling.setdefault(name, []).append(ceiling)

    def add_paced(self, name: str, offered: float, run: Run) -> None:
        self.paced.setdefault(name, []).append((offered, run))
