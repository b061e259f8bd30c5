"""The worker's side of e-mail: job `hire.send_mail` hands one queued message to the transport and records the
outcome. A failure is retried after each wait of MAIL_RETRY_WAITS (two days in all by default), the next job
deferred in the transaction that records the attempt; after the last one the message is marked `failed`. Sent
or failed, the sealed message (with its live link) is dropped. A worker killed mid-send records nothing and
the stalled job is retried, so a message goes out at least once.
"""

from __future__ import annotations

import datetime as dt
import logging

from procrastinate import JobContext

from rpc.core.crypto import Sealer
from rpc.db.pool import Pool
from rpc.mail.outbox import MAIL_SEAL_PURPOSE
from rpc.mail.transport import Transport, transport_for
from rpc.outbox.queue import MAIL_TASK, Queue
from rpc.settings import Settings

log = logging.getLogger(__name__)

_LOAD = "SELECT attempts, recipient, message_sealed FROM mail_messages WHERE id = %(id)s AND status = 'pending'"
_SENT = """
UPDATE mail_messages SET status = 'sent', attempts = attempts + 1, sent_at = now(), message_sealed = NULL,
       last_error = NULL
WHERE id = %(id)s AND status = 'pending'
"""
_FAILED = """
UPDATE mail_messages
SET attempts = attempts + 1, last_error = %(error)s,
    status = CASE WHEN %(final)s THEN 'failed' ELSE 'pending' END,
    message_sealed = CASE WHEN %(final)s THEN NULL ELSE message_sealed END
WHERE id = %(id)s AND status = 'pending' AND attempts = %(attempts)s
RETURNING id
"""


class Postman:
    """Sends one queued message per job."""

    def __init__(self, settings: Settings, pool: Pool, queue: Queue, transport: Transport | None = None) -> None:
        self._waits = settings.mail_retry_waits
        self._pool = pool
        self._queue = queue
        self._sealer = Sealer(settings.secret_key)
        self.transport = transport or transport_for(settings)

    async def send(self, message_id: str) -> None:
        async with self._pool.connection() as conn:
            row = await (await conn.execute(_LOAD, {"id": message_id})).fetchone()
        if row is None:
            return  # sent or given up already: a duplicate job
        message = self._sealer.open(bytes(row["message_sealed"]), MAIL_SEAL_PURPOSE)  # sent as written
        try:
            await self.transport.deliver(message, row["recipient"])
        except Exception as exc:  # whatever went wrong is this attempt's failure, recorded and retried
            await self._failed(message_id, row["attempts"], f"{type(exc).__name__}: {exc}"[:500])
            return
        async with self._pool.connection() as conn:
            await conn.execute(_SENT, {"id": message_id})

    async def _failed(self, message_id: str, attempts: int, error: str) -> None:
        number = attempts + 1
        final = number >= len(self._waits)
        async with self._pool.connection() as conn, conn.transaction():
            values = {"id": message_id, "error": error, "final": final, "attempts": attempts}
            recorded = await (await conn.execute(_FAILED, values)).fetchone()
            if recorded is not None and not final:
                retry_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=self._waits[number])
                await self._queue.defer(conn, MAIL_TASK, [{"message_id": message_id}], retry_at)
        log.warning("mail %s attempt %d failed%s: %s", message_id, number, " for good" if final else "", error)


async def send_mail(context: JobContext, message_id: str) -> None:
    """Job `hire.send_mail`: one attempt to send one message."""
    postman: Postman = context.additional_context["postman"]
    await postman.send(message_id)
