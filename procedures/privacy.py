"""A person's own data (docs/privacy.md): everything held about them in one document, their erasure, and the
account's audit log. The export and the log's reading are the framework's (`rpc.privacy.export`,
`rpc.audit.entries`), shared with the panel; these are their API faces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import msgspec

from procedures.common import NO_NUL, Moment, moment
from procedures.files import files_of
from rpc.audit import entries
from rpc.core.envelope import Empty, FieldError, Params, Struct
from rpc.core.errors import Conflict, InvalidParams, NotFound
from rpc.core.registry import procedure
from rpc.dispatch.context import Context
from rpc.privacy.erasure import LastMemberPaying, erase_user
from rpc.privacy.export import Export, export
from rpc.privacy.profile import read_profile


@procedure("profile.export", scope="read:profile")
async def export_profile(ctx: Context, params: Empty) -> Export:
    """Everything held about you, in one document (KVKK art. 11, GDPR arts. 15 and 20); the export is recorded
    in your account's audit log."""
    # A read runs outside a write transaction: the audit entry needs one of its own, committed with the export.
    async with ctx.conn.transaction():
        return await export(
            ctx.conn,
            ctx.principal.user_id,
            account_id=ctx.principal.account_id,
            actor=ctx.actor,
            origin=ctx.origin,
            links=files_of(ctx).links,
        )


class DeleteProfile(Params, frozen=True, kw_only=True):
    confirm: str

    example: ClassVar[Mapping[str, Any]] = {"confirm": "ada@example.com"}

    def __post_init__(self) -> None:
        if not self.confirm.strip():
            raise FieldError("confirm", "Type your e-mail address to confirm.")


class Deleted(Struct, frozen=True, kw_only=True):
    id: str
    deleted: bool


@procedure("profile.delete", scope="write:profile", write=True, emits=("user.deleted",))
async def delete(ctx: Context, params: DeleteProfile) -> Deleted:
    """Erase yourself: your profile, credentials and what you wrote in applications go; the applications stay
    for the employers, anonymized. `confirm` must be your e-mail address."""
    profile = await read_profile(ctx.conn, ctx.principal.user_id)
    if profile.email is None or params.confirm.strip().lower() != profile.email:
        raise InvalidParams([{"field": "confirm", "message": "Type your e-mail address exactly to confirm."}])
    try:
        erased = await erase_user(
            ctx.conn,
            ctx.emitter,
            profile.id,
            actor=ctx.actor,
            origin=ctx.origin,
        )
    except LastMemberPaying as exc:
        raise Conflict(
            "You are the last member of an account with an active subscription: cancel it or add a member first."
        ) from exc
    if not erased:
        raise NotFound("Your user no longer exists.")
    return Deleted(id=profile.id, deleted=True)


Action = Annotated[str, msgspec.Meta(max_length=100, pattern=NO_NUL)]
PerPage = Annotated[int, msgspec.Meta(ge=1, le=100)]
Cursor = Annotated[str, msgspec.Meta(max_length=200)]


class ListAudit(Params, frozen=True, kw_only=True):
    action: Action | None = None
    actor_id: Action | None = None
    since: Moment | None = None
    cursor: Cursor | None = None
    per_page: PerPage = 20

    example: ClassVar[Mapping[str, Any]] = {
        "action": "api_key.created",
        "since": "2026-11-01T00:00:00Z",
        "per_page": 20,
    }


@procedure("audit.list", scope="read:audit", roles=entries.AUDIT_ROLES)
async def list_audit(ctx: Context, params: ListAudit) -> entries.AuditPage:
    """Your account's audit log, newest first (a platform admin's: every account's), filtered by `action`,
    `actor_id` and `since`, a page at a time."""
    filters = entries.Filters(
        account_id=None if ctx.principal.is_admin else ctx.principal.account_id,
        action=params.action,
        actor_id=params.actor_id,
        since=moment("since", params.since),
    )
    return await entries.page(
        ctx.conn, filters, cursor=params.cursor, per_page=params.per_page, secret_key=ctx.settings.secret_key
    )
