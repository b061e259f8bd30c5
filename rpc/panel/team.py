"""Settings > Team (employers and admins of the account): the members, invitations (send, resend, revoke) and
removal after a confirmation. The rules are `rpc.auth.teams`', shared with `bin/admin invite`."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from rpc.auth.teams import TEAM_ROLES
from rpc.core.errors import Conflict, InvalidParams, NotFound
from rpc.panel.handler import Panel, page
from rpc.panel.ids import uuid_or_404
from rpc.web.pages import redirect


@page
async def team_page(panel: Panel) -> Response:
    """`GET /panel/team`."""
    return await _team(panel)


@page
async def invite(panel: Panel) -> Response:
    """`POST /panel/team/invitations` with `email`: the invitation is mailed (inviting again resends it). The
    answer is the same whether or not the address has a user: its invitation page tells the invitee."""
    _require_team_role(panel)
    email = panel.field("email")
    inviter = {"id": panel.user.user_id, "name": _name(panel)}
    try:
        await panel.services.teams.invite_member(panel.conn, panel.account_id, inviter, email, origin=panel.origin)
    except InvalidParams as exc:
        errors = {entry["field"]: entry["message"] for entry in (exc.details or {}).get("errors", [])}
        return await _team(panel, status=400, email=email, errors=errors)
    except Conflict as exc:
        return await _team(panel, status=409, email=email, errors={"email": exc.message})
    return redirect("/panel/team?notice=invitation_sent")


@page
async def resend(panel: Panel) -> Response:
    """`POST /panel/team/invitations/{id}/resend`: a new link, valid 7 days again; the old one dies."""
    _require_team_role(panel)
    await panel.services.teams.resend(panel.conn, panel.account_id, str(uuid_or_404(panel.path("id"))), _name(panel))
    return redirect("/panel/team?notice=invitation_resent")


@page
async def revoke(panel: Panel) -> Response:
    """`POST /panel/team/invitations/{id}/revoke`: its link stops working."""
    _require_team_role(panel)
    await panel.services.teams.revoke(panel.conn, panel.account_id, str(uuid_or_404(panel.path("id"))))
    return redirect("/panel/team?notice=invitation_revoked")


@page
async def confirm_remove(panel: Panel) -> Response:
    """`GET /panel/team/members/{id}/remove`: are you sure?"""
    member = await _member(panel)
    return panel.render("panel/team_remove.html", section="team", member=member)


@page
async def remove(panel: Panel) -> Response:
    """`POST /panel/team/members/{id}/remove`: the member leaves; their credentials stop at once."""
    member = await _member(panel)
    try:
        await panel.services.teams.remove_member(
            panel.conn, panel.account_id, panel.user.user_id, member["id"], panel.origin
        )
    except Conflict as exc:
        return panel.render("panel/team_remove.html", 409, section="team", member=member, error=exc.message)
    return redirect("/panel/team?notice=member_removed")


def _require_team_role(panel: Panel) -> None:
    if panel.user.role not in TEAM_ROLES:
        raise NotFound()


def _name(panel: Panel) -> str:
    return panel.user.display_name or panel.user.email or "A member of your team"


async def _member(panel: Panel) -> dict[str, Any]:
    _require_team_role(panel)
    member_id = str(uuid_or_404(panel.path("id")))
    for member in await panel.services.teams.members(panel.conn, panel.account_id):
        if member["id"] == member_id:
            return member
    raise NotFound()


async def _team(panel: Panel, *, status: int = 200, email: str = "", errors: dict[str, str] | None = None) -> Response:
    if panel.user.role not in TEAM_ROLES:
        return panel.render("panel/team.html", 404 if status == 200 else status, section="team", candidate=True)
    teams = panel.services.teams
    return panel.render(
        "panel/team.html",
        status,
        section="team",
        candidate=False,
        members=await teams.members(panel.conn, panel.account_id),
        invitations=await teams.open_invitations(panel.conn, panel.account_id),
        email=email,
        errors=errors or {},
    )
