"""The parameter types procedures share (ids, texts, times) and the helpers that read them: one id is `404` when
malformed, one time is RFC 3339 with its offset, one partial update writes only the fields sent."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar

import msgspec

from rpc.core.envelope import Params
from rpc.core.errors import InvalidParams, NotFound

# PostgreSQL text cannot hold NUL, so no string parameter may contain one.
NO_NUL = r"^[^\x00]*$"
# Whitespace spelled out, never `\s`: the patterns are published in /openapi.json, and Python's `\s` also
# matches \x1c-\x1f, which ECMA-262's (every JSON Schema validator's) does not.
SPACE = r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_NO_NUL_NOT_BLANK = rf"^[^\x00]*[^\x00{SPACE}][^\x00]*$"

# Any JSON scalar is taken: a malformed id names no object, so it is `404`, never `422` (docs/decisions.md).
Id = Annotated[str | int | float | bool | None, msgspec.Meta(description="An opaque object id (a string).")]
ShortText = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=_NO_NUL_NOT_BLANK)]
PlainText = Annotated[str, msgspec.Meta(max_length=200, pattern=NO_NUL)]
# A person's name: shown in pages and mail, so no control character or line break (as at sign-up).
PersonName = Annotated[str, msgspec.Meta(max_length=200, pattern=r"^[^\x00-\x1f\x7f\x85\u2028\u2029]*$")]
LongText = Annotated[str, msgspec.Meta(max_length=20_000, pattern=NO_NUL)]
# The id in /openapi.json's examples: shaped like the ids the service hands out.
EXAMPLE_ID = "0f8b9c52-3a6e-4d1e-9a57-1c2d3e4f5a6b"


class IdParams(Params, frozen=True, kw_only=True):
    """The parameters of a procedure that takes one object by its id."""

    id: Id

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID}


def parse_id(value: Id, field: str = "id") -> uuid.UUID:
    """The object id behind `value`; a malformed id names no object, so it is `404`, never `422`, whose message
    says what an id looks like (a caller who sent `123` learns that it is not one)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return uuid.UUID(value)
    shown = msgspec.json.encode(value).decode()[:60]
    raise NotFound(
        f"No such object: {field} must be an id as this service returns them, a UUID such as {EXAMPLE_ID}, "
        f"and {shown} is not one."
    )


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


Moment = Annotated[
    str,
    msgspec.Meta(
        max_length=64,
        description="A time: ISO 8601 with its offset, e.g. 2026-11-01T00:00:00Z.",
        extra_json_schema={"format": "date-time"},
    ),
]


def moment(field: str, text: str | None) -> dt.datetime | None:
    """A `Moment` parameter as a time; `422` on `field` unless it is an ISO 8601 date and time with its offset
    (read here, not by msgspec, which would also take a number as a Unix time)."""
    if text is None:
        return None
    written = text.upper()  # RFC 3339 allows `t` and `z`; Python reads only the capitals
    try:
        parsed = dt.datetime.fromisoformat(written)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in written:
        message = "Give a date and time with its offset, e.g. 2026-11-01T00:00:00Z."
        raise InvalidParams([{"field": field, "message": message}])
    return parsed
