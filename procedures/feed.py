"""Incremental sync feeds (`jobs.changes`, `applications.changes`): opaque cursors and the one feed query.

A feed's position is `(change_xid, id)`: the id of the transaction that last wrote the row (stamped by the
`stamp_change` trigger on every insert and update) and the row's id. A read returns only rows whose
transaction is older than the oldest one still running (`pg_snapshot_xmin` of the statement's own snapshot):
every such transaction has ended, so no row can ever appear later behind a position already handed out,
whatever order transactions commit in. docs/sync.md explains it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Generic, TypeVar

import msgspec

from rpc.api import Context, InvalidParams, Params, Struct
from rpc.core.cursor import CursorCodec

T = TypeVar("T")

_START = (0, uuid.UUID(int=0))

Cursor = Annotated[
    str,
    msgspec.Meta(
        max_length=200,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="`next_cursor` of the previous answer of this same procedure; absent: from the beginning.",
    ),
]


class FeedParams(Params, frozen=True, kw_only=True):
    """Where to continue, and how many changed objects at most."""

    cursor: Cursor | None = None
    per_page: Annotated[int, msgspec.Meta(ge=1, le=1000, description="Objects per answer, 1..1000.")] = 100

    # No cursor: the first call of a sync starts at the beginning; each answer's next_cursor continues it.
    example: ClassVar[Mapping[str, Any]] = {"per_page": 100}


class Feed(Struct, Generic[T], frozen=True, kw_only=True):
    """What changed after the cursor, each object once in its current state; a feed has no total."""

    data: list[T]
    next_cursor: str
    has_more: bool


@dataclass(frozen=True, slots=True)
class FeedQuery:
    """One feed: its procedure's name (bound into its cursors), what to select, from where, for whom.

    `source` is a FROM clause whose `table` alias holds `change_xid` and `id`; `condition` limits the rows to
    what the caller may see and may use the named `values`.
    """

    name: str
    columns: str
    source: str
    table: str


async def read_feed(
    ctx: Context, feed: FeedQuery, params: FeedParams, condition: str, values: dict[str, Any]
) -> tuple[list[dict[str, Any]], str, bool]:
    """The rows after the cursor (at most `per_page`), the cursor after them, and whether more are ready now."""
    xid, after = _decode(ctx.settings.secret_key, feed.name, params.cursor) if params.cursor is not None else _START
    t = feed.table
    cursor = await ctx.conn.execute(
        f"""
        SELECT {feed.columns}, {t}.change_xid::text AS _xid, {t}.id AS _id {feed.source}
        WHERE ({condition})
          AND ({t}.change_xid, {t}.id) > (%(_xid)s::xid8, %(_after)s)
          AND {t}.change_xid < pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY {t}.change_xid, {t}.id
        LIMIT %(_limit)s
        """,
        {**values, "_xid": str(xid), "_after": after, "_limit": params.per_page + 1},
    )
    rows = await cursor.fetchall()
    has_more = len(rows) > params.per_page
    del rows[params.per_page :]
    if rows:
        xid, after = int(rows[-1]["_xid"]), rows[-1]["_id"]
    for row in rows:
        del row["_xid"], row["_id"]
    return rows, _encode(ctx.settings.secret_key, feed.name, xid, after), has_more


def _encode(secret_key: str, name: str, xid: int, after: uuid.UUID) -> str:
    return CursorCodec(secret_key, name).encode(xid.to_bytes(8, "big") + after.bytes)


def _decode(secret_key: str, name: str, cursor: str) -> tuple[int, uuid.UUID]:
    """The position a cursor of this feed names; `422` for anything this server did not hand out for it."""
    payload = CursorCodec(secret_key, name).decode(cursor)
    if payload is None or len(payload) != 24:
        message = f"Not a cursor of {name}: pass back the next_cursor it returned, or none to start over."
        raise InvalidParams([{"field": "cursor", "message": message}])
    return int.from_bytes(payload[:8], "big"), uuid.UUID(bytes=payload[8:])
