"""The offers' writes: `offers.create`, `.update`, `.approve`, `.send`, `.respond` and `.cancel`.

Approvers decide in the order named, each in turn; a change of terms makes a new version whose approvals start
afresh (the old one `superseded`); sending moves the application to `offered`, accepting to `hired`.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass, replace

import msgspec

from procedures.applications import EMPLOYERS, FINAL, PIPELINE
from procedures.applications.access import Found, employs, find_owned, members
from procedures.applications.moves import KINDS as MOVE_KINDS
from procedures.applications.moves import check_move, move
from procedures.applications.offers.cancelling import cancel
from procedures.applications.offers.notices import announce, offer_sent, to_approve
from procedures.applications.offers.shapes import (
    OPEN,
    ApproveOffer,
    CreateOffer,
    Offer,
    RespondToOffer,
    UpdateOffer,
)
from procedures.applications.offers.store import COLUMNS, EXPIRE, ONE, as_seen_by, offer_of, read
from rpc.api import (
    Conflict,
    Context,
    Forbidden,
    Id,
    IdParams,
    InvalidParams,
    InvalidTransition,
    moment,
    on_conflict,
    one_row,
    procedure,
)

ONE_OPEN = "offers_open_key"
on_conflict(ONE_OPEN, "This application already has an open offer: update it, or cancel it first.")

_OPEN = "SELECT id::text AS id FROM offers WHERE application_id = %(application_id)s AND status = ANY(%(open)s)"
_INSERT = """
WITH o AS (
    INSERT INTO offers (application_id, job_id, account_id, candidate_id, version, previous_id, status, title,
                        start_date, salary_amount, salary_currency, salary_period, expires_at, notes, created_by)
    VALUES (%(application_id)s, %(job_id)s, %(account_id)s, %(candidate_id)s, %(version)s, %(previous_id)s,
            %(status)s, %(title)s, %(start_date)s, %(amount)s, %(currency)s, %(period)s, %(expires_at)s, %(notes)s,
            %(created_by)s)
    RETURNING id::text AS id
)
SELECT id FROM o
"""
_APPROVERS = """
INSERT INTO offer_approvals (offer_id, position, approver_id)
SELECT %(offer_id)s, turn - 1, approver_id
FROM unnest(%(approver_ids)s::uuid[]) WITH ORDINALITY AS approvers (approver_id, turn)
"""
_APPROVERS_OF = "SELECT approver_id::text AS approver_id FROM offer_approvals WHERE offer_id = %(id)s ORDER BY position"
_MY_APPROVAL = "SELECT decision FROM offer_approvals WHERE offer_id = %(id)s AND approver_id = %(user_id)s"
_WAITING = """
SELECT position, approver_id::text AS approver_id FROM offer_approvals
WHERE offer_id = %(id)s AND decision IS NULL ORDER BY position
"""
_DECIDE = """
UPDATE offer_approvals SET decision = %(decision)s, note = %(note)s, decided_at = now()
WHERE offer_id = %(id)s AND position = %(position)s
"""
_NOTES = f"""
WITH o AS (UPDATE offers SET notes = %(notes)s, updated_at = now() WHERE id = %(id)s RETURNING *)
SELECT {COLUMNS} FROM o
"""
_STATUS = f"""
WITH o AS (UPDATE offers SET status = %(status)s, updated_at = now() WHERE id = %(id)s RETURNING *)
SELECT {COLUMNS} FROM o
"""
_SEND = f"""
WITH o AS (UPDATE offers SET status = 'sent', sent_at = now(), updated_at = now() WHERE id = %(id)s RETURNING *)
SELECT {COLUMNS} FROM o
"""
_RESPOND = f"""
WITH o AS (
    UPDATE offers SET status = %(status)s, responded_at = now(), response_note = %(note)s, updated_at = now()
    WHERE id = %(id)s RETURNING *
)
SELECT {COLUMNS} FROM o
"""


@dataclass(frozen=True, slots=True)
class Terms:
    """What an offer promises; a change of any of them is a new version."""

    title: str
    start_date: dt.date
    amount: decimal.Decimal
    currency: str
    period: str
    expires_at: dt.datetime

    @classmethod
    def of(cls, offer: Offer) -> Terms:
        salary = offer.salary
        return cls(
            offer.title,
            offer.start_date,
            decimal.Decimal(salary.amount),
            salary.currency,
            salary.period,
            offer.expires_at,
        )

    def updated(self, params: UpdateOffer) -> Terms:
        """These terms with what `params` sends."""
        terms = self
        if params.title is not msgspec.UNSET:
            terms = replace(terms, title=params.title)
        if params.start_date is not msgspec.UNSET:
            terms = replace(terms, start_date=params.start_date)
        if params.salary is not msgspec.UNSET:
            salary = params.salary
            terms = replace(
                terms, amount=decimal.Decimal(salary.amount), currency=salary.currency, period=salary.period
            )
        if params.expires_at is not msgspec.UNSET:
            terms = replace(terms, expires_at=_future(params.expires_at))
        return terms


@procedure("offers.create", scope="write:applications", write=True, roles=EMPLOYERS, emits=("offer.created",))
async def create_offer(ctx: Context, params: CreateOffer) -> Offer:
    """Make an offer on an application: its terms, and 0 to 5 approvers who approve in the order named
    (`pending_approval`; `approved` at once without approvers). One open offer per application. Event
    `offer.created`; the first approver is told by e-mail."""
    found = await find_owned(ctx, params.application_id, field="application_id")
    if found.application.status in FINAL:
        raise InvalidTransition(found.application.status, "offered")
    salary = params.salary
    terms = Terms(
        params.title,
        params.start_date,
        decimal.Decimal(salary.amount),
        salary.currency,
        salary.period,
        _future(params.expires_at),
    )
    approvers = await members(ctx, found.job_account, params.approver_ids, "approver_ids")
    if ctx.principal.user_id in approvers:
        raise InvalidParams([{"field": "approver_ids", "message": "You make this offer: name other approvers."}])
    await _free_place(ctx, found)
    return await _version(ctx, found, terms, params.notes, approvers, previous=None)


@procedure("offers.update", scope="write:applications", write=True, roles=EMPLOYERS, emits=("offer.created",))
async def update_offer(ctx: Context, params: UpdateOffer) -> Offer:
    """Change an offer that waits for approval, is approved or was rejected. A change of any term (title, start
    date, salary, expiry) makes a new version — `version` + 1, `previous_id` the old one, approvals afresh, event
    `offer.created` — and the old one `superseded`; a change of `notes` alone changes this version."""
    offer, found = await _owned(ctx, params.id)
    if offer.status not in ("pending_approval", "approved", "rejected"):
        raise InvalidTransition(offer.status, "superseded")
    current = Terms.of(offer)
    terms = current.updated(params)
    notes = offer.notes if params.notes is msgspec.UNSET else params.notes
    assert not isinstance(notes, msgspec.UnsetType), "the job's account reads the notes"
    if terms == current:
        updated = offer_of(await one_row(await ctx.conn.execute(_NOTES, {"id": offer.id, "notes": notes})))
        return as_seen_by(ctx.principal, updated, found.job_account)
    rows = await (await ctx.conn.execute(_APPROVERS_OF, {"id": offer.id})).fetchall()
    await ctx.conn.execute(_STATUS, {"id": offer.id, "status": "superseded"})
    await _free_place(ctx, found)
    return await _version(ctx, found, terms, notes, [row["approver_id"] for row in rows], previous=offer)


@procedure(
    "offers.approve",
    scope="write:applications",
    write=True,
    roles=EMPLOYERS,
    emits=("offer.approved", "offer.rejected"),
)
async def approve_offer(ctx: Context, params: ApproveOffer) -> Offer:
    """Approve or reject an offer when it is your turn (approvers decide in the order named). The last approval
    makes it `approved` (event `offer.approved`); one rejection makes it `rejected` (event `offer.rejected`)."""
    offer, found = await _owned(ctx, params.id)
    mine = await (await ctx.conn.execute(_MY_APPROVAL, {"id": offer.id, "user_id": ctx.principal.user_id})).fetchone()
    if mine is None:
        raise Forbidden("Only this offer's approvers approve it.")
    if offer.status != "pending_approval":
        raise InvalidTransition(offer.status, params.decision)
    if mine["decision"] is not None:
        raise Conflict("You have already decided on this offer.", {"decision": mine["decision"]})
    waiting = await (await ctx.conn.execute(_WAITING, {"id": offer.id})).fetchall()
    turn = waiting[0]
    if turn["approver_id"] != ctx.principal.user_id:
        message = "It is not your turn: the approvers decide in order, and an earlier one has not yet."
        raise Conflict(message, {"waiting_for": turn["approver_id"]})
    await ctx.conn.execute(
        _DECIDE, {"id": offer.id, "position": turn["position"], "decision": params.decision, "note": params.note}
    )
    if params.decision == "rejected":
        decided = await _set_status(ctx, offer, found, "rejected", "offer.rejected")
    elif len(waiting) == 1:
        decided = await _set_status(ctx, offer, found, "approved", "offer.approved")
    else:
        decided = offer_of(await one_row(await ctx.conn.execute(ONE, {"id": offer.id})))
        await to_approve(ctx, decided, found, waiting[1]["approver_id"])
    return as_seen_by(ctx.principal, decided, found.job_account)


@procedure("offers.send", scope="write:applications", write=True, roles=EMPLOYERS, emits=("offer.sent", *MOVE_KINDS))
async def send_offer(ctx: Context, params: IdParams) -> Offer:
    """Send an approved offer to the candidate (`approved → sent`, event `offer.sent`): they are e-mailed its terms
    and answer on their page (`/me`) or by `offers.respond`. The application moves to `offered` when it was
    earlier in the pipeline."""
    offer, found = await _owned(ctx, params.id)
    if offer.status != "approved":
        raise InvalidTransition(offer.status, "sent")
    if offer.expires_at <= dt.datetime.now(dt.UTC):
        expired = _utc(offer.expires_at)
        message = f"This offer's answer was due by {expired}: change expires_at (a new version) before sending it."
        raise Conflict(message, {"expires_at": expired})
    sent = offer_of(await one_row(await ctx.conn.execute(_SEND, {"id": offer.id})))
    await announce(ctx, "offer.sent", sent, found)
    if PIPELINE.index(found.application.status) < PIPELINE.index("offered"):  # offers go with final applications
        found = await move(ctx, found, "offered")
    await offer_sent(ctx, sent, found)
    return as_seen_by(ctx.principal, sent, found.job_account)


@procedure(
    "offers.respond",
    scope="write:applications",
    write=True,
    roles=("candidate",),
    emits=("offer.accepted", "offer.declined", *MOVE_KINDS),
)
async def respond_to_offer(ctx: Context, params: RespondToOffer) -> Offer:
    """Accept or decline an offer sent to you, before its `expires_at`. Accepting moves your application to
    `hired` (events `offer.accepted`, `application.status_changed`); declining leaves it `offered` (event
    `offer.declined`)."""
    offer, found = await read(ctx, params.id, lock=True)
    if found.application.candidate_id != ctx.principal.user_id:
        raise Forbidden("Only the candidate answers an offer.")
    target = "accepted" if params.decision == "accept" else "declined"
    if offer.status != "sent":
        raise InvalidTransition(offer.status, target)
    if target == "accepted":
        check_move(found.application.status, "hired")
    values = {"id": offer.id, "status": target, "note": params.note}
    answered = offer_of(await one_row(await ctx.conn.execute(_RESPOND, values)))
    await announce(ctx, f"offer.{target}", answered, found)
    if target == "accepted":
        await move(ctx, found, "hired")
    return as_seen_by(ctx.principal, answered, found.job_account)


@procedure("offers.cancel", scope="write:applications", write=True, roles=EMPLOYERS, emits=("offer.cancelled",))
async def cancel_offer(ctx: Context, params: IdParams) -> Offer:
    """Withdraw an open offer (waiting for approval, approved or sent): `cancelled`, event `offer.cancelled`; the
    candidate of a sent offer is told by e-mail."""
    offer, found = await _owned(ctx, params.id)
    if offer.status not in OPEN:
        raise InvalidTransition(offer.status, "cancelled")
    cancelled = await cancel(ctx, offer.id, found, tell_candidate=True)
    return as_seen_by(ctx.principal, cancelled, found.job_account)


async def _owned(ctx: Context, offer_id: Id) -> tuple[Offer, Found]:
    """The offer and its application, locked, for an action of the job's account: `404` unseen, `403` seen (a
    candidate's own offer) but not theirs to act on."""
    offer, found = await read(ctx, offer_id, lock=True)
    if not employs(ctx.principal, found.job_account):
        raise Forbidden("Only the account that owns the job acts on its offers.")
    return offer, found


