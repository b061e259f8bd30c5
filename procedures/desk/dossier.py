"""Everything an application's page shows, read as the signed-in member through the procedures' own code and the
loop's own rules: the application (`applications.get`'s `find`), its job (`jobs.get`), its interviews
(`interviews.list`), its scorecards — only through `peeking.readable`, the one no-peeking rule — and its offers
(`offers.list`), with the history of its moves, the members of the job's account (who may interview and approve)
and the moves the pipeline allows from here (`moves.check_move`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import msgspec

from procedures.applications import FINAL, PIPELINE, Status
from procedures.applications.access import Found, employs, find
from procedures.applications.interviews.reads import list_interviews
from procedures.applications.interviews.shapes import Interview, ListInterviews
from procedures.applications.moves import check_move
from procedures.applications.offers.reads import list_offers
from procedures.applications.offers.shapes import ListOffers, Offer
from procedures.applications.pipeline import get_application
from procedures.applications.scorecards.peeking import readable
from procedures.applications.scorecards.shapes import Scorecard
from procedures.jobs.reads import get_job
from procedures.jobs.shapes import Job
from procedures.public_pages import calls
from rpc.api import Context, IdParams, InvalidTransition, NotFound
from rpc.panel.handler import Panel

MOST = 100  # interviews and offers shown on one application's page (the procedures' largest page)

_TEAM = """
SELECT id::text AS id, display_name, email FROM users
WHERE account_id = %(account_id)s AND role IN ('employer', 'admin') AND deleted_at IS NULL
ORDER BY lower(coalesce(display_name, email)), id
"""
_HISTORY = """
SELECT h.from_status, h.to_status, h.changed_at, h.changed_by::text AS changed_by
FROM application_status_history AS h
WHERE h.application_id = %(id)s
ORDER BY h.changed_at, h.id
"""


@dataclass(frozen=True)
class Dossier:
    """One application as its page shows it to one member of the job's account."""

    found: Found
    job: Job
    history: list[dict[str, Any]]
    interviews: list[Interview]
    scorecards: list[Scorecard]
    offers: list[Offer]
    team: list[dict[str, Any]]
    reader: str

    @property
    def candidate_name(self) -> str:
        candidate = self.found.candidate
        return candidate.display_name or candidate.email or "Erased candidate"

    @property
    def moves(self) -> list[Status]:
        """The statuses the pipeline allows a move to from here, in its order (rejection last)."""
        return [target for target in (*PIPELINE, "rejected") if _allowed(self.found.application.status, target)]

    @property
    def final(self) -> bool:
        return self.found.application.status in FINAL

    def name(self, user_id: str | None) -> str:
        """A person as the page names them: a member by name or e-mail, the candidate as such."""
        if user_id == self.found.application.candidate_id:
            return "the candidate"
        member = next((one for one in self.team if one["id"] == user_id), None)
        if member is None:
            return "a former member" if user_id else "the service"
        return str(member["display_name"] or member["email"])

    def scorecards_of(self, interview_id: str) -> list[Scorecard]:
        return [card for card in self.scorecards if card.interview_id == interview_id]

    def owes(self, interview: Interview) -> bool:
        """Whether the reader is on `interview`, not cancelled, and has not submitted their scorecard."""
        return interview.status != "cancelled" and any(
            one.user_id == self.reader and not one.scorecard_submitted for one in interview.interviewers
        )

    def turn(self, offer: Offer) -> str | None:
        """The approver whose decision the offer waits for, if it waits for one."""
        if offer.status != "pending_approval" or isinstance(offer.approvals, msgspec.UnsetType):
            return None
        return next((one.approver_id for one in offer.approvals if one.decision == "pending"), None)

    @property
    def open_offer(self) -> Offer | None:
        return next((offer for offer in self.offers if offer.status in ("pending_approval", "approved", "sent")), None)

    @property
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)


async def read(panel: Panel, application_id: str) -> Dossier:
    """The dossier of the application at `application_id`; the panel's 404 for anyone outside the job's account."""
    ctx = await calls.context(panel, get_application)
    found = await find(ctx, application_id, lock=False)
    if not employs(ctx.principal, found.job_account):
        raise NotFound()
    application_id = found.application.id
    listed = ListInterviews(application_id=application_id, per_page=MOST)
    return Dossier(
        found=found,
        job=await get_job(ctx, IdParams(id=found.application.job_id)),
        history=await _rows(ctx, _HISTORY, {"id": application_id}),
        interviews=(await list_interviews(ctx, listed)).data,
        scorecards=await readable(ctx, found),
        offers=(await list_offers(ctx, ListOffers(application_id=application_id, per_page=MOST))).data,
        team=await _rows(ctx, _TEAM, {"account_id": found.job_account}),
        reader=panel.user.user_id,
    )


def _allowed(current: Status, target: Status) -> bool:
    try:
        check_move(current, target)
    except InvalidTransition:
        return False
    return True


async def _rows(ctx: Context, query: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    return await (await ctx.conn.execute(query, values)).fetchall()
