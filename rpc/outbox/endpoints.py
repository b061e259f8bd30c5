"""Webhook endpoints of an account, as the panel and `bin/admin` manage them (the API exposes none).

Every function takes the account it acts for: another account's endpoint or delivery is `NotFound`.
Secrets (`rpc.outbox.signatures`) are sealed at rest so they can sign and be shown again. Rotating "now"
switches at once; rotating "with overlap" keeps the old secret signing `X-Service-Signature` for 24 hours while
the new one signs `X-Service-Signature-Next` (and both sign `webhook-signature`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from rpc.core.crypto import Sealer
from rpc.core.envelope import Struct
from rpc.core.errors import NotFound
from rpc.core.types import Connection
from rpc.db.pool import count_for_account, one_row
from rpc.outbox.emit import TEST_EVENT, Emitter
from rpc.outbox.signatures import ENDPOINT_SEAL_PURPOSE, new_secret
from rpc.outbox.ssrf import BlockedDestination, guard
from rpc.settings import Settings

ROTATION_OVERLAP = dt.timedelta(hours=24)
MAX_URL_LENGTH = 2000
MAX_ENDPOINTS = 20  # per account (docs/security.md): each event is sent to every endpoint that asked for it

_COLUMNS = """id::text AS id, url, event_kinds, enabled, disabled_at, overlap_until, created_at, updated_at"""
_INSERT = f"""
INSERT INTO webhook_endpoints (account_id, url, event_kinds, secret_sealed)
VALUES (%(account_id)s, %(url)s, %(event_kinds)s, %(secret)s)
RETURNING {_COLUMNS}
"""
_LIST = f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE account_id = %(account_id)s ORDER BY created_at, id"
_COUNT = "SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = %(account_id)s"
_SELECT = f"""
SELECT {_COLUMNS}, secret_sealed FROM webhook_endpoints WHERE id = %(id)s AND account_id = %(account_id)s
"""
# Enabling restarts the clock of failures (rpc/worker/disabling.py): only attempts from now on count.
_UPDATE = f"""
UPDATE webhook_endpoints
SET url = %(url)s, event_kinds = %(event_kinds)s, enabled = %(enabled)s, updated_at = now(),
    failing_since = CASE WHEN %(enabled)s AND NOT enabled THEN NULL ELSE failing_since END,
    disabled_at = CASE WHEN %(enabled)s THEN NULL ELSE disabled_at END
WHERE id = %(id)s AND account_id = %(account_id)s
RETURNING {_COLUMNS}
"""
_DELETE = "DELETE FROM webhook_endpoints WHERE id = %(id)s AND account_id = %(account_id)s RETURNING id::text AS id"
_ROTATE = """
UPDATE webhook_endpoints
SET secret_sealed = %(secret)s, previous_secret_sealed = %(previous)s, overlap_until = %(overlap_until)s,
    updated_at = now()
WHERE id = %(id)s AND account_id = %(account_id)s
"""
# Redelivering holds the endpoint's row until it commits: a second press at the same moment waits, and then its
# own statement (a new snapshot) sees the first one's deliveries and skips those events. Without it, both would
# find no later delivery and the event would go out twice at once.
_LOCK_DELIVERY_ENDPOINT = """
SELECT ep.id FROM webhook_endpoints AS ep JOIN webhook_deliveries AS d ON d.endpoint_id = ep.id
WHERE d.id = %(id)s AND ep.account_id = %(account_id)s
FOR UPDATE OF ep
"""
# An event whose body retention emptied (RETENTION_WEBHOOK_DAYS) is not delivered again: there is nothing to send.
_REDELIVER = """
INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
SELECT d.event_id, d.endpoint_id, now()
FROM webhook_deliveries AS d JOIN webhook_endpoints AS ep ON ep.id = d.endpoint_id JOIN events AS e ON e.id = d.event_id
WHERE d.id = %(id)s AND ep.account_id = %(account_id)s AND d.status = 'failed' AND e.body <> ''::bytea
  AND NOT EXISTS (  -- redelivered already: a second click does not send it twice
      SELECT FROM webhook_deliveries AS later
      WHERE later.event_id = d.event_id AND later.endpoint_id = d.endpoint_id AND later.created_at > d.created_at
  )
