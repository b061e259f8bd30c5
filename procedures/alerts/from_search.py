"""An alert saved from the public search (`/jobs`, "E-mail me jobs like these"): `GET /panel/alerts/new` with the
search's words and filters in its address shows them, ready to change, with how often to mail; its `POST` saves
the alert by `alerts.create`'s own code. Someone signed out is sent to sign in (or up) first and comes back here,
the search still in the address (`rpc.panel.handler.page`)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from procedures.alerts.api import create
from procedures.alerts.shapes import CreateAlert
from procedures.public_pages import calls
from procedures.public_pages.jobposting import LABELS
from rpc.panel.handler import Panel, page
from rpc.panel.pages import PanelPages
from rpc.web.pages import redirect

PAGES = PanelPages("procedures.alerts")
FILTERS = ("q", "location", "company")


@page
async def new_alert_page(panel: Panel) -> Response:
    """`GET /panel/alerts/new[?q=&location=&company=&employment_type=...]`: the search, and how often to mail."""
    query = panel.request.query_params
    values: dict[str, Any] = {name: query.get(name, "").strip() for name in FILTERS}
    values |= {"employment_type": query.getlist("employment_type"), "frequency": "daily"}
    return _form(panel, values)


@page
async def save_alert(panel: Panel) -> Response:
    """`POST /panel/alerts`: the alert saved, then the person's alerts."""
    values: dict[str, Any] = {name: panel.field(name).strip() for name in (*FILTERS, "frequency")}
    values["employment_type"] = panel.fields("employment_type")
    sent = {name: value or None for name, value in values.items()}
    try:
        await calls.run(panel, create, calls.params(CreateAlert, sent))
    except calls.Refused as refused:  # unverified (403), 20 already (409), a filter refused (422)
        return _form(panel, values, refused, refused.status)
    return redirect("/panel/alerts?saved=1")


def _form(panel: Panel, values: dict[str, Any], refused: calls.Refused | None = None, status: int = 200) -> Response:
    errors = dict(refused.fields) if refused else {}
    context = panel.context(
        section="alerts",
        values=values,
        errors=errors,
        message=refused.message if refused else None,
        employment_types=LABELS,
    )
    return PAGES.render("alerts/new.html", context, status)
