"""The alerts' pages: the person's own list in the panel (Account > Job alerts, with delete), and the one-click
unsubscribe every alert mail links to (RFC 8058): `POST` deletes the alert without signing in, `GET` shows what
it is and a button that posts (a GET never changes anything: mail scanners follow links). As every page reached by
a token link, the `GET` hands the token to a clean address in a short-lived cookie (`rpc.web.link_cookie`), so
that logs see the token's address once, answered by a redirect."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from procedures.alerts import from_search
from procedures.alerts.mailing import describe
from procedures.alerts.shapes import COLUMNS
from rpc.api import NotFound
from rpc.core.crypto import token_hash
from rpc.panel.handler import Panel, page
from rpc.panel.ids import uuid_or_404
from rpc.panel.pages import PanelPages
from rpc.services import services
from rpc.web import link_cookie
from rpc.web.pages import redirect
from rpc.web.state import web

PAGES = PanelPages("procedures.alerts")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{43}$")  # 32 bytes, base64url without padding
_CLEAN = "/alerts/unsubscribe"  # the page's address without its token
TOKEN_LINKS = (_CLEAN + r"/([^/?]+)(?:\?.*)?",)  # the one-click link, redacted in the access log

_MINE = f"SELECT {COLUMNS} FROM job_alerts WHERE user_id = %(user_id)s ORDER BY created_at, id"
_DELETE_MINE = "DELETE FROM job_alerts WHERE id = %(id)s AND user_id = %(user_id)s RETURNING id"
_BY_TOKEN = f"SELECT {COLUMNS} FROM job_alerts WHERE unsubscribe_hash = %(hash)s"
_DELETE_BY_TOKEN = "DELETE FROM job_alerts WHERE unsubscribe_hash = %(hash)s"  # noqa: S105 - SQL, not a secret
NOTICES = {
    "deleted": "The alert was deleted: nothing more is mailed for it.",
    "saved": "The alert was saved. Jobs published from now on that match it are mailed to you.",
}


@page
async def alerts_page(panel: Panel) -> Response:
    """`GET /panel/alerts`: the person's alerts, each with its delete button."""
    alerts = await (await panel.conn.execute(_MINE, {"user_id": panel.user.user_id})).fetchall()
    for alert in alerts:
        alert["search"] = describe(alert)
    notice = next((text for key, text in NOTICES.items() if panel.request.query_params.get(key)), None)
    context = panel.context(section="alerts", alerts=alerts, notice=notice)
    return PAGES.render("alerts/alerts.html", context)


@page
async def delete_alert(panel: Panel) -> Response:
    """`POST /panel/alerts/{id}/delete`: one's own alert only (another's is the panel's 404)."""
    values = {"id": uuid_or_404(panel.path("id")), "user_id": panel.user.user_id}
    async with panel.conn.transaction():
        deleted = await (await panel.conn.execute(_DELETE_MINE, values)).fetchone()
    if deleted is None:
        raise NotFound()
    return redirect("/panel/alerts?deleted=1")


async def unsubscribe_link(request: Request) -> Response:
    """`GET /alerts/unsubscribe/{token}`: a `303` to the clean page, the token handed over in a cookie."""
    response = redirect(_CLEAN)
    link_cookie.hand_over(response, _CLEAN, request.path_params["token"], _secure(request))
    return response


async def unsubscribe_page(request: Request) -> Response:
    """`GET /alerts/unsubscribe`: the alert whose token the cookie holds, and a button that stops it. Changes
    nothing."""
    token = link_cookie.token(request)
    alert = None
    if _TOKEN.match(token):
        async with services(request).pool.connection() as conn:
            alert = await (await conn.execute(_BY_TOKEN, {"hash": token_hash(token)})).fetchone()
    if alert is None:
        return _render("alerts/unsubscribed.html", 404, gone=True)
    return _render("alerts/unsubscribe.html", 200, search=describe(alert), action=_CLEAN)


async def unsubscribe(request: Request) -> Response:
    """`POST /alerts/unsubscribe/{token}` (RFC 8058 one-click), or the page's button (`POST /alerts/unsubscribe`,
    the token in its cookie): the alert is deleted. Answered alike whether it still existed, so that a second click
    or a mail client's repeat is not an error."""
    token = request.path_params.get("token") or link_cookie.token(request)
    if _TOKEN.match(token):
        async with services(request).pool.connection() as conn, conn.transaction():
            await conn.execute(_DELETE_BY_TOKEN, {"hash": token_hash(token)})
    response = _render("alerts/unsubscribed.html", 200, gone=False)
    link_cookie.forget(response, _CLEAN, _secure(request))
    return response


def _secure(request: Request) -> bool:
    """Whether cookies are `Secure`: as the web sessions' are."""
    return web(request).sessions.secure


def _render(template: str, status: int, **values: object) -> Response:
    return PAGES.render(template, {"user": None, "csrf_token": "", "notice": None, **values}, status)


routes = [
    Route("/panel/alerts", alerts_page, methods=["GET"]),
    Route("/panel/alerts", from_search.save_alert, methods=["POST"]),
    Route("/panel/alerts/new", from_search.new_alert_page, methods=["GET"]),
    Route("/panel/alerts/{id}/delete", delete_alert, methods=["POST"]),
]
public_routes = [
    Route(_CLEAN, unsubscribe_page, methods=["GET"]),
    Route(_CLEAN, unsubscribe, methods=["POST"]),
    Route(_CLEAN + "/{token}", unsubscribe_link, methods=["GET"]),
    Route(_CLEAN + "/{token}", unsubscribe, methods=["POST"]),
]
