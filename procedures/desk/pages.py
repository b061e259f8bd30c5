"""What every page of the desk shares: its templates (in front of the panel's), who may open it (employers and
admins, the roles the API's hiring procedures serve), its notices after a redirect, the words for each status, and
a form sent back with what was typed and what was wrong."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from procedures.applications import EMPLOYERS
from procedures.applications.interviews.invitations import wall_time
from procedures.public_pages.calls import Refused
from procedures.public_pages.jobposting import LABELS
from rpc.panel.handler import Panel, error_page, page
from rpc.panel.pages import PanelPages
from rpc.web.pages import redirect

PAGES = PanelPages("procedures.desk")

APPLICATION_STATUSES = {
    "pending": "New",
    "reviewed": "Reviewed",
    "interview_scheduled": "Interviewing",
    "offered": "Offered",
    "hired": "Hired",
    "rejected": "Rejected",
    "withdrawn": "Withdrawn",
}
JOB_STATUSES = {"draft": "Draft", "published": "Published", "closed": "Closed"}
# Messages shown after a redirect, chosen by a fixed key in the query string (never free text).
NOTICES = {
    "job_created": "The job was saved as a draft. Publish it when it is ready: then it takes applications.",
    "job_saved": "The job was saved.",
    "job_published": "The job is published: its page is public, and alerts that match it are sent.",
    "job_closed": "The job is closed: it takes no more applications. Its applicants stay here.",
    "reviewed": "Your rating and notes were saved.",
    "moved": "The application moved on.",
    "rejected": "The application was rejected. The candidate is told by e-mail, courteously and without reasons.",
    "scheduled": "The interview is booked. Everyone on it gets an invitation their calendar understands.",
    "rescheduled": "The interview was changed. Everyone on it gets the updated invitation.",
    "interview_cancelled": "The interview was cancelled. Everyone on it gets a cancellation for their calendar.",
    "scorecard": "Your scorecard was submitted; it is final.",
    "offer_created": "The offer was created.",
    "offer_decided": "Your decision on the offer was saved.",
    "offer_sent": "The offer was sent. The candidate answers it on their page.",
    "offer_cancelled": "The offer was withdrawn.",
}


@dataclass(frozen=True)
class FormState:
    """One form of a page: the values it shows, the message of each field at fault, and a sentence for the form
    as a whole."""

    values: Mapping[str, Any] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)
    message: str | None = None


def sent_back(values: Mapping[str, Any], refused: Refused, fields: Mapping[str, str] | None = None) -> FormState:
    """A form as its sender typed it, with the procedure's refusal placed on the form's own fields (`fields` maps
    a parameter's name to the field that sets it)."""
    errors: dict[str, str] = {}
    elsewhere = []  # a parameter the form has no field for: said above the form
    for name, message in refused.fields.items():
        field_name = (fields or {}).get(name, name)
        if field_name in values:
            errors[field_name] = message
        else:
            elsewhere.append(message)
    opening = [said(refused)] if errors or not elsewhere else []
    return FormState(values=values, errors=errors, message=" ".join(opening + elsewhere))


def said(refused: Refused) -> str:
    """A refusal in the desk's words: an invalid move names the statuses as the pages do."""
    source, target = refused.details.get("from"), refused.details.get("to")
    if isinstance(source, str) and isinstance(target, str):
        if source == target:
            return f"It is already {_label(source)}."
        return f"It is {_label(source)} now, so it cannot become {_label(target)}. Reload the page to see it as it is."
    return refused.message


def _label(status: str) -> str:
    return APPLICATION_STATUSES.get(status, status.replace("_", " ")).lower()


Handler = Callable[[Panel], Awaitable[Response]]


def desk_page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A panel page (`rpc.panel.handler.page`) for the hiring roles; anyone else is told whose it is."""

    @page
    @functools.wraps(handler)
    async def hiring_only(panel: Panel) -> Response:
        if panel.user.role not in EMPLOYERS:
            message = "The hiring desk belongs to hiring accounts: their employers and admins publish jobs here."
            return error_page(403, "Jobs", message, user=panel.user)
        return await handler(panel)

    return hiring_only


def render(panel: Panel, template: str, status: int = 200, **values: Any) -> Response:
    """A desk page, under Hiring > Jobs in the navigation, with the notice its address names."""
    notice = NOTICES.get(panel.request.query_params.get("notice", ""))
    context = panel.context(
        section="jobs",
        notice=notice,
        application_statuses=APPLICATION_STATUSES,
        job_statuses=JOB_STATUSES,
        employment_types=LABELS,
        wall_time=wall_time,
        **values,
    )
    return PAGES.render(f"desk/{template}", context, status)


def back_to(path: str, notice: str, anchor: str = "") -> Response:
    """The `303` after a form: to `path`, with a notice (one of `NOTICES`) and a place on the page."""
    assert notice in NOTICES, notice
    return redirect(f"{path}?notice={notice}{'#' + anchor if anchor else ''}")