async def _free_place(ctx: Context, found: Found) -> None:
    """`409` when the (locked) application already has an open offer; a sent one past its time gives its place."""
    await ctx.conn.execute(EXPIRE, {"application_id": found.application.id})
    row = await (await ctx.conn.execute(_OPEN, {"application_id": found.application.id, "open": list(OPEN)})).fetchone()
    if row is not None:
        raise Conflict(
            "This application already has an open offer: update it, or cancel it first.", {"offer_id": row["id"]}
        )


async def _version(
    ctx: Context, found: Found, terms: Terms, notes: str | None, approvers: list[str], *, previous: Offer | None
) -> Offer:
    """A new version of an offer (the first, or the one after `previous`), its approvers in order, its event, and
    the first approver told."""
    application = found.application
    values = {
        "application_id": application.id,
        "job_id": application.job_id,
        "account_id": found.job_account,
        "candidate_id": application.candidate_id,
        "version": previous.version + 1 if previous else 1,
        "previous_id": previous.id if previous else None,
        "status": "pending_approval" if approvers else "approved",
        "title": terms.title,
        "start_date": terms.start_date,
        "amount": terms.amount,
        "currency": terms.currency,
        "period": terms.period,
        "expires_at": terms.expires_at,
        "notes": notes,
        "created_by": ctx.principal.user_id,
    }
    row = await one_row(await ctx.conn.execute(_INSERT, values))
    if approvers:
        await ctx.conn.execute(_APPROVERS, {"offer_id": row["id"], "approver_ids": approvers})
    offer = offer_of(await one_row(await ctx.conn.execute(ONE, {"id": row["id"]})))
    await announce(ctx, "offer.created", offer, found)
    if approvers:
        await to_approve(ctx, offer, found, approvers[0])
    return as_seen_by(ctx.principal, offer, found.job_account)


async def _set_status(ctx: Context, offer: Offer, found: Found, status: str, kind: str) -> Offer:
    changed = offer_of(await one_row(await ctx.conn.execute(_STATUS, {"id": offer.id, "status": status})))
    await announce(ctx, kind, changed, found)
    return changed


def _future(text: str) -> dt.datetime:
    """An offer's `expires_at`: a time with its offset, still to come."""
    expires_at = moment("expires_at", text)
    assert expires_at is not None
    if expires_at <= dt.datetime.now(dt.UTC):
        raise InvalidParams(
            [{"field": "expires_at", "message": "Give a time still to come: the candidate's deadline."}]
        )
    return expires_at


def _utc(moment_: dt.datetime) -> str:
    return moment_.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
