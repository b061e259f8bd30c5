"""Types and helpers shared by the procedure modules."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec

from rpc.errors import NotFound
from rpc.types import Connection

# PostgreSQL text cannot hold NUL, so no string parameter may contain one.
NO_NUL = r"^[^\x00]*$"
_NO_NUL_NOT_BLANK = r"^[^\x00]*[^\x00\s][^\x00]*$"

# Any JSON scalar is taken: a malformed id names no object, so it is `404`, never `422` (CONTRACT.md §14).
Id = Annotated[str | int | float | bool | None, msgspec.Meta(description="An opaque object id (a string).")]
ShortText = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=_NO_NUL_NOT_BLANK)]
PlainText = Annotated[str, msgspec.Meta(max_length=200, pattern=NO_NUL)]
LongText = Annotated[str, msgspec.Meta(max_length=20_000, pattern=NO_NUL)]


def parse_id(value: Id) -> uuid.UUID:
    """The object id behind `value`; a malformed id names no object, so it is `404`, never `422`."""
    if not isinstance(value, str):
        raise NotFound()
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise NotFound() from exc


async def page_and_total(
    conn: Connection, page_query: str, total_query: str, values: dict[str, Any]
) -> tuple[list[dict[str, Any]], int]:
    """A page of rows and the exact total, from one statement: the total's one row joined to the page.

    One statement, not two in a pipeline: the driver's cost is per statement, and this is the hot path.
    Each row keeps its place in the page (`_position`); an empty page leaves the total's row alone.
    """
    cursor = await conn.execute(
        f"SELECT counted.total AS _total, page.* FROM ({total_query}) AS counted "
        f"LEFT JOIN LATERAL (SELECT row_number() OVER () AS _position, ordered.* FROM ({page_query}) AS ordered) "
        "AS page ON true ORDER BY page._position",
        values,
    )
    rows = await cursor.fetchall()
    total = int(rows[0]["_total"]) if rows else 0
    page = []
    for row in rows:
        del row["_total"]
        if row.pop("_position") is not None:
            page.append(row)
    return page, total


def changes(params: msgspec.Struct, columns: Iterable[str]) -> dict[str, Any]:
    """The fields of a partial update that were sent (UNSET ones were not), among `columns`."""
    return {name: value for name in columns if (value := getattr(params, name)) is not msgspec.UNSET}


def set_clause(changed: dict[str, Any]) -> str:
    """`col = %(col)s, ...` for columns from a fixed allow-list (never from input), plus updated_at."""
    return ", ".join([f"{column} = %({column})s" for column in changed] + ["updated_at = now()"])


def like_pattern(text: str) -> str:
    """A case-insensitive substring pattern for ILIKE, with the caller's wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
