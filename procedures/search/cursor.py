"""The opaque cursor of `jobs.search`: where the previous page stopped, which page it was, and the query it
belongs to (docs/search.md).

A cursor is not signed: it only names a position in the results of a query, so a forged one can do no more
than skip ahead, which any client may do by paging. It is checked for shape and for its query, so that a
cursor used with another query is a clear `422`, never a silently wrong page.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import uuid
from typing import Any

import msgspec

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


def encode(position: Position) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode(position)).rstrip(b"=").decode()


def decode(cursor: str, query: str) -> Position:
    """The position a cursor names; `422` (field `cursor`) if it is malformed or belongs to another query."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        position = _decoder.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError) as exc:
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
