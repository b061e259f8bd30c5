"""`/metrics` in the Prometheus text format, for allowed addresses only (`METRICS_ALLOW`, default loopback).

Counters and histograms are kept per process (one registry per app, never a module global); the queue
depth and the pool's use are read when scraped. With `bin/serve --workers N`, each process answers for
itself: scrape them one by one, or run one server process per container.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from rpc.core.types import Connection

_QUEUE_DEPTH = "SELECT status::text AS status, count(*) AS n FROM procrastinate_jobs GROUP BY status"
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class DatabaseUse(Protocol):
    """Where this process's reads went (`rpc.db.reads.Reads`), read when scraped."""

    def reads_by_database(self) -> Mapping[str, int]: ...

    def fallbacks_by_reason(self) -> Mapping[str, int]: ...

    def replica_states(self) -> Iterable[tuple[str, bool, float | None]]:
        """Each replica's name, whether it answers reads, and its lag in seconds (None: not known, it is down)."""
        ...


class Metrics:
    """What this process counts."""

    def __init__(self, allow: Iterable[str], pool: AsyncConnectionPool[Connection], databases: DatabaseUse) -> None:
        self.registry = CollectorRegistry()
        self._pool = pool
        self._scraped = _Scraped(pool, databases)
        self.registry.register(self._scraped)
        self._allow = tuple(ipaddress.ip_network(net, strict=False) for net in allow)
        self.requests = Counter(
            "hire_requests", "API calls by procedure and HTTP status.", ["procedure", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "hire_request_seconds",
            "API call latency by procedure.",
            ["procedure"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "hire_rate_limited", "Calls refused with 429 by the per-account budget.", registry=self.registry
        )
        # The series of each (procedure, status) seen: procedures are registered names, statuses few.
        self._series: dict[tuple[str, int], tuple[Counter, Histogram]] = {}
        self.deliveries = Counter(
            "hire_webhook_attempts", "Webhook delivery attempts by outcome.", ["outcome"], registry=self.registry
        )

    def observe(self, procedure: str, status: int, started: float) -> None:
        """One API call, from `time.perf_counter()` at its start."""
        series = self._series.get((procedure, status))
        if series is None:  # labels() takes a lock and builds its key on every call: once per pair is enough
            series = self._series[procedure, status] = (
                self.requests.labels(procedure, str(status)),
                self.latency.labels(procedure),
            )
        calls, latency = series
        calls.inc()
        latency.observe(time.perf_counter() - started)
        if status == 429:
            self.rate_limited.inc()

    def allowed(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self._allow if network.version == ip.version)

    async def exposition(self) -> bytes:
        """The text format, after reading the queue depth (one small query)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(_QUEUE_DEPTH)
            self._scraped.depth = {row["status"]: row["n"] for row in await cursor.fetchall()}
        return generate_latest(self.registry)


class _Scraped(Collector):
    """Read when scraped: connection pool use, queue jobs by state, reads by database and the replicas' state."""

    def __init__(self, pool: AsyncConnectionPool[Connection], databases: DatabaseUse) -> None:
        self._pool = pool
        self._databases = databases
        self.depth: dict[str, int] = {}

    def collect(self) -> Iterator[Metric]:
        stats = self._pool.get_stats()
        pool = GaugeMetricFamily("hire_db_pool_connections", "Database pool connections.", labels=["state"])
        pool.add_metric(["size"], stats.get("pool_size", 0))
        pool.add_metric(["available"], stats.get("pool_available", 0))
        pool.add_metric(["waiting_requests"], stats.get("requests_waiting", 0))
        yield pool
        queue = GaugeMetricFamily("hire_queue_jobs", "Webhook queue jobs by state.", labels=["state"])
        for state, count in self.depth.items():
            queue.add_metric([state], count)
        yield queue
        yield from self._reads()

    def _reads(self) -> Iterator[Metric]:
        reads = CounterMetricFamily("hire_db_reads", "Reads by the database that answered them.", labels=["database"])
        for database, count in self._databases.reads_by_database().items():
            reads.add_metric([database], count)
        yield reads
        fallbacks = CounterMetricFamily(
            "hire_replica_fallbacks", "Reads a replica could have answered, answered by the primary.", labels=["reason"]
        )
        for reason, count in self._databases.fallbacks_by_reason().items():
            fallbacks.add_metric([reason], count)
        yield fallbacks
        up = GaugeMetricFamily("hire_replica_up", "1: a replica answers reads; 0: it is left out.", labels=["database"])
        lag = GaugeMetricFamily(
            "hire_replica_lag_seconds", "How far a replica is behind the primary (NaN: down).", labels=["database"]
        )
        for database, usable, seconds in self._databases.replica_states():
            up.add_metric([database], 1 if usable else 0)
            lag.add_metric([database], math.nan if seconds is None else seconds)
        yield up
        yield lag


async def scrape(request: Request, metrics: Metrics) -> Response:
    """`GET /metrics`: only for the addresses in METRICS_ALLOW."""
    if not metrics.allowed(request.client.host if request.client else ""):
        return PlainTextResponse("not allowed", status_code=403)
    return Response(await metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
