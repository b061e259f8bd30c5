"""The transactional outbox: an event, its deliveries and their queue jobs are written in the transaction
of the change they announce, so there is no change without its event and no event without its change.

The envelope is rendered once, here, as the exact bytes every attempt of every delivery will send.
Routing is decided now: endpoints added later do not receive older events. Only the kinds of the business
vocabulary (and the framework's `webhook.test`) can be emitted: a kind nobody can subscribe to is a bug.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection, Iterable
from typing import Any

import msgspec
from psycopg.pq import TransactionStatus

from rpc.core.envelope import Struct, encoder
from rpc.core.types import Connection
from rpc.outbox.queue import Queue
from rpc.settings import Settings

TEST_EVENT = "webhook.test"  # the panel's "send a test event": the framework's own kind
DISABLED = "the endpoint is disabled"  # the last error of a delivery kept, unattempted, for a disabled endpoint

_INSERT_EVENT = """
INSERT INTO events (id, kind, account_ids, body, created_at)
VALUES (%(id)s, %(kind)s, %(account_ids)s, %(body)s, %(created_at)s)
"""
# A disabled endpoint's delivery is `failed` at once, with no job: kept, to be recovered once it is enabled.
_INSERT_DELIVERIES = """
INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at, status, last_error)
SELECT %(event_id)s, id, CASE WHEN enabled THEN %(first_attempt_at)s END,
       CASE WHEN enabled THEN 'pending' ELSE 'failed' END, CASE WHEN NOT enabled THEN %(disabled)s END
FROM webhook_endpoints
WHERE account_id = ANY(%(account_ids)s) AND %(kind)s = ANY(event_kinds)
RETURNING id::text AS id, status = 'pending' AS queued
"""
_INSERT_DELIVERY_TO = """
INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
VALUES (%(event_id)s, %(endpoint_id)s, %(first_attempt_at)s)
RETURNING id::text AS id, true AS queued
"""


class Envelope(Struct, frozen=True, kw_only=True):
    """What a webhook receiver gets."""

    event: str
    data: Any
    timestamp: dt.datetime
    idempotency_key: str


class UnknownEventKind(LookupError):
    """An event kind that is not in the vocabulary."""


class Emitter:
    """`emit()` bound to the vocabulary's event kinds, the delivery queue and the first attempt's wait. Made by
    `build_emitter`."""

    def __init__(self, settings: Settings, queue: Queue, event_kinds: Collection[str]) -> None:
        self.queue = queue
        self.event_kinds = tuple(event_kinds)  # what endpoints may subscribe to, in the vocabulary's order
        self._kinds = frozenset(event_kinds) | {TEST_EVENT}
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
        """Record event `kind` for `account_ids` and a delivery to each of their endpoints subscribed to it (or
        only to `endpoint_id`, subscribed or not: the panel's test event), in the open transaction. A disabled
        endpoint's delivery is kept as `failed`, unattempted, to be recovered once it is enabled."""
        if kind not in self._kinds:
            raise UnknownEventKind(f"{kind!r} is not an event kind of the vocabulary")
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
            cursor = await conn.execute(
                _INSERT_DELIVERIES, {**values, "account_ids": accounts, "kind": kind, "disabled": DISABLED}
            )
        else:
            cursor = await conn.execute(_INSERT_DELIVERY_TO, {**values, "endpoint_id": endpoint_id})
        deliveries = [row["id"] for row in await cursor.fetchall() if row["queued"]]
        at = first_attempt_at if self._first_wait else None
        await self.queue.enqueue(conn, deliveries, at)
        return event_id


def build_emitter(settings: Settings, event_kinds: Collection[str]) -> Emitter:
    """The emitter of a process: events of these kinds, their jobs deferred on the caller's connection."""
    return Emitter(settings, Queue(), event_kinds)
