"""The transactional outbox: an event, its deliveries and their queue jobs are written in the transaction
of the change they announce, so there is no change without its event and no event without its change.

The envelope is rendered once, here, as the exact bytes every attempt of every delivery will send.
Routing is decided now: endpoints added later do not receive older events.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable
from typing import Any

import msgspec
from psycopg.pq import TransactionStatus

from rpc.delivery import Queue
from rpc.envelope import Struct, encoder
from rpc.settings import Settings
from rpc.types import Connection

_INSERT_EVENT = """
INSERT INTO events (id, kind, account_ids, body, created_at)
VALUES (%(id)s, %(kind)s, %(account_ids)s, %(body)s, %(created_at)s)
"""
_INSERT_DELIVERIES = """
INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
SELECT %(event_id)s, id, %(first_attempt_at)s FROM webhook_endpoints
WHERE account_id = ANY(%(account_ids)s) AND enabled AND %(kind)s = ANY(event_kinds)
RETURNING id::text AS id
"""
_INSERT_DELIVERY_TO = """
INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
VALUES (%(event_id)s, %(endpoint_id)s, %(first_attempt_at)s)
RETURNING id::text AS id
"""


class Envelope(Struct, frozen=True, kw_only=True):
    """What a webhook receiver gets."""

    event: str
    data: Any
    timestamp: dt.datetime
    idempotency_key: str


class Emitter:
    """`emit()` bound to the delivery queue and the first attempt's wait."""

    def __init__(self, settings: Settings, queue: Queue) -> None:
        self._queue = queue
        self._first_wait = dt.timedelta(seconds=settings.webhook_retry_waits[0])

    async def emit(
        self,
        conn: Connection,
        kind: str,
        data: msgspec.Struct,
        account_ids: Iterable[str],
        *,
        endpoint_id: str | None = None,
    ) -> uuid.UUID:
        """Record event `kind` for `account_ids` and a delivery to each of their enabled endpoints subscribed
        to it (or only to `endpoint_id`, subscribed or not: the panel's test event), in the open transaction."""
        if conn.info.transaction_status != TransactionStatus.INTRANS:
            raise RuntimeError("events are emitted inside the transaction of the change they announce")
        event_id = uuid.uuid4()
        created_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
        accounts = sorted(set(account_ids))
        body = encoder.encode(Envelope(event=kind, data=data, timestamp=created_at, idempotency_key=str(event_id)))
        await conn.execute(
            _INSERT_EVENT,
            {"id": event_id, "kind": kind, "account_ids": accounts, "body": body, "created_at": created_at},
        )
        first_attempt_at = dt.datetime.now(dt.UTC) + self._first_wait
        values = {"event_id": event_id, "first_attempt_at": first_attempt_at}
        if endpoint_id is None:
            cursor = await conn.execute(_INSERT_DELIVERIES, {**values, "account_ids": accounts, "kind": kind})
        else:
            cursor = await conn.execute(_INSERT_DELIVERY_TO, {**values, "endpoint_id": endpoint_id})
        deliveries = [row["id"] for row in await cursor.fetchall()]
        at = first_attempt_at if self._first_wait else None
        await self._queue.enqueue(conn, deliveries, at)
        return event_id
