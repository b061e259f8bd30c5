"""An endpoint's delivery log (newest first, paged), one delivery's attempts — what went wrong in words, the
headers sent — with the exact body sent, and "redeliver" of a failed delivery. Every query goes through the
endpoint's account: another account's delivery is a 404."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from rpc.core.errors import NotFound
from rpc.core.types import Connection
from rpc.panel.handler import Panel, page
from rpc.panel.ids import uuid_or_404
from rpc.web.pages import redirect

PER_PAGE = 20

_LAST_DELIVERIES = """
SELECT DISTINCT ON (d.endpoint_id) d.endpoint_id::text AS endpoint_id, d.status, d.last_status_code, d.created_at
FROM webhook_deliveries AS d
WHERE d.endpoint_id = ANY(%(ids)s::uuid[])
ORDER BY d.endpoint_id, d.created_at DESC, d.id DESC
"""
_COUNT = "SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = %(endpoint_id)s"
_REDELIVERED = """
EXISTS (
    SELECT FROM webhook_deliveries AS later
    WHERE later.event_id = d.event_id AND later.endpoint_id = d.endpoint_id AND later.created_at > d.created_at
) AS redelivered
"""
_LOG = f"""
SELECT d.id::text AS id, e.kind, d.status, d.attempts, d.last_status_code, d.last_error, d.next_attempt_at,
       d.created_at, {_REDELIVERED}
FROM webhook_deliveries AS d JOIN events AS e ON e.id = d.event_id
WHERE d.endpoint_id = %(endpoint_id)s
ORDER BY d.created_at DESC, d.id DESC
LIMIT %(limit)s OFFSET %(offset)s
"""
_DELIVERY = f"""
SELECT d.id::text AS id, d.endpoint_id::text AS endpoint_id, d.status, d.attempts, d.last_status_code,
       d.last_error, d.next_attempt_at, d.created_at, e.id::text AS event_id, e.kind, e.body,
       e.created_at AS event_created_at, {_REDELIVERED}
FROM webhook_deliveries AS d
JOIN events AS e ON e.id = d.event_id
JOIN webhook_endpoints AS ep ON ep.id = d.endpoint_id
WHERE d.id = %(id)s AND d.endpoint_id = %(endpoint_id)s AND ep.account_id = %(account_id)s
"""
_ATTEMPTS = """
SELECT number, started_at, duration_ms, status_code, error, response_excerpt, request_headers
FROM webhook_attempts WHERE delivery_id = %(id)s ORDER BY number
"""


def outcome(status_code: int | None, error: str | None) -> str | None:
    """What went wrong in an attempt, in words: the worker's own (could not connect, TLS, timed out…), or the
    receiver's answer other than the `200` that alone counts as success; None for a success."""
    if error:
        return error
    if status_code is None or status_code == 200:
        return None
    if 300 <= status_code < 400:
        return f"receiver answered {status_code} (redirects are not followed; only 200 counts as success)"
    return f"receiver answered {status_code} (only 200 counts as success)"


def _attempt(row: dict[str, Any]) -> dict[str, Any]:
    headers = sorted((row["request_headers"] or {}).items(), key=lambda item: item[0].lower())
    return {**row, "outcome": outcome(row["status_code"], row["error"]), "headers": headers}


@dataclass(frozen=True, slots=True)
class LogPage:
    """One page of an endpoint's delivery log."""

    rows: list[dict[str, Any]]
    page: int
    pages: int
    total: int


async def last_deliveries(conn: Connection, endpoint_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The newest delivery of each endpoint, by endpoint id."""
    if not endpoint_ids:
        return {}
    cursor = await conn.execute(_LAST_DELIVERIES, {"ids": endpoint_ids})
    return {row["endpoint_id"]: row for row in await cursor.fetchall()}


async def delivery_log(conn: Connection, endpoint_id: str, page_number: int) -> LogPage:
    """Deliveries of an endpoint (already checked to be the caller's), newest first."""
    cursor = await conn.execute(_COUNT, {"endpoint_id": endpoint_id})
    row = await cursor.fetchone()
    total = int(row["n"]) if row else 0
    pages = max(1, math.ceil(total / PER_PAGE))
    page_number = min(page_number, pages)
    cursor = await conn.execute(
        _LOG, {"endpoint_id": endpoint_id, "limit": PER_PAGE, "offset": (page_number - 1) * PER_PAGE}
    )
    return LogPage(rows=await cursor.fetchall(), page=page_number, pages=pages, total=total)


@page
async def delivery_page(panel: Panel) -> Response:
    """`GET /panel/webhooks/{id}/deliveries/{delivery_id}`: every attempt with its headers, and the exact body."""
    endpoint = await panel.services.webhooks.get(panel.conn, panel.account_id, panel.path("id"))
    cursor = await panel.conn.execute(
        _DELIVERY,
        {"id": uuid_or_404(panel.path("delivery_id")), "endpoint_id": endpoint.id, "account_id": panel.account_id},
    )
    delivery = await cursor.fetchone()
    if delivery is None:
        raise NotFound()
    cursor = await panel.conn.execute(_ATTEMPTS, {"id": delivery["id"]})
    body = bytes(delivery["body"])
    return panel.render(
        "panel/delivery.html",
        section="webhooks",
        endpoint=endpoint,
        delivery=delivery,
        attempts=[_attempt(row) for row in await cursor.fetchall()],
        last_outcome=outcome(delivery["last_status_code"], delivery["last_error"]),
        body=body.decode("utf-8", "replace"),
        body_bytes=len(body),
        max_attempts=len(panel.services.settings.webhook_retry_waits),
    )


@page
async def redeliver(panel: Panel) -> Response:
    """`POST /panel/webhooks/{id}/deliveries/{delivery_id}/redeliver`: a failed delivery's event again (the
    same bytes), as a new delivery with fresh attempts. A second click sends nothing more."""
    endpoint = await panel.services.webhooks.get(panel.conn, panel.account_id, panel.path("id"))
    delivery_id = str(uuid_or_404(panel.path("delivery_id")))
    cursor = await panel.conn.execute(
        _DELIVERY, {"id": delivery_id, "endpoint_id": endpoint.id, "account_id": panel.account_id}
    )
    if await cursor.fetchone() is None:
        raise NotFound()
    try:
        async with panel.conn.transaction():
            await panel.services.webhooks.redeliver(panel.conn, panel.account_id, delivery_id)
    except NotFound:  # not failed, or redelivered already: nothing to do, say what is there
        return redirect(f"/panel/webhooks/{endpoint.id}")
    return redirect(f"/panel/webhooks/{endpoint.id}?notice=redelivered")
