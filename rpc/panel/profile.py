"""Account > Profile: the person's display name, headline, location and bio, their e-mail (read-only), a password change
(the current password required), "sign out everywhere" and "download my data". The password change and
"sign out everywhere" end every session, refresh token and web session of the person, this browser's too; API
keys and authorized apps stay. The download is `profile.export`'s document, built and audited by the same code."""

from __future__ import annotations

import datetime as dt

from starlette.responses import Response

from rpc.auth.people import MAX_NAME_LENGTH, end_sessions, name_problem
from rpc.auth.teams import TEAM_ROLES
from rpc.core.envelope import encoder
from rpc.core.errors import InvalidCredentials, InvalidParams
from rpc.files.links import DownloadLinks
from rpc.panel.handler import Panel, page
from rpc.privacy.profile import MAX_BIO_LENGTH
from rpc.privacy.steps import export
from rpc.web.pages import redirect

_PROFILE = """
SELECT email, display_name, headline, location, bio, notify_new_applications, issuer IS NULL AS built_in
FROM users WHERE id = %(id)s
"""
_UPDATE = """
UPDATE users SET display_name = %(display_name)s, headline = %(headline)s, location = %(location)s, bio = %(bio)s,
                 notify_new_applications = coalesce(%(notify_new_applications)s, notify_new_applications),
                 updated_at = now()
WHERE id = %(id)s
"""


def _problem(name: str, value: str) -> str | None:
    """Why a field of the form is refused: a line break in a one-line field, or too many characters."""
    if name != "bio" and (problem := name_problem(value)):
        return problem
    if len(value) > _FIELDS[name] or "\x00" in value:
        return f"Use at most {_FIELDS[name]:,} characters, without control characters."
    return None


# What the form edits, with the most characters each takes (as profile.update does).
_FIELDS = {
    "display_name": MAX_NAME_LENGTH,
    "headline": MAX_NAME_LENGTH,
    "location": MAX_NAME_LENGTH,
    "bio": MAX_BIO_LENGTH,
}


@page
async def profile_page(panel: Panel) -> Response:
    """`GET /panel/profile`."""
    return await _profile(panel)


@page
async def save_profile(panel: Panel) -> Response:
    """`POST /panel/profile` with `display_name`, `headline`, `location` and `bio` (empty clears), and for a member
    of a hiring account `notify_new_applications` (the check box: sent when ticked, absent when not)."""
    values = {name: panel.field(name).strip() for name in _FIELDS}
    errors = {name: problem for name, value in values.items() if (problem := _problem(name, value))}
    if errors:
        return await _profile(panel, status=400, errors=errors, values=values)
    notify = panel.field("notify_new_applications") == "on" if panel.user.role in TEAM_ROLES else None
    await panel.conn.execute(
        _UPDATE,
        {"id": panel.user.user_id, "notify_new_applications": notify, **{k: v or None for k, v in values.items()}},
    )
    return redirect("/panel/profile?notice=profile_saved")


@page
async def change_password(panel: Panel) -> Response:
    """`POST /panel/profile/password` with `current_password`, `new_password`: then sign in again."""
    current, new = panel.field("current_password"), panel.field("new_password")
    try:
        await panel.services.people.change_password(panel.conn, panel.user.user_id, current, new, panel.origin)
    except InvalidCredentials as exc:
        return await _profile(panel, status=400, errors={"current_password": exc.message})
    except InvalidParams as exc:
        errors = {entry["field"]: entry["message"] for entry in (exc.details or {}).get("errors", [])}
        return await _profile(panel, status=400, errors=errors)
    return _signed_out(panel)


@page
async def sign_out_everywhere(panel: Panel) -> Response:
    """`POST /panel/profile/sign-out-everywhere` (audit: `sessions.revoked`)."""
    async with panel.conn.transaction():
        await end_sessions(panel.conn, panel.user.user_id)
        await panel.audit("sessions.revoked", panel.user.user_id)
    return _signed_out(panel)


@page
async def download_data(panel: Panel) -> Response:
    """`POST /panel/profile/export`: everything held about you as a JSON file, the document `profile.export`
    answers with, recorded as `profile.exported` in the transaction that reads it. A POST, so that a link or an
    image elsewhere cannot make the browser export (and audit) anything."""
    async with panel.conn.transaction():
        document = await export(
            panel.conn,
            panel.services.privacy,
            panel.user.user_id,
            account_id=panel.account_id,
            actor=panel.actor,
            origin=panel.origin,
            links=DownloadLinks(panel.web.settings),
        )
    name = f"hire-export-{dt.datetime.now(dt.UTC).date().isoformat()}.json"
    headers = {"Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store"}
    return Response(encoder.encode(document), media_type="application/json", headers=headers)


def _signed_out(panel: Panel) -> Response:
    response = redirect("/web/signin?next=/panel/profile")
    panel.web.sessions.clear_session_cookie(response)
    return response


async def _profile(
    panel: Panel, *, status: int = 200, errors: dict[str, str] | None = None, values: dict[str, str] | None = None
) -> Response:
    person = await (await panel.conn.execute(_PROFILE, {"id": panel.user.user_id})).fetchone()
    assert person is not None
    shown = values or {name: person[name] or "" for name in _FIELDS}
    return panel.render(
        "panel/profile.html",
        status,
        section="profile",
        person=person,
        values=shown,
        errors=errors or {},
        hiring=panel.user.role in TEAM_ROLES,  # who is told of each new application (the check box)
    )
