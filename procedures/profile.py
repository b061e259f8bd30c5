"""The caller's own profile."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import msgspec

from procedures.files import owned
from rpc.api import (
    NO_NUL,
    Context,
    Empty,
    Id,
    NotFound,
    Params,
    PersonName,
    PlainText,
    changes,
    parse_id,
    procedure,
    set_clause,
)
from rpc.privacy.profile import COLUMNS, MAX_BIO_LENGTH, Profile, profile_of, read_profile

Bio = Annotated[str, msgspec.Meta(max_length=MAX_BIO_LENGTH, pattern=NO_NUL)]


class UpdateProfile(Params, frozen=True, kw_only=True):
    display_name: PersonName | None | msgspec.UnsetType = msgspec.UNSET
    headline: PlainText | None | msgspec.UnsetType = msgspec.UNSET
    location: PlainText | None | msgspec.UnsetType = msgspec.UNSET
    bio: Bio | None | msgspec.UnsetType = msgspec.UNSET
    resume_file_id: Id | msgspec.UnsetType = msgspec.UNSET
    notify_new_applications: (
        Annotated[bool, msgspec.Meta(description="false: no e-mail for each new application to your account's jobs.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET

    example: ClassVar[Mapping[str, Any]] = {
        "display_name": "Ada Lovelace",
        "headline": "Backend engineer, Python and PostgreSQL",
        "location": "Berlin",
        "bio": "Ten years of building APIs that other people like to call.",
    }


_EDITABLE = ("display_name", "headline", "location", "bio", "notify_new_applications")


@procedure("profile.me", scope="read:profile")
async def me(ctx: Context, params: Empty) -> Profile:
    """Your profile."""
    return await read_profile(ctx.conn, ctx.principal.user_id)


@procedure("profile.update", scope="write:profile", write=True)
async def update(ctx: Context, params: UpdateProfile) -> Profile:
    """Change any of your display name, headline, location, bio and résumé (`resume_file_id`, a file you
    uploaded); `null` clears a field. A member of a hiring account turns the e-mail of each new application off
    with `notify_new_applications: false`."""
    changed = changes(params, _EDITABLE)
    if params.resume_file_id is not None and params.resume_file_id is not msgspec.UNSET:
        await owned(ctx, [params.resume_file_id])
        changed["resume_file_id"] = parse_id(params.resume_file_id)
    elif params.resume_file_id is None:
        changed["resume_file_id"] = None
    if not changed:
        return await me(ctx, Empty())
    cursor = await ctx.conn.execute(
        f"UPDATE users SET {set_clause(changed)} WHERE id = %(id)s RETURNING {COLUMNS}",
        {**changed, "id": ctx.principal.user_id},
    )
    row = await cursor.fetchone()
    if row is None:
        raise NotFound("Your user no longer exists.")
    return profile_of(row)
