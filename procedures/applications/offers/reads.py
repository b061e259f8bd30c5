"""`offers.get` and `offers.list`: every version to the job's account; to the candidate, only the offers that
reached them, without approvals or notes."""

from __future__ import annotations

from procedures.applications.access import find
from procedures.applications.offers.shapes import SHOWN_TO_CANDIDATE, ListOffers, Offer
from procedures.applications.offers.store import COLUMNS, STATUS, as_seen_by, offer_of, read
from rpc.api import Context, IdParams, Page, page_and_total, procedure

_SOURCE = (
    "FROM offers AS o WHERE o.application_id = %(application_id)s AND (%(everything)s OR {status} = ANY(%(shown)s))"
)


@procedure("offers.get", scope="read:applications")
async def get_offer(ctx: Context, params: IdParams) -> Offer:
    """One version of an offer: the job's account reads every one; the candidate the offers sent to them."""
    offer, found = await read(ctx, params.id, lock=False)
    return as_seen_by(ctx.principal, offer, found.job_account)


@procedure("offers.list", scope="read:applications")
async def list_offers(ctx: Context, params: ListOffers) -> Page[Offer]:
    """An application's offers, every version, newest first (the candidate: those sent to them)."""
    found = await find(ctx, params.application_id, lock=False, field="application_id")
    everything = found.application.candidate_id != ctx.principal.user_id
    values = {
        "application_id": found.application.id,
        "everything": everything,
        "shown": list(SHOWN_TO_CANDIDATE),
        "limit": params.per_page,
        "offset": params.offset,
    }
    rows, total = await page_and_total(
        ctx, COLUMNS, _SOURCE.format(status=STATUS), "o.created_at DESC, o.version DESC", values
    )
    offers = [as_seen_by(ctx.principal, offer_of(row), found.job_account) for row in rows]
    return Page(data=offers, total=total, page=params.page, per_page=params.per_page)