RETURNING id::text AS id
"""
# The events since `since` (by the event's time: a delivery of an older event redelivered later is not one of
# them); a delivery is never older than its event, so its own time narrows the search first.
_REDELIVER_SINCE = """
INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
SELECT d.event_id, d.endpoint_id, now()
FROM webhook_deliveries AS d JOIN webhook_endpoints AS ep ON ep.id = d.endpoint_id JOIN events AS e ON e.id = d.event_id
WHERE d.endpoint_id = %(endpoint_id)s AND ep.account_id = %(account_id)s
  AND d.status = 'failed' AND d.created_at >= %(since)s
  AND e.created_at >= date_trunc('second', %(since)s::timestamptz) AND e.body <> ''::bytea
  AND NOT EXISTS (  -- redelivered already: only the latest delivery of an event to the endpoint counts
      SELECT FROM webhook_deliveries AS later
      WHERE later.event_id = d.event_id AND later.endpoint_id = d.endpoint_id AND later.created_at > d.created_at
  )
RETURNING id::text AS id
"""


class Endpoint(Struct, frozen=True, kw_only=True):
    """A webhook endpoint as its owner sees it (never with its secret)."""

    id: str
    url: str
    event_kinds: list[str]
    enabled: bool
    disabled_at: dt.datetime | None  # when it was disabled for failing (None: enabled, or disabled by its owner)
    overlap_until: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime


class InvalidEndpoint(ValueError):
    """An endpoint setting that cannot be accepted; `field` names it for the form."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class Webhooks:
    """Endpoint management for one deployment: its settings, and the emitter (the event kinds it knows, its
    queue)."""

    def __init__(self, settings: Settings, emitter: Emitter) -> None:
        self._settings = settings
        self._event_kinds = frozenset(emitter.event_kinds)
        self._queue = emitter.queue
        self._emitter = emitter
        self._sealer = Sealer(settings.secret_key)

    async def create(
        self, conn: Connection, account_id: str, url: str, event_kinds: Sequence[str]
    ) -> tuple[Endpoint, str]:
        """A new, enabled endpoint and its secret (shown to the owner now, and on request in the panel); at most
        `MAX_ENDPOINTS` per account, so that one event cannot be multiplied against any URL."""
        url, kinds = await self._validate(url, event_kinds)
        secret = new_secret()
        async with conn.transaction():
            if await count_for_account(conn, account_id, _COUNT) >= MAX_ENDPOINTS:
                raise InvalidEndpoint(
                    "form", f"This account has {MAX_ENDPOINTS} endpoints, the most it may have: delete one first."
                )
            cursor = await conn.execute(
                _INSERT, {"account_id": account_id, "url": url, "event_kinds": kinds, "secret": self._seal(secret)}
            )
            return Endpoint(**await one_row(cursor)), secret

    async def endpoints(self, conn: Connection, account_id: str) -> list[Endpoint]:
        cursor = await conn.execute(_LIST, {"account_id": account_id})
        return [Endpoint(**row) for row in await cursor.fetchall()]

    async def get(self, conn: Connection, account_id: str, endpoint_id: str) -> Endpoint:
        row = await self._row(conn, account_id, endpoint_id)
        row.pop("secret_sealed")
        return Endpoint(**row)

    async def update(
        self,
        conn: Connection,
        account_id: str,
        endpoint_id: str,
        *,
        url: str | None = None,
        event_kinds: Sequence[str] | None = None,
        enabled: bool | None = None,
    ) -> Endpoint:
        current = await self.get(conn, account_id, endpoint_id)
        new_url, kinds = await self._validate(
            current.url if url is None else url, current.event_kinds if event_kinds is None else event_kinds
        )
        cursor = await conn.execute(
            _UPDATE,
            {
                "id": current.id,
                "account_id": account_id,
                "url": new_url,
                "event_kinds": kinds,
                "enabled": current.enabled if enabled is None else enabled,
            },
        )
        return Endpoint(**await one_row(cursor))

    async def delete(self, conn: Connection, account_id: str, endpoint_id: str) -> None:
        """The endpoint, its deliveries and their attempts, gone; deliveries still queued find nothing to send."""
        cursor = await conn.execute(_DELETE, {"id": _uuid(endpoint_id), "account_id": account_id})
        if await cursor.fetchone() is None:
            raise NotFound("No such webhook endpoint.")

    async def reveal_secret(self, conn: Connection, account_id: str, endpoint_id: str) -> str:
        row = await self._row(conn, account_id, endpoint_id)
        return self._sealer.open(bytes(row["secret_sealed"]), ENDPOINT_SEAL_PURPOSE).decode()

    async def rotate_secret(self, conn: Connection, account_id: str, endpoint_id: str, *, overlap: bool) -> str:
        """A new secret: at once, or with the old one still signing for 24 hours."""
        row = await self._row(conn, account_id, endpoint_id, lock=True)
        secret = new_secret()
        await conn.execute(
            _ROTATE,
            {
                "id": row["id"],
                "account_id": account_id,
                "secret": self._seal(secret),
                "previous": row["secret_sealed"] if overlap else None,
                "overlap_until": dt.datetime.now(dt.UTC) + ROTATION_OVERLAP if overlap else None,
            },
        )
        return secret

    async def send_test_event(self, conn: Connection, account_id: str, endpoint_id: str) -> None:
        """`webhook.test` to this one endpoint, whatever its subscriptions, through the same queue."""
        endpoint = await self.get(conn, account_id, endpoint_id)
        await self._emitter.emit(
            conn, TEST_EVENT, TestEvent(endpoint_id=endpoint.id), [account_id], endpoint_id=endpoint.id
        )

    async def redeliver(self, conn: Connection, account_id: str, delivery_id: str) -> str:
        """A new delivery of a failed one's event (same bytes), with five fresh attempts."""
        await conn.execute(_LOCK_DELIVERY_ENDPOINT, {"id": _uuid(delivery_id), "account_id": account_id})
        cursor = await conn.execute(_REDELIVER, {"id": _uuid(delivery_id), "account_id": account_id})
        row = await cursor.fetchone()
        if row is None:
            raise NotFound("No such failed delivery, or it was redelivered already.")
        await self._queue.enqueue(conn, [row["id"]])
        return str(row["id"])

    async def redeliver_failed_since(
        self, conn: Connection, account_id: str, endpoint_id: str, since: dt.datetime
    ) -> list[str]:
        """Redeliver every event since `since` whose latest delivery to the endpoint failed (asking twice does
        not send anything twice), while its body is kept."""
        await self._row(conn, account_id, endpoint_id, lock=True)
        cursor = await conn.execute(
            _REDELIVER_SINCE, {"endpoint_id": endpoint_id, "account_id": account_id, "since": since}
        )
        ids = [str(row["id"]) for row in await cursor.fetchall()]
        await self._queue.enqueue(conn, ids)
        return ids

    async def _row(self, conn: Connection, account_id: str, endpoint_id: str, *, lock: bool = False) -> dict[str, Any]:
        query = _SELECT + (" FOR UPDATE" if lock else "")
        cursor = await conn.execute(query, {"id": _uuid(endpoint_id), "account_id": account_id})
        row = await cursor.fetchone()
        if row is None:
            raise NotFound("No such webhook endpoint.")
        return row

    async def _validate(self, url: str, event_kinds: Sequence[str]) -> tuple[str, list[str]]:
        kinds = sorted(set(event_kinds))
        unknown = [kind for kind in kinds if kind not in self._event_kinds]
        if not kinds:
            raise InvalidEndpoint("event_kinds", "Choose at least one event kind: the endpoint receives only those.")
        if unknown:
            known = ", ".join(sorted(self._event_kinds))
            raise InvalidEndpoint("event_kinds", f"Unknown event kinds: {', '.join(unknown)}; choose among: {known}.")
        url = url.strip()
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise InvalidEndpoint("url", "Not a valid URL.") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host or len(url) > MAX_URL_LENGTH:
            raise InvalidEndpoint("url", "Use an http(s) URL of at most 2,000 characters.")
        if parsed.port is not None and not 1 <= parsed.port <= 65535:
            raise InvalidEndpoint("url", "The port must be between 1 and 65535.")
        if parsed.userinfo:
            raise InvalidEndpoint("url", "Credentials in the URL are not accepted; authenticate by the signature.")
        checker = guard(self._settings)
        if checker is not None:
            try:
                await checker.resolve(parsed)
            except BlockedDestination as exc:
                raise InvalidEndpoint("url", f"{exc}.") from exc
        return url, kinds

    def _seal(self, secret: str) -> bytes:
        return self._sealer.seal(secret.encode(), ENDPOINT_SEAL_PURPOSE)


class TestEvent(Struct, frozen=True, kw_only=True):
    """Data of `webhook.test`."""

    endpoint_id: str


def _uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError as exc:
        raise NotFound() from exc
