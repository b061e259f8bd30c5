"""The caller's own profile."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import msgspec

from procedures.common import NO_NUL, PlainText, changes, set_clause
from rpc.core.context import Context
from rpc.core.envelope import Empty, Params, Struct
from rpc.core.errors import NotFound
from rpc.core.registry import procedure
from rpc.core.types import Role

Bio = Annotated[str, msgspec.Meta(max_length=5_000, pattern=NO_NUL)]


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
    created_at: dt.datetime
    updated_at: dt.datetime


class UpdateProfile(Params, frozen=True, kw_only=True):
    display_name: PlainText | None | msgspec.UnsetType = msgspec.UNSET
    headline: PlainText | None | msgspec.UnsetType = msgspec.UNSET
    location: PlainText | None | msgspec.UnsetType = msgspec.UNSET
    bio: Bio | None | msgspec.UnsetType = msgspec.UNSET


_EDITABLE = ("display_name", "headline", "location", "bio")
_COLUMNS = """id::text AS id, email, display_name, role, account_id::text AS account_id,
              headline, location, bio, created_at, updated_at"""
_SELECT = f"SELECT {_COLUMNS} FROM users WHERE id = %(id)s"


@procedure("profile.me", scope="read:profile")
async def me(ctx: Context, params: Empty) -> Profile:
    """Your profile."""
    cursor = await ctx.conn.execute(_SELECT, {"id": ctx.principal.user_id})
    row = await cursor.fetchone()
    if row is None:
        raise NotFound("Your user no longer exists.")
    return Profile(**row)


@procedure("profile.update", scope="write:profile", write=True)
async def update(ctx: Context, params: UpdateProfile) -> Profile:
    """Change any of your display name, headline, location and bio; `null` clears a field."""
    changed = changes(params, _EDITABLE)
    if not changed:
        return await me(ctx, Empty())
    cursor = await ctx.conn.execute(
        f"UPDATE users SET {set_clause(changed)} WHERE id = %(id)s RETURNING {_COLUMNS}",
        {**changed, "id": ctx.principal.user_id},
    )
    row = await cursor.fetchone()
    if row is None:
        raise NotFound("Your user no longer exists.")
    return Profile(**row)
