"""The write side of the durable queue (procrastinate, on PostgreSQL): deferring a webhook delivery's or an
e-mail's job on the caller's connection, so that it commits or rolls back with the caller's transaction. It knows
the worker's tasks only by name: writing to the queue loads nothing of the worker, its HTTP client or its periodic
work.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import procrastinate
from procrastinate.schema import SchemaManager
from procrastinate.types import JSONDict

from rpc.core.types import Connection

QUEUE = "webhooks"  # the workers' periodic work and e-mail, run by procrastinate's own worker
DELIVERY_QUEUE = "webhook_deliveries"  # one job per delivery, claimed in batches by rpc/outbox/claims.py
DELIVER_TASK = "hire.deliver_webhook"
MAIL_TASK = "hire.send_mail"
_QUEUE_OF_TASK = {DELIVER_TASK: DELIVERY_QUEUE, MAIL_TASK: QUEUE}


class Queue:
    """Defers jobs on the caller's connection (a bare procrastinate app: deferring needs no opening)."""

    def __init__(self) -> None:
        self._app = procrastinate.App(connector=procrastinate.PsycopgConnector())

    async def enqueue(self, conn: Connection, delivery_ids: Iterable[str], at: dt.datetime | None = None) -> None:
        await self.defer(conn, DELIVER_TASK, [{"delivery_id": delivery_id} for delivery_id in delivery_ids], at)

    async def defer(self, conn: Connection, task: str, jobs: list[JSONDict], at: dt.datetime | None = None) -> None:
        """Jobs of the worker's task named `task` (webhook delivery, e-mail), due at `at` (default: now)."""
        if jobs:
            queue = _QUEUE_OF_TASK[task]
            deferrer = self._app.configure_task(task, queue=queue, connection=conn, schedule_at=at)
            await deferrer.batch_defer_async(*jobs)


async def ensure_queue_schema(conn: Any) -> None:
    """Apply procrastinate's schema once; run under the migration lock (its SQL is not idempotent)."""
    cursor = await conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")
    row = await cursor.fetchone()
    if not row[0]:
        await conn.execute(SchemaManager.get_schema())
