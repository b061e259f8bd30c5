"""Writing a message to send: one row and one queue job, on the caller's connection, so that the message
commits with the user or invitation it announces (and rolls back with it). The row holds the rendered message
sealed under SERVICE_SECRET_KEY, because it carries a live link; the queue job carries only the row's id."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rpc.core.crypto import Sealer
from rpc.core.types import Connection
from rpc.mail.compose import WIRE, Alternative, Composer
from rpc.outbox.queue import MAIL_TASK, Queue
from rpc.settings import Settings

MAIL_SEAL_PURPOSE = "mail message v1"

_INSERT_MANY = """
INSERT INTO mail_messages (kind, recipient, message_sealed)
SELECT kind, recipient, sealed
FROM unnest(%(kinds)s::text[], %(recipients)s::text[], %(sealed)s::bytea[]) AS letters (kind, recipient, sealed)
RETURNING id::text
"""


class Mail:
    """Composes messages and queues them in the caller's transaction; `subjects` and `packages` add the business's
    own kinds of mail (see `Composer`)."""

    def __init__(
        self,
        settings: Settings,
        queue: Queue,
        subjects: Mapping[str, str] | None = None,
        packages: Sequence[str] = (),
    ) -> None:
        self.composer = Composer(settings, subjects, packages)
        self._sealer = Sealer(settings.secret_key)
        self._queue = queue

    async def send(self, conn: Connection, kind: str, recipient: str, **context: Any) -> str:
        """Queue mail `kind` to `recipient`; returns the message's id. Call it inside the change's transaction."""
        return (await self.send_many(conn, [Letter(kind, recipient, context)]))[0]

    async def send_many(self, conn: Connection, letters: Sequence[Letter]) -> list[str]:
        """Queue every letter with two statements in all (the rows, then their jobs); their ids."""
        if not letters:
            return []
        rows = []
        for letter in letters:
            message = self.composer.compose(
                letter.kind, letter.recipient, letter.headers, alternatives=letter.alternatives, **letter.context
            )
            sealed = self._sealer.seal(message.as_bytes(policy=WIRE), MAIL_SEAL_PURPOSE)
            rows.append({"kind": letter.kind, "recipient": letter.recipient, "sealed": sealed})
        cursor = await conn.execute(
            _INSERT_MANY,
            {
                "kinds": [row["kind"] for row in rows],
                "recipients": [row["recipient"] for row in rows],
                "sealed": [row["sealed"] for row in rows],
            },
        )
        ids = [str(row["id"]) for row in await cursor.fetchall()]
        await self._queue.defer(conn, MAIL_TASK, [{"message_id": message_id} for message_id in ids])
        return ids


@dataclass(frozen=True, slots=True)
class Letter:
    """One message to queue: its kind, its recipient, what its templates are rendered with, extra headers, and
    renderings beside the text and HTML (a calendar invitation)."""

    kind: str
    recipient: str
    context: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] | None = None
    alternatives: Sequence[Alternative] = ()
