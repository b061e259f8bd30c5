"""An interviewer's scorecard from the application's page (`scorecards.submit`): a recommendation, a rating of
each of the job's attributes the interviewer chose to rate (`rating:<attribute>`, 1..4) and notes. Reading the
scorecards is the page's, through the one no-peeking rule (`dossier`)."""

from __future__ import annotations

from starlette.responses import Response

from procedures.applications.interviews.reads import get_interview
from procedures.applications.scorecards.api import submit
from procedures.applications.scorecards.shapes import SubmitScorecard
from procedures.desk.application import show
from procedures.desk.pages import back_to, desk_page, sent_back
from procedures.public_pages import calls
from rpc.api import IdParams
from rpc.panel.handler import Panel

RATING = "rating:"  # the prefix of each attribute's field: `rating:SQL`


def form_name(interview_id: str) -> str:
    """The name of an interview's scorecard form among the page's forms."""
    return f"scorecard-{interview_id}"


@desk_page
async def submit_scorecard(panel: Panel) -> Response:
    """`POST /panel/interviews/{id}/scorecard` with `recommendation`, `rating:<attribute>` and `notes`."""
    interview = await calls.run(panel, get_interview, IdParams(id=panel.path("id")))
    ratings = {name.removeprefix(RATING): panel.field(name) for name in panel.form if name.startswith(RATING)}
    notes = panel.field("notes")
    values = {"recommendation": panel.field("recommendation"), "notes": notes, "ratings": ratings}
    sent = {
        "interview_id": interview.id,
        "recommendation": values["recommendation"],
        "ratings": [
            {"attribute": attribute, "rating": int(rating)} for attribute, rating in ratings.items() if rating.isdigit()
        ],
        "notes": notes.replace("\r\n", "\n") or None,
    }
    try:
        await calls.run(panel, submit, calls.params(SubmitScorecard, sent), once=True)
    except calls.Refused as refused:
        form = {form_name(interview.id): sent_back(values, refused)}
        return await show(panel, interview.application_id, form, refused.status)
    return back_to(f"/panel/applications/{interview.application_id}", "scorecard", f"interview-{interview.id}")
