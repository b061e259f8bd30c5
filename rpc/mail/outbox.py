"""Writing a message to send: one row and one queue job, on the caller's connection, so that the message
commits with the user or invitation it announces (and rolls back with it). The row holds the rendered message
sealed under SERVICE_SECRET_KEY, because it carries a live link; the queue job carries only the row's id."""

from __future__ import annotations

from typing import Any

from rpc.core.crypto import Sealer
from rpc.core.types import Connection
from rpc.db.pool import one_row
from rpc.mail.compose import Composer
from rpc.outbox.queue import MAIL_TASK, Queue
from rpc.settings import Settings

MAIL_SEAL_PURPOSE = "mail message v1"

_INSERT = """
INSERT INTO mail_messages (kind, recipient, message_sealed) VALUES (%(kind)s, %(recipient)s, %(sealed)s)
RETURNING id::text
"""


class Mail:
    """Composes a message and queues it in the caller's transaction."""

    def __init__(self, settings: Settings, queue: Queue) -> None:
        self.composer = Composer(settings)
        self._sealer = Sealer(settings.secret_key)
        self._queue = queue

    async def send(self, conn: Connection, kind: str, recipient: str, **context: Any) -> str:
        """Queue mail `kind` to `recipient`; returns the message's id. Call it inside the change's transaction."""
        message = self.composer.compose(kind, recipient, **context)
        sealed = self._sealer.seal(message.as_bytes(), MAIL_SEAL_PURPOSE)
        cursor = await conn.execute(_INSERT, {"kind": kind, "recipient": recipient, "sealed": sealed})
        row = await one_row(cursor)
        await self._queue.defer(conn, MAIL_TASK, [{"message_id": row["id"]}])
        return str(row["id"])
