"""The opaque cursor of `jobs.search`: where the previous page stopped, which page it was, and the query it
belongs to (docs/search.md).

A cursor is signed (`rpc.core.cursor`), and checked for shape and for its query, so that a cursor used with
another query is a clear `422`, never a silently wrong page.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from typing import Any

import msgspec

from rpc.core.cursor import CursorCodec
from rpc.core.errors import InvalidParams


class Position(msgspec.Struct, frozen=True, array_like=True):
    """The first row of the next page is after this one: its query's fingerprint, that page's number, and
    the sort key of the row before it."""

    query: str
    page: int
    published_at: dt.datetime
    id: str
    score: float | None = None


_decoder = msgspec.json.Decoder(Position)


def fingerprint(query: dict[str, Any]) -> str:
    """A short digest of every parameter that decides which jobs match and in what order."""
    canonical = msgspec.json.encode(query, order="sorted")
    return hashlib.sha256(canonical).hexdigest()[:22]


def codec(secret_key: str) -> CursorCodec:
    return CursorCodec(secret_key, "jobs.search")


def encode(codec: CursorCodec, position: Position) -> str:
    return codec.encode(msgspec.json.encode(position))


def decode(codec: CursorCodec, cursor: str, query: str) -> Position:
    """The position a cursor names; `422` (field `cursor`) if it is malformed or belongs to another query."""
    raw = codec.decode(cursor)
    try:
        position = _decoder.decode(raw if raw is not None else b"")
    except (ValueError, msgspec.DecodeError) as exc:
        raise _refused("The cursor is malformed; pass next_cursor exactly as it was returned.") from exc
    if position.page < 1 or position.published_at.tzinfo is None or not _is_uuid(position.id):
        raise _refused("The cursor is malformed; pass next_cursor exactly as it was returned.")
    if position.query != query:
        raise _refused("The cursor belongs to another query; repeat every parameter but cursor and per_page.")
    return position


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _refused(message: str) -> InvalidParams:
    return InvalidParams([{"field": "cursor", "message": message}])
