"""Reading the audit log (docs/privacy.md): an account's entries newest first, filtered, a page at a time.

One query behind both readers — the `audit.list` procedure and the panel's Settings > Audit log — so that they
filter, order and page alike. A cursor is opaque to its reader: the id to continue below, bound to the query it
came from (its filters and whose log it walks), so that it cannot be replayed against another query.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

import msgspec

from rpc.core.cursor import CursorCodec
from rpc.core.envelope import Struct
from rpc.core.errors import InvalidParams
from rpc.core.types import Connection, Role

# Who reads an account's log: its employers and admins (a platform admin's API call reads every account's).
AUDIT_ROLES: tuple[Role, ...] = ("employer", "admin")
COLUMNS = "id::text AS id, at, actor_id, actor_kind, action, target_id, client_address, user_agent"


class AuditEntry(Struct, frozen=True, kw_only=True):
    """One entry as its readers see it (the chain's hashes and the account stay inside)."""

    id: str
    at: dt.datetime
    actor_id: str | None
    actor_kind: str
    action: str
    target_id: str | None
    client_address: str | None
    user_agent: str | None


class AuditPage(Struct, frozen=True, kw_only=True):
    data: list[AuditEntry]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Filters:
    """Whose log (`account_id`; None: every account's) and which of its entries."""

    account_id: str | None
    action: str | None = None
    actor_id: str | None = None
    since: dt.datetime | None = None

    def key(self) -> str:
        """What a cursor is bound to: every filter and whose log it walks."""
        since = self.since.astimezone(dt.UTC).isoformat() if self.since else None
        query = [self.action, self.actor_id, since, self.account_id]
        return hashlib.sha256(msgspec.json.encode(query)).hexdigest()[:16]


# `audit_entries.id`, not `id`: ORDER BY would take the text column of that name (10 before 9).
_PAGE = f"""
SELECT {COLUMNS} FROM audit_entries
WHERE (%(account_id)s::uuid IS NULL OR account_id = %(account_id)s::uuid)
  AND (%(action)s::text IS NULL OR action = %(action)s)
  AND (%(actor_id)s::text IS NULL OR actor_id = %(actor_id)s)
  AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)
  AND (%(after)s::bigint IS NULL OR id < %(after)s)
ORDER BY audit_entries.id DESC LIMIT %(limit)s
"""


async def page(conn: Connection, filters: Filters, *, cursor: str | None, per_page: int, secret_key: str) -> AuditPage:
    """`per_page` entries matching `filters`, newest first, after `cursor` (None: from the newest); a cursor
    malformed or of another query is `InvalidParams` on field `cursor`."""
    key = filters.key()
    codec = CursorCodec(secret_key, "audit")
    values = {
        "account_id": filters.account_id,
        "action": filters.action,
        "actor_id": filters.actor_id,
        "since": filters.since,
        "after": _after(codec, cursor, key),
        "limit": per_page + 1,
    }
    rows = await (await conn.execute(_PAGE, values)).fetchall()
    data = [AuditEntry(**row) for row in rows[:per_page]]
    more = len(rows) > per_page
    return AuditPage(data=data, next_cursor=_cursor(codec, int(data[-1].id), key) if more else None)


def _cursor(codec: CursorCodec, last_id: int, key: str) -> str:
    return codec.encode(msgspec.json.encode((last_id, key)))


def _after(codec: CursorCodec, cursor: str | None, key: str) -> int | None:
    """The id a cursor continues below."""
    if cursor is None:
        return None
    payload = codec.decode(cursor)
    try:
        decoded = msgspec.json.decode(payload, type=tuple[int, str]) if payload is not None else None
    except msgspec.DecodeError:
        decoded = None
    if decoded is None or decoded[1] != key or not 0 < decoded[0] < 2**63:
        raise InvalidParams([{"field": "cursor", "message": "Not a cursor of this query: start again without it."}])
    return decoded[0]
