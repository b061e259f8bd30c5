"""The pages' lists (the hiring desk's, a candidate's home), a page at a time, newest first: a page's last row's
`(created_at, id)` as a signed cursor (`rpc.core.cursor`) bound to the list and its filter, so that a page link
can be neither forged nor carried to another list. A cursor that does not open starts the list again from the
newest."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec

from rpc.core.cursor import CursorCodec
from rpc.settings import Settings

# The condition a page after the first adds, on a table aliased `alias`: the rows older than the cursor's.
AFTER = "AND ({alias}.created_at, {alias}.id) < (%(after_at)s, %(after_id)s::uuid)"


class Place(msgspec.Struct, frozen=True, array_like=True):
    """Where a page stopped: its last row's creation time and id."""

    created_at: dt.datetime
    id: str


_place = msgspec.json.Decoder(Place)


def opened(settings: Settings, name: str, cursor: str | None) -> Place | None:
    """The place `cursor` names in the list `name` (a list and its filter), or None: the first page."""
    if not cursor:
        return None
    payload = CursorCodec(settings.secret_key, name).decode(cursor)
    if payload is None:
        return None
    try:
        return _place.decode(payload)
    except msgspec.DecodeError:
        return None


def condition(place: Place | None, alias: str) -> tuple[str, dict[str, Any]]:
    """The SQL a page adds to its query's `WHERE`, and its values."""
    if place is None:
        return "", {}
    return AFTER.format(alias=alias), {"after_at": place.created_at, "after_id": place.id}


def next_cursor(settings: Settings, name: str, rows: Sequence[dict[str, Any]], per_page: int) -> str | None:
    """The cursor of the page after `rows` (read with one row more than a page), or None on the last page."""
    if len(rows) <= per_page:
        return None
    last = rows[per_page - 1]
    place = Place(created_at=last["created_at"], id=last["id"])
    return CursorCodec(settings.secret_key, name).encode(msgspec.json.encode(place))
