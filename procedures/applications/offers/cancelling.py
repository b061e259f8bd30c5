"""Withdrawing an offer, by `offers.cancel` or because its application was decided: `cancelled`, the event
`offer.cancelled`, and a candidate who had it told so."""

from __future__ import annotations

from procedures.applications.access import Found
from procedures.applications.offers.notices import announce, offer_withdrawn
from procedures.applications.offers.shapes import Offer
from procedures.applications.offers.store import COLUMNS, offer_of
from rpc.api import Context, one_row

KINDS = ("offer.cancelled",)
_CANCEL = f"""
WITH o AS (UPDATE offers SET status = 'cancelled', updated_at = now() WHERE id = %(id)s RETURNING *)
SELECT {COLUMNS} FROM o
"""
_OPEN = """
SELECT id::text AS id, status FROM offers
WHERE application_id = %(application_id)s AND status IN ('pending_approval', 'approved', 'sent')
  AND NOT (status = 'sent' AND expires_at <= now())
FOR UPDATE
"""


async def cancel(ctx: Context, offer_id: str, found: Found, *, tell_candidate: bool) -> Offer:
    """Cancel the (locked, open) offer; a sent one's candidate is told unless `tell_candidate` is false."""
    was_sent = await _was_sent(ctx, offer_id)
    cancelled = offer_of(await one_row(await ctx.conn.execute(_CANCEL, {"id": offer_id})))
    await announce(ctx, "offer.cancelled", cancelled, found)
    if was_sent and tell_candidate:
        await offer_withdrawn(ctx, cancelled, found)
    return cancelled


async def withdraw_open(ctx: Context, found: Found, *, tell_candidate: bool) -> None:
    """Cancel the application's open offer, if it has one (its application was decided)."""
    for row in await (await ctx.conn.execute(_OPEN, {"application_id": found.application.id})).fetchall():
        await cancel(ctx, row["id"], found, tell_candidate=tell_candidate)


async def _was_sent(ctx: Context, offer_id: str) -> bool:
    row = await (await ctx.conn.execute("SELECT status FROM offers WHERE id = %(id)s", {"id": offer_id})).fetchone()
    return row is not None and row["status"] == "sent"
