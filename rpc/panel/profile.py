"""Account > Profile: the person's display name and headline, their e-mail (read-only), a password change
(the current password required) and "sign out everywhere". Both of the last two end every session, refresh
token and web session of the person, this browser's too; API keys and authorized apps stay."""

from __future__ import annotations

from starlette.responses import Response

from rpc.auth.people import MAX_NAME_LENGTH, end_sessions
from rpc.core.errors import InvalidCredentials, InvalidParams
from rpc.panel.handler import Panel, page
from rpc.web.pages import redirect

_PROFILE = "SELECT email, display_name, headline, issuer IS NULL AS built_in FROM users WHERE id = %(id)s"
_UPDATE = """
UPDATE users SET display_name = %(display_name)s, headline = %(headline)s, updated_at = now() WHERE id = %(id)s
"""


@page
async def profile_page(panel: Panel) -> Response:
    """`GET /panel/profile`."""
    return await _profile(panel)


@page
async def save_profile(panel: Panel) -> Response:
    """`POST /panel/profile` with `display_name` and `headline` (empty clears)."""
    values = {name: panel.field(name).strip() for name in ("display_name", "headline")}
    errors = {
        name: f"Use at most {MAX_NAME_LENGTH} characters, without control characters."
        for name, value in values.items()
        if len(value) > MAX_NAME_LENGTH or "\x00" in value
    }
    if errors:
        return await _profile(panel, status=400, errors=errors, values=values)
    await panel.conn.execute(_UPDATE, {"id": panel.user.user_id, **{k: v or None for k, v in values.items()}})
    return redirect("/panel/profile?notice=profile_saved")


@page
async def change_password(panel: Panel) -> Response:
    """`POST /panel/profile/password` with `current_password`, `new_password`: then sign in again."""
    current, new = panel.field("current_password"), panel.field("new_password")
    try:
        await panel.services.people.change_password(panel.conn, panel.user.user_id, current, new)
    except InvalidCredentials as exc:
        return await _profile(panel, status=400, errors={"current_password": exc.message})
    except InvalidParams as exc:
        errors = {entry["field"]: entry["message"] for entry in (exc.details or {}).get("errors", [])}
        return await _profile(panel, status=400, errors=errors)
    return _signed_out(panel)


@page
async def sign_out_everywhere(panel: Panel) -> Response:
    """`POST /panel/profile/sign-out-everywhere`."""
    async with panel.conn.transaction():
        await end_sessions(panel.conn, panel.user.user_id)
    return _signed_out(panel)


def _signed_out(panel: Panel) -> Response:
    response = redirect("/web/signin?next=/panel/profile")
    panel.web.sessions.clear_session_cookie(response)
    return response


async def _profile(
    panel: Panel, *, status: int = 200, errors: dict[str, str] | None = None, values: dict[str, str] | None = None
) -> Response:
    person = await (await panel.conn.execute(_PROFILE, {"id": panel.user.user_id})).fetchone()
    assert person is not None
    shown = values or {"display_name": person["display_name"] or "", "headline": person["headline"] or ""}
    return panel.render(
        "panel/profile.html", status, section="profile", person=person, values=shown, errors=errors or {}
    )
