"""Offers from the application's page: making one with its approvers in order (`offers.create`), approving or
rejecting it when it is one's turn (`offers.approve`), sending it to the candidate (`offers.send`) and withdrawing
it after a confirmation (`offers.cancel`). The page lists every version (`offers.list`)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from procedures.applications.offers.reads import get_offer
from procedures.applications.offers.shapes import ApproveOffer, CreateOffer, Offer
from procedures.applications.offers.writes import approve_offer, cancel_offer, create_offer, send_offer
from procedures.desk import dossier as dossiers
from procedures.desk.application import show
from procedures.desk.pages import FormState, back_to, desk_page, render, said, sent_back
from procedures.desk.times import instant, rfc3339
from procedures.public_pages import calls
from rpc.api import IdParams
from rpc.panel.handler import Panel

FIELDS = {"expires_at": "expires_date", "salary": "amount"}
_POSTED = ("title", "start_date", "amount", "currency", "period", "expires_date", "expires_time", "time_zone", "notes")


def form_name(offer_id: str) -> str:
    """The name of an offer's approval form among the page's forms."""
    return f"approve-{offer_id}"


@desk_page
async def create(panel: Panel) -> Response:
    """`POST /panel/applications/{id}/offers`: the terms, the day and time the candidate must answer by (in a
    zone), and up to five approvers in the order they decide (the form's lists, top to bottom)."""
    application_id = panel.path("id")
    values: dict[str, Any] = {name: panel.field(name).strip() for name in _POSTED}
    values["approver_ids"] = [one for one in panel.fields("approver_ids") if one]
    try:
        answer_by = instant(
            values["expires_date"],
            values["expires_time"],
            values["time_zone"],
            day_field="expires_date",
            clock_field="expires_time",
        )
        sent = {
            "application_id": application_id,
            "title": values["title"],
            "start_date": values["start_date"],
            "salary": {"amount": values["amount"], "currency": values["currency"].upper(), "period": values["period"]},
            "expires_at": rfc3339(answer_by),
            "approver_ids": values["approver_ids"],
            "notes": values["notes"].replace("\r\n", "\n") or None,
        }
        await calls.run(panel, create_offer, calls.params(CreateOffer, sent), once=True)
    except calls.Refused as refused:
        return await show(panel, application_id, {"offer": sent_back(values, refused, FIELDS)}, refused.status)
    return back_to(f"/panel/applications/{application_id}", "offer_created", "offers")


@desk_page
async def approve(panel: Panel) -> Response:
    """`POST /panel/offers/{id}/approve` with `decision` (the button: `approved` or `rejected`) and `note`."""
    offer = await _offer(panel)
    values = {"note": panel.field("note")}
    sent = {"id": offer.id, "decision": panel.field("decision"), "note": values["note"] or None}
    try:
        await calls.run(panel, approve_offer, calls.params(ApproveOffer, sent))
    except calls.Refused as refused:
        form = {form_name(offer.id): sent_back(values, refused)}
        return await show(panel, offer.application_id, form, refused.status)
    return back_to(f"/panel/applications/{offer.application_id}", "offer_decided", "offers")


@desk_page
async def send(panel: Panel) -> Response:
    """`POST /panel/offers/{id}/send`."""
    offer = await _offer(panel)
    if refused := await calls.attempt(panel, send_offer, IdParams(id=offer.id)):
        form = {form_name(offer.id): FormState(message=said(refused))}
        return await show(panel, offer.application_id, form, refused.status)
    return back_to(f"/panel/applications/{offer.application_id}", "offer_sent", "offers")


@desk_page
async def confirm_cancel(panel: Panel) -> Response:
    """`GET /panel/offers/{id}/cancel`."""
    return await _cancelling(panel, await _offer(panel))


@desk_page
async def cancel(panel: Panel) -> Response:
    """`POST /panel/offers/{id}/cancel`: withdrawn; a candidate it was sent to is told by e-mail."""
    offer = await _offer(panel)
    if refused := await calls.attempt(panel, cancel_offer, IdParams(id=offer.id)):
        return await _cancelling(panel, offer, refused.status, said(refused))
    return back_to(f"/panel/applications/{offer.application_id}", "offer_cancelled", "offers")


async def _offer(panel: Panel) -> Offer:
    """The offer of the address, as `offers.get` lets the signed-in member read it (else the 404)."""
    return await calls.run(panel, get_offer, IdParams(id=panel.path("id")))


async def _cancelling(panel: Panel, offer: Offer, status: int = 200, error: str | None = None) -> Response:
    dossier = await dossiers.read(panel, offer.application_id)
    return render(panel, "offer_cancel.html", status, d=dossier, offer=offer, error=error)
