"""Deciding on an application from its page: the rating and notes (`applications.review`), a move along the
pipeline (`applications.update_status`), a rejection after a page that asks to confirm it, and the files it was
sent with (`files.get`: a short-lived link, the download recorded in the account's audit log)."""

from __future__ import annotations

import urllib.parse

from starlette.responses import Response

from procedures.applications import Review, UpdateStatus
from procedures.applications.pipeline import review, update_status
from procedures.desk import dossier as dossiers
from procedures.desk.application import show
from procedures.desk.pages import back_to, desk_page, render, sent_back
from procedures.files import get as get_file
from procedures.public_pages import calls
from rpc.api import IdParams
from rpc.panel.handler import Panel
from rpc.web.pages import redirect


@desk_page
async def save_review(panel: Panel) -> Response:
    """`POST /panel/applications/{id}/review` with `rating` (1..5, or empty for none) and `notes`."""
    application_id = panel.path("id")
    values = {"rating": panel.field("rating"), "notes": panel.field("notes")}
    rating = int(values["rating"]) if values["rating"].isdigit() else values["rating"] or None
    sent = {"id": application_id, "rating": rating, "notes": values["notes"].replace("\r\n", "\n") or None}
    try:
        await calls.run(panel, review, calls.params(Review, sent))
    except calls.Refused as refused:
        return await show(panel, application_id, {"review": sent_back(values, refused)}, refused.status)
    return back_to(f"/panel/applications/{application_id}", "reviewed", "review")


@desk_page
async def move(panel: Panel) -> Response:
    """`POST /panel/applications/{id}/move` with `status`, one of the buttons the page shows. A rejection is asked
    to be confirmed first."""
    application_id = panel.path("id")
    status = panel.field("status")
    if status == "rejected":
        return redirect(f"/panel/applications/{application_id}/reject")
    return await _moved(panel, application_id, status, "moved")


@desk_page
async def confirm_reject(panel: Panel) -> Response:
    """`GET /panel/applications/{id}/reject`: what a rejection does, and a button that does it."""
    dossier = await dossiers.read(panel, panel.path("id"))
    return render(panel, "reject.html", d=dossier, application=dossier.found.application)


@desk_page
async def reject(panel: Panel) -> Response:
    """`POST /panel/applications/{id}/reject`."""
    return await _moved(panel, panel.path("id"), "rejected", "rejected")


async def _moved(panel: Panel, application_id: str, status: str, notice: str) -> Response:
    try:
        await calls.run(panel, update_status, calls.params(UpdateStatus, {"id": application_id, "status": status}))
    except calls.Refused as refused:
        return await show(panel, application_id, {"move": sent_back({}, refused)}, refused.status)
    return back_to(f"/panel/applications/{application_id}", notice)


@desk_page
async def download(panel: Panel) -> Response:
    """`GET /panel/files/{id}`: a résumé or attachment sent to the account's jobs, through `files.get` — a link
    valid for minutes, whose download the audit log records — to which the browser is sent."""
    file = await calls.run(panel, get_file, IdParams(id=panel.path("id")))  # another account's: the 404 page
    link = urllib.parse.urlsplit(file.download_url)
    return redirect(f"{link.path}?{link.query}")  # this site's, wherever the browser reached it
