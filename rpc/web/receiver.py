"""Payment-provider notifications: `POST /api/webhooks/{provider}`, one registry of providers.

The framework reads the notification (form-encoded as providers send it, or JSON), hands its fields to
the provider named by the path segment inside one transaction, answers with the provider's plain-text
verdict, and records every notification — valid or not — with its verdict for audit. A provider is one
object of the business layer (`procedures/`), handed over at assembly.

Anyone can post here, so the receiver is limited per client address, and what it keeps of a notification that
did not verify is bounded: the provider's signed fields (each cut to `MAX_SIGNED_CHARS`) and at most
`MAX_UNVERIFIED_REST_BYTES` of the rest. A verified notification is kept whole.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Mapping, Sequence

from psycopg.types.json import Jsonb
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from rpc.audit.log import Origin
from rpc.core.errors import RateLimited, RpcError
from rpc.core.params import decode_json, is_json, read_body
from rpc.db.pool import Pool
from rpc.payments.provider import Verdict
from rpc.services import services
from rpc.web.auth_api import client_address

log = logging.getLogger(__name__)

MAX_NOTIFICATION_BYTES = 64 * 1024
MAX_SIGNED_CHARS = 256
MAX_UNVERIFIED_REST_BYTES = 1024

_RECORD = """
INSERT INTO payment_notifications (provider, remote_address, fields, verdict, merchant_oid)
VALUES (%(provider)s, %(remote_address)s, %(fields)s, %(verdict)s, %(merchant_oid)s)
"""


async def receive_notification(request: Request) -> Response:
    """`POST /api/webhooks/{provider}`."""
    state = services(request)
    name = request.path_params["provider"]
    provider = state.providers.get(name)
    if provider is None:
        return PlainTextResponse("unknown payment provider", status_code=404)
    address = client_address(request)
    try:
        await state.throttle.hit_address("payment_notifications", address)
    except RateLimited as exc:
        return PlainTextResponse("too many notifications", status_code=exc.status, headers=exc.headers())
    try:
        fields = await _fields(request)
    except (RpcError, ValueError) as exc:
        verdict = Verdict(400, "malformed notification", "malformed")
        log.info("malformed notification to %s: %s", name, exc)
        fields = {}
    else:
        try:
            async with state.pool.connection() as conn, conn.transaction():
                verdict = await provider.receive(conn, state.emitter, state.settings, fields, Origin.of(request))
        except Exception:
            log.exception("payment notification from %s failed", name)
            verdict = Verdict(500, "temporary failure, retry", "error")
    kept = fields if verdict.status == 200 else _unverified(fields, provider.signed_fields)
    await _record(state.pool, name, address, kept, verdict)
    return PlainTextResponse(verdict.body, status_code=verdict.status)


async def _fields(request: Request) -> dict[str, str]:
    """The notification's fields, form-encoded (as providers send them) or a JSON object."""
    body = await read_body(request, MAX_NOTIFICATION_BYTES)
    if is_json(request.headers.get("content-type", "")):
        data = decode_json(body)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return {str(key): str(value) for key, value in data.items()}
    return dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=bool(body)))


def _unverified(fields: Mapping[str, str], signed: Sequence[str]) -> dict[str, str]:
    """What is kept of a notification that did not verify: its signed fields, cut short, and the rest while it
    fits in `MAX_UNVERIFIED_REST_BYTES` (a `_truncated` mark says when something was left out)."""
    kept = {name: fields[name][:MAX_SIGNED_CHARS] for name in signed if name in fields}
    budget = MAX_UNVERIFIED_REST_BYTES
    for name, value in fields.items():
        if name in kept:
            continue
        size = len(name.encode()) + len(value.encode())
        if size > budget:
            kept["_truncated"] = "true"
            break
        kept[name] = value
        budget -= size
    return kept


async def _record(pool: Pool, provider: str, remote_address: str, fields: Mapping[str, str], verdict: Verdict) -> None:
    """The audit row; kept even when the notification changed nothing or failed."""
    fields = {_storable(key): _storable(value) for key, value in fields.items()}
    try:
        async with pool.connection() as conn:
            await conn.execute(
                _RECORD,
                {
                    "provider": provider,
                    "remote_address": remote_address,
                    "fields": Jsonb(dict(fields)),
                    "verdict": verdict.outcome,
                    "merchant_oid": fields.get("merchant_oid"),
                },
            )
    except Exception:
        log.exception("could not record a payment notification for audit")


def _storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL: keep the rest of what was sent."""
    return text.replace("\x00", "\ufffd")


routes = [Route("/api/webhooks/{provider}", receive_notification, methods=["POST"])]
