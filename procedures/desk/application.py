"""An application's page on the desk (`/panel/applications/{id}`, where the loop's mail links): who applied, the
cover letter, résumé and attachments, the history of moves, the rating and notes, a button for each move the
pipeline allows, the interviews with their scorecards, and the offers — each action a form of its own module
(`decisions`, `interviews`, `scorecards`, `offers`), which on a refusal shows this page again with the form as it
was sent and the error beside it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from starlette.responses import Response

from procedures.desk import dossier as dossiers
from procedures.desk.dossier import Dossier
from procedures.desk.pages import FormState, desk_page, render
from procedures.desk.times import ZONES, wall
from rpc.panel.handler import Panel

RECOMMENDATIONS = {"strong_yes": "Strong yes", "yes": "Yes", "no": "No", "strong_no": "Strong no"}
RATINGS = {1: "1 — weak", 2: "2", 3: "3", 4: "4 — strong"}
MOST_APPROVERS = 5
DEFAULT_ZONE = "UTC"

# The zone the account's latest interview was held in: where its people most likely are.
_USUAL_ZONE = """
SELECT time_zone FROM interviews WHERE account_id = %(account_id)s ORDER BY starts_at DESC, id DESC LIMIT 1
"""


@desk_page
async def application_page(panel: Panel) -> Response:
    """`GET /panel/applications/{id}`."""
    return await show(panel, panel.path("id"))


async def show(
    panel: Panel, application_id: str, sent: Mapping[str, FormState] | None = None, status: int = 200
) -> Response:
    """The page, with the forms in `sent` (by name) as they were sent and what was wrong with them."""
    dossier = await dossiers.read(panel, application_id)
    row = await (await panel.conn.execute(_USUAL_ZONE, {"account_id": dossier.found.job_account})).fetchone()
    forms = {**_blank(dossier, row["time_zone"] if row else DEFAULT_ZONE), **(sent or {})}
    return render(
        panel,
        "application.html",
        status,
        d=dossier,
        application=dossier.found.application,
        candidate=dossier.found.candidate,
        forms=forms,
        zones=ZONES,
        recommendations=RECOMMENDATIONS,
        ratings=RATINGS,
        approver_places=range(MOST_APPROVERS),
        empty=FormState(),
    )


def _blank(dossier: Dossier, zone: str) -> dict[str, FormState]:
    """The page's forms as they start: the review as it stands, an interview tomorrow at ten with the reader on
    it, an offer of the job's title that the candidate answers within a week."""
    application = dossier.found.application
    now = dt.datetime.now(dt.UTC)
    tomorrow, _ = wall(now + dt.timedelta(days=1), zone)
    in_a_week, _ = wall(now + dt.timedelta(days=7), zone)
    return {
        "review": FormState(values={"rating": str(application.rating or ""), "notes": application.notes or ""}),
        "interview": FormState(
            values={
                "date": tomorrow,
                "time": "10:00",
                "time_zone": zone,
                "duration": "60",
                "interviewer_ids": [dossier.reader],
            }
        ),
        "offer": FormState(
            values={
                "title": dossier.job.title,
                "currency": "EUR",
                "period": "year",
                "expires_date": in_a_week,
                "expires_time": "17:00",
                "time_zone": zone,
                "approver_ids": [],
            }
        ),
    }
