"""Interviews from the desk: booking one for an application (`interviews.create`), changing its time, people or
place (`interviews.update`) and calling it off after a confirmation (`interviews.cancel`). The form asks for a day,
a time of day, the zone whose clocks say them, a length in minutes and the interviewers among the members; the
procedures check the rest (an interviewer or the candidate busy at that time is their `409`, said on the form)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from starlette.responses import Response

from procedures.applications.interviews.reads import get_interview
from procedures.applications.interviews.scheduling import cancel_interview, create_interview, update_interview
from procedures.applications.interviews.shapes import CancelInterview, CreateInterview, Interview, UpdateInterview
from procedures.desk import dossier as dossiers
from procedures.desk.application import show
from procedures.desk.pages import FormState, back_to, desk_page, render, said, sent_back
from procedures.desk.times import ZONES, instant, rfc3339, wall
from procedures.public_pages import calls
from rpc.api import IdParams
from rpc.panel.handler import Panel

# Where each of the procedures' parameters is set on the form.
FIELDS = {"starts_at": "time", "ends_at": "duration"}
LONGEST_MINUTES = 8 * 60


@desk_page
async def schedule(panel: Panel) -> Response:
    """`POST /panel/applications/{id}/interviews`."""
    application_id = panel.path("id")
    values = _posted(panel)
    try:
        params = calls.params(CreateInterview, {"application_id": application_id, **_booking(values)})
        await calls.run(panel, create_interview, params, once=True)
    except calls.Refused as refused:
        return await show(panel, application_id, {"interview": sent_back(values, refused, FIELDS)}, refused.status)
    return back_to(f"/panel/applications/{application_id}", "scheduled", "interviews")


@desk_page
async def edit_page(panel: Panel) -> Response:
    """`GET /panel/interviews/{id}`: the interview's form, to move it or change who is on it."""
    interview = await _interview(panel)
    start, clock = wall(interview.starts_at, interview.time_zone)
    minutes = int((interview.ends_at - interview.starts_at).total_seconds() // 60)
    values = {
        "date": start,
        "time": clock,
        "time_zone": interview.time_zone,
        "duration": str(minutes),
        "interviewer_ids": [one.user_id for one in interview.interviewers],
        "title": interview.title,
        "location": interview.location or "",
        "video_url": interview.video_url or "",
    }
    return await _edit(panel, interview, FormState(values=values))


@desk_page
async def save(panel: Panel) -> Response:
    """`POST /panel/interviews/{id}`: everyone still on it is invited again, anyone taken off told it is off."""
    interview = await _interview(panel)
    values = _posted(panel)
    try:
        sent = {"id": interview.id, **_booking(values)}
        if not values["title"]:
            del sent["title"]  # the title stays as it is
        await calls.run(panel, update_interview, calls.params(UpdateInterview, sent))
    except calls.Refused as refused:
        return await _edit(panel, interview, sent_back(values, refused, FIELDS), refused.status)
    return back_to(f"/panel/applications/{interview.application_id}", "rescheduled", "interviews")


@desk_page
async def confirm_cancel(panel: Panel) -> Response:
    """`GET /panel/interviews/{id}/cancel`."""
    interview = await _interview(panel)
    return await _cancelling(panel, interview)


@desk_page
async def cancel(panel: Panel) -> Response:
    """`POST /panel/interviews/{id}/cancel` with an optional `reason` (kept with the interview, never mailed)."""
    interview = await _interview(panel)
    reason = panel.field("reason").replace("\r\n", "\n") or None
    try:
        await calls.run(panel, cancel_interview, calls.params(CancelInterview, {"id": interview.id, "reason": reason}))
    except calls.Refused as refused:
        return await _cancelling(panel, interview, refused.status, said(refused))
    return back_to(f"/panel/applications/{interview.application_id}", "interview_cancelled", "interviews")


def _posted(panel: Panel) -> dict[str, Any]:
    names = ("date", "time", "time_zone", "duration", "title", "location", "video_url")
    return {**{name: panel.field(name).strip() for name in names}, "interviewer_ids": panel.fields("interviewer_ids")}


def _booking(values: dict[str, Any]) -> dict[str, Any]:
    """The form's values as the procedures' parameters: the start from its day, time and zone, the end a length
    later; an empty location or link is none."""
    starts_at = instant(values["date"], values["time"], values["time_zone"])
    duration = values["duration"]
    if not duration.isdigit() or not 0 < int(duration) <= LONGEST_MINUTES:
        message = f"Give the length in minutes, from 1 to {LONGEST_MINUTES}."
        raise calls.Refused(422, "Please correct the fields marked below.", {"duration": message})
    return {
        "starts_at": rfc3339(starts_at),
        "ends_at": rfc3339(starts_at + dt.timedelta(minutes=int(duration))),
        "time_zone": values["time_zone"],
        "interviewer_ids": values["interviewer_ids"],
        "title": values["title"] or None,
        "location": values["location"] or None,
        "video_url": values["video_url"] or None,
    }


async def _interview(panel: Panel) -> Interview:
    """The interview of the address, as `interviews.get` lets the signed-in member read it (else the 404)."""
    return await calls.run(panel, get_interview, IdParams(id=panel.path("id")))


async def _edit(panel: Panel, interview: Interview, form: FormState, status: int = 200) -> Response:
    dossier = await dossiers.read(panel, interview.application_id)
    return render(panel, "interview.html", status, d=dossier, interview=interview, form=form, zones=ZONES)


async def _cancelling(panel: Panel, interview: Interview, status: int = 200, error: str | None = None) -> Response:
    dossier = await dossiers.read(panel, interview.application_id)
    return render(panel, "interview_cancel.html", status, d=dossier, interview=interview, error=error)
