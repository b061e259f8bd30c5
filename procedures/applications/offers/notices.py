"""Who hears of an offer: the job's account of every step (its `offer.*` events), the candidate when it is sent
(its terms, and where to answer) and when a sent offer is withdrawn, and each approver when their turn comes."""

from __future__ import annotations

import decimal
from typing import Any

from procedures.applications.access import Found
from procedures.applications.letters import desk_link, home_link, mailable, send
from procedures.applications.offers.shapes import Offer, OfferEvent
from rpc.api import Context
from rpc.mail.outbox import Letter

_MAILABLE = f"SELECT u.email, u.display_name FROM users AS u WHERE u.id = %(id)s AND {mailable('u')}"
PERIODS = {"year": "a year", "month": "a month", "hour": "an hour"}


def salary_text(offer: Offer) -> str:
    """`85,000.00 EUR a year`."""
    salary = offer.salary
    return f"{decimal.Decimal(salary.amount):,} {salary.currency} {PERIODS[salary.period]}"


async def announce(ctx: Context, kind: str, offer: Offer, found: Found) -> None:
    """Event `kind` (`offer.*`) of this version of the offer, to the job's account."""
    event = OfferEvent(
        offer_id=offer.id,
        application_id=offer.application_id,
        job_id=offer.job_id,
        version=offer.version,
        status=offer.status,
    )
    await ctx.emit(kind, event, [found.job_account])


async def offer_sent(ctx: Context, offer: Offer, found: Found) -> None:
    await _to_candidate(ctx, "offer_sent", offer, found)


async def offer_withdrawn(ctx: Context, offer: Offer, found: Found) -> None:
    await _to_candidate(ctx, "offer_cancelled", offer, found)


async def to_approve(ctx: Context, offer: Offer, found: Found, approver_id: str) -> None:
    """The approver whose turn it is hears of the offer waiting for them."""
    row = await (await ctx.conn.execute(_MAILABLE, {"id": approver_id})).fetchone()
    if row is None:
        return
    context = _terms(offer, found) | {
        "candidate_name": found.candidate.display_name or "a candidate",
        "link": desk_link(ctx.settings, found.application.id),
    }
    await send(ctx, [Letter("offer_to_approve", row["email"], context)])


async def _to_candidate(ctx: Context, kind: str, offer: Offer, found: Found) -> None:
    row = await (await ctx.conn.execute(_MAILABLE, {"id": found.application.candidate_id})).fetchone()
    if row is None:
        return
    context = _terms(offer, found) | {"name": row["display_name"], "link": home_link(ctx.settings)}
    await send(ctx, [Letter(kind, row["email"], context)])


def _terms(offer: Offer, found: Found) -> dict[str, Any]:
    return {
        "title": offer.title,
        "job_title": found.job_title,
        "company": found.job_company,
        "salary": salary_text(offer),
        "start_date": f"{offer.start_date.day} {offer.start_date:%B %Y}",
        "expires": f"{offer.expires_at.day} {offer.expires_at:%B %Y, %H:%M} UTC",
    }
