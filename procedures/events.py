"""The event log (`events.list`): an account's events as they were delivered, newest first, so that an
integration that was down can catch up without webhooks. Each entry is read from the envelope bytes the
deliveries sent (the `data`, `timestamp` and `idempotency_key` are those bytes, untouched), for as long as
retention keeps them (RETENTION_WEBHOOK_DAYS). An event belongs to every account it was emitted to; the panel's
`webhook.test` is not a business event and is not listed.

Paging reuses the cursor of `jobs.search` (`procedures.jobs.search.cursor`): a position bound to its query's
fingerprint, so that a cursor of another query or a forged one is a `422` on `cursor`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import msgspec

from procedures.jobs.search import cursor as codec
from procedures.vocabulary import EVENT_KINDS
from rpc.api import Context, FieldError, Moment, Params, Struct, moment, procedure
from rpc.audit.entries import AUDIT_ROLES
from rpc.core.cursor import CursorCodec
from rpc.privacy.retention import RetentionSettings

PerPage = Annotated[int, msgspec.Meta(ge=1, le=100)]
Cursor = Annotated[str, msgspec.Meta(max_length=400)]
# The kinds are checked in `ListEvents` (a 422 that names them) and listed in the schema, so that clients and
# property tests know them.
Kind = Annotated[
    str, msgspec.Meta(max_length=100, description="An event kind.", extra_json_schema={"enum": list(EVENT_KINDS)})
]

# Through the GIN index on account_ids; newest first, the order of emission breaking ties of one second.
_PAGE = """
SELECT id::text AS id, seq, body, created_at FROM events
WHERE account_ids @> ARRAY[%(account_id)s::uuid] AND kind <> 'webhook.test' AND body <> ''::bytea
  AND created_at >= now() - make_interval(days => %(days)s)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(since)s::timestamptz IS NULL OR created_at >= date_trunc('second', %(since)s::timestamptz))
  AND (%(after_at)s::timestamptz IS NULL OR (created_at, seq) < (%(after_at)s, %(after_seq)s::bigint))
ORDER BY created_at DESC, seq DESC
LIMIT %(limit)s
"""


class ListEvents(Params, frozen=True, kw_only=True):
    event: Kind | None = None
    since: Moment | None = None
    cursor: Cursor | None = None
    per_page: PerPage = 20

    example: ClassVar[Mapping[str, Any]] = {
        "event": "application.created",
        "since": "2026-11-01T00:00:00Z",
        "per_page": 50,
    }

    def __post_init__(self) -> None:
        if self.event is not None and self.event not in EVENT_KINDS:
            raise FieldError("event", f"Not an event kind; use one of {', '.join(EVENT_KINDS)}.")


class _Envelope(msgspec.Struct, frozen=True):
    """The stored body, its parts kept as the bytes that were sent."""

    event: str
    data: msgspec.Raw
    timestamp: msgspec.Raw
    idempotency_key: str


class LoggedEvent(Struct, frozen=True, kw_only=True):
    """An event as its webhook deliveries carried it (`id` is its `idempotency_key` and `webhook-id`)."""

    id: str
    event: str
    data: msgspec.Raw
    timestamp: msgspec.Raw
    idempotency_key: str


class EventPage(Struct, frozen=True, kw_only=True):
    data: list[LoggedEvent]
    next_cursor: str | None


_envelope = msgspec.json.Decoder(_Envelope)


class _Place(msgspec.Struct, frozen=True, array_like=True):
    """Where a page stopped: the query it belongs to, the next page's number, and its last event's place."""

    query: str
    page: int
    created_at: dt.datetime
    seq: int


_place = msgspec.json.Decoder(_Place)


@procedure("events.list", scope="read:events", roles=AUDIT_ROLES)
async def list_events(ctx: Context, params: ListEvents) -> EventPage:
    """Your account's events, newest first, each exactly as its webhooks delivered it; filtered by `event` (a
    kind) and `since`, a page at a time (`next_cursor`). Kept as long as webhook deliveries are
    (RETENTION_WEBHOOK_DAYS): reconcile from here after your receiver was down."""
    since = moment("since", params.since)
    query = codec.fingerprint({"event": params.event, "since": since.isoformat() if since else None})
    cursors = CursorCodec(ctx.settings.secret_key, "events.list")
    position = codec.opened(cursors, params.cursor, query, _place) if params.cursor is not None else None
    days = ctx.settings.section("RETENTION_", RetentionSettings).webhook_days
    values = {
        "account_id": ctx.principal.account_id,
        "days": days,
        "kind": params.event,
        "since": since,
        "after_at": position.created_at if position else None,
        "after_seq": position.seq if position else None,
        "limit": params.per_page + 1,
    }
    rows = await (await ctx.conn.execute(_PAGE, values)).fetchall()
    data = [_logged(row["id"], bytes(row["body"])) for row in rows[: params.per_page]]
    next_cursor = None
    if len(rows) > params.per_page:
        last = rows[params.per_page - 1]
        page = position.page + 1 if position else 2
        next_cursor = cursors.encode(msgspec.json.encode(_Place(query, page, last["created_at"], last["seq"])))
    return EventPage(data=data, next_cursor=next_cursor)


def _logged(event_id: str, body: bytes) -> LoggedEvent:
    envelope = _envelope.decode(body)
    return LoggedEvent(
        id=event_id,
        event=envelope.event,
        data=envelope.data,
        timestamp=envelope.timestamp,
        idempotency_key=envelope.idempotency_key,
    )
