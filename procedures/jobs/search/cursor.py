"""The opaque cursor of `jobs.search`: where the previous page stopped, which page it was, and the query it
belongs to (docs/search.md).

A cursor is signed (`rpc.core.cursor`), and checked for shape and for its query, so that a cursor used with
another query is a clear `422`, never a silently wrong page. `opened` does that for any list whose cursor holds
its query's fingerprint (`events.list` too).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import msgspec

from rpc.api import InvalidParams
from rpc.core.cursor import CursorCodec


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
    return opened(codec, cursor, query, _decoder, _well_formed)


class Placed(Protocol):
    """A place a cursor holds: whatever else it says, the fingerprint of the query it belongs to."""

    @property
    def query(self) -> str: ...


P = TypeVar("P", bound=Placed)


def opened(
    codec: CursorCodec,
    cursor: str,
    query: str,
    decoder: msgspec.json.Decoder[P],
    well_formed: Callable[[P], bool] = lambda _: True,
) -> P:
    """The place a cursor of a list names, read by `decoder`; `422` (field `cursor`) if this list did not hand it
    out, it is not `well_formed`, or it belongs to another query."""
    raw = codec.decode(cursor)
    try:
        place = decoder.decode(raw if raw is not None else b"")
    except (ValueError, msgspec.DecodeError) as exc:
        raise _refused(_MALFORMED) from exc
    if not well_formed(place):
        raise _refused(_MALFORMED)
    if place.query != query:
        raise _refused("The cursor belongs to another query; repeat every parameter but cursor and per_page.")
    return place


_MALFORMED = "The cursor is malformed; pass next_cursor exactly as it was returned."


def _well_formed(position: Position) -> bool:
    return position.page >= 1 and position.published_at.tzinfo is not None and _is_uuid(position.id)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _refused(message: str) -> InvalidParams:
    return InvalidParams([{"field": "cursor", "message": message}])
