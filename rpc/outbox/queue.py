"""The write side of the durable queue (procrastinate, on PostgreSQL): deferring a delivery's job on the caller's
connection, so that it commits or rolls back with the caller's transaction. It knows the worker's task only by
name: writing to the queue loads nothing of the worker, its HTTP client or its periodic work.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import procrastinate
from procrastinate.schema import SchemaManager
from procrastinate.types import JSONDict

from rpc.core.types import Connection

QUEUE = "webhooks"  # the workers' periodic work, run by procrastinate's own worker
DELIVERY_QUEUE = "webhook_deliveries"  # one job per delivery, claimed in batches by rpc/outbox/claims.py
DELIVER_TASK = "hire.deliver_webhook"


class Queue:
    """Defers delivery jobs on the caller's connection (a bare procrastinate app: deferring needs no opening)."""

    def __init__(self) -> None:
        self._app = procrastinate.App(connector=procrastinate.PsycopgConnector())

    async def enqueue(self, conn: Connection, delivery_ids: Iterable[str], at: dt.datetime | None = None) -> None:
        jobs: list[JSONDict] = [{"delivery_id": delivery_id} for delivery_id in delivery_ids]
        if jobs:
            deferrer = self._app.configure_task(DELIVER_TASK, queue=DELIVERY_QUEUE, connection=conn, schedule_at=at)
            await deferrer.batch_defer_async(*jobs)


async def ensure_queue_schema(conn: Any) -> None:
    """Apply procrastinate's schema once; run under the migration lock (its SQL is not idempotent)."""
    cursor = await conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")
    row = await cursor.fetchone()
    if not row[0]:
        await conn.execute(SchemaManager.get_schema())
