"""A person's profile as they see it: the shape `profile.me` and `profile.update` answer with, and the export's
first section. It lives beside the erasure, which empties the same columns, so that the panel's download can
read it too."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rpc.core.envelope import Struct
from rpc.core.errors import NotFound
from rpc.core.types import Connection, Role
from rpc.files.model import File, as_json, nested

MAX_BIO_LENGTH = 5_000  # characters of `bio`, in profile.update and the panel's profile page


class Profile(Struct, frozen=True, kw_only=True):
    """A user as they see themselves."""

    id: str
    email: str | None
    display_name: str | None
    role: Role
    account_id: str
    headline: str | None
    location: str | None
    bio: str | None
    resume: File | None
    # A member of a hiring account is mailed each new application to its jobs unless this is false.
    notify_new_applications: bool
    created_at: dt.datetime
    updated_at: dt.datetime


COLUMNS = f"""id::text AS id, email, display_name, role, account_id::text AS account_id,
             headline, location, bio, notify_new_applications, created_at, updated_at,
             (SELECT {as_json("f")} FROM files AS f WHERE f.id = users.resume_file_id) AS resume"""
_SELECT = f"SELECT {COLUMNS} FROM users WHERE id = %(id)s"


async def read_profile(conn: Connection, user_id: str) -> Profile:
    """The user's profile; `NotFound` once they are gone (erased meanwhile)."""
    row = await (await conn.execute(_SELECT, {"id": user_id})).fetchone()
    if row is None:
        raise NotFound("Your user no longer exists.")
    return profile_of(row)


def profile_of(row: dict[str, Any]) -> Profile:
    """A row of `COLUMNS` as a Profile (its résumé arrives as JSON)."""
    return Profile(**{**row, "resume": nested(row["resume"])})
