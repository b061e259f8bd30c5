"""What a candidate does from their home, each through the procedure the API offers them (`calls`), behind the
panel's sign-in, CSRF check and budget of changes (`rpc.panel.handler.page`): withdrawing an application after a
page that asks to confirm it (`applications.withdraw`), answering an offer (`offers.respond`), and taking an
interview into their calendar as an `.ics` file (`interviews.get`, served to the interview's candidate only)."""

from __future__ import annotations

from starlette.responses import Response

from procedures.applications import FINAL
from procedures.applications.access import find
from procedures.applications.interviews import calendar
from procedures.applications.interviews.invitations import brief, candidate_meeting
from procedures.applications.interviews.reads import get_interview
from procedures.applications.offers.shapes import RespondToOffer
from procedures.applications.offers.writes import respond_to_offer
from procedures.applications.pipeline import withdraw
from procedures.public_pages import calls, home
from procedures.public_pages.site import render
from rpc.api import IdParams, NotFound
from rpc.panel.handler import Panel, page
from rpc.web.pages import redirect

CALENDAR_HEADERS = {
    "Content-Disposition": 'attachment; filename="interview.ics"',
    "Cache-Control": "private, no-store",
    "X-Content-Type-Options": "nosniff",
}


@page
async def confirm_withdrawal(panel: Panel) -> Response:
    """`GET /me/applications/{id}/withdraw`: what withdrawing does, and a button that does it."""
    if panel.user.role != "candidate":
        return redirect("/panel")
    ctx = await calls.context(panel, withdraw)
    found = await find(ctx, panel.path("id"), lock=False)
    if found.application.candidate_id != panel.user.user_id:
        raise NotFound()
    final = found.application.status in FINAL
    return render("withdraw.html", user=panel.user, found=found, final=final, statuses=home.STATUSES)


@page
async def withdraw_application(panel: Panel) -> Response:
    """`POST /me/applications/{id}/withdraw`."""
    if refused := await calls.attempt(panel, withdraw, IdParams(id=panel.path("id"))):  # final, or not a candidate
        return await home.page(panel.request, panel.conn, panel.user, status=refused.status, error=refused.message)
    return redirect("/me?notice=withdrawn")


@page
async def respond(panel: Panel) -> Response:
    """`POST /me/offers/{id}/respond` with `decision` (the button pressed: `accept` or `decline`) and an optional
    `note` for the employer."""
    sent = {"id": panel.path("id"), "decision": panel.field("decision"), "note": panel.field("note").strip() or None}
    try:
        answered = await calls.run(panel, respond_to_offer, calls.params(RespondToOffer, sent))
    except calls.Refused as refused:  # expired, already answered, withdrawn meanwhile
        now = refused.details.get("from")
        error = f"This offer is {now} now: it can no longer be answered." if now else refused.message
        return await home.page(panel.request, panel.conn, panel.user, status=refused.status, error=error)
    return redirect(f"/me?notice={answered.status}#offer-{answered.id}")


@page
async def interview_file(panel: Panel) -> Response:
    """`GET /me/interviews/{id}.ics`: the interview as the candidate's invitation says it (company, title, time in
    its zone, place or link; nothing internal), with the same UID, so that a calendar that also got the mail keeps
    one event. Anyone but its candidate gets the 404 page."""
    ctx = await calls.context(panel, get_interview)
    interview = await get_interview(ctx, IdParams(id=panel.path("id")))
    if interview.candidate_id != panel.user.user_id:
        raise NotFound()
    meeting = candidate_meeting(panel.services.settings, await brief(ctx, interview.id))
    return Response(calendar.single(meeting), media_type="text/calendar; charset=utf-8", headers=CALENDAR_HEADERS)
