"""Offers in the database: what a reader sees of one (a sent offer reads `expired` from its `expires_at` on),
the offer a call acts on with its application, and the candidate's narrower view."""

from __future__ import annotations

from typing import Any

import msgspec

from procedures.applications.access import Found, employs, find
from procedures.applications.offers.shapes import SHOWN_TO_CANDIDATE, Approval, Offer, Salary
from rpc.api import Context, Id, NotFound, Principal, parse_id

STATUS = "CASE WHEN o.status = 'sent' AND o.expires_at <= now() THEN 'expired' ELSE o.status END"
COLUMNS = f"""o.id::text AS id, o.application_id::text AS application_id, o.job_id::text AS job_id, o.version,
    o.previous_id::text AS previous_id, {STATUS} AS status, o.title, o.start_date, o.salary_amount,
    o.salary_currency, o.salary_period, o.expires_at, o.notes, o.created_by::text AS created_by,
    o.sent_at, o.responded_at, o.created_at, o.updated_at,
    coalesce((SELECT json_agg(json_build_object('approver_id', p.approver_id::text,
                                                'decision', coalesce(p.decision, 'pending'),
                                                'decided_at', p.decided_at) ORDER BY p.position)
              FROM offer_approvals AS p WHERE p.offer_id = o.id), '[]') AS approvals"""
_APPLICATION_OF = "SELECT application_id::text AS application_id FROM offers WHERE id = %(id)s"
ONE = f"SELECT {COLUMNS} FROM offers AS o WHERE o.id = %(id)s"
# A sent offer whose time ran out no longer holds the application's one open place.
EXPIRE = """
UPDATE offers SET status = 'expired', updated_at = now()
WHERE application_id = %(application_id)s AND status = 'sent' AND expires_at <= now()
"""


def offer_of(row: dict[str, Any]) -> Offer:
    salary = Salary(
        amount=str(row.pop("salary_amount")), currency=row.pop("salary_currency"), period=row.pop("salary_period")
    )
    return Offer(**{**row, "salary": salary, "approvals": msgspec.convert(row["approvals"], list[Approval])})


def as_seen_by(principal: Principal, offer: Offer, job_account: str) -> Offer:
    """The candidate reads an offer without its approvals and the employer's notes."""
    if employs(principal, job_account):
        return offer
    return msgspec.structs.replace(offer, approvals=msgspec.UNSET, notes=msgspec.UNSET)


def visible_to(principal: Principal, offer: Offer, found: Found) -> bool:
    """The job's account sees every version; the candidate only the offers that reached them."""
    return employs(principal, found.job_account) or (
        offer.status in SHOWN_TO_CANDIDATE and found.application.candidate_id == principal.user_id
    )


async def read(ctx: Context, offer_id: Id, *, lock: bool) -> tuple[Offer, Found]:
    """The offer and its application (both locked with `lock`), if the caller may see it; else `404`."""
    parsed = parse_id(offer_id)
    row = await (await ctx.conn.execute(_APPLICATION_OF, {"id": parsed})).fetchone()
    if row is None:
        raise NotFound("No such offer.")
    found = await find(ctx, row["application_id"], lock=lock)
    offer_row = await (await ctx.conn.execute(ONE + (" FOR UPDATE" if lock else ""), {"id": parsed})).fetchone()
    assert offer_row is not None, "offers go only with their application"
    offer = offer_of(offer_row)
    if not visible_to(ctx.principal, offer, found):
        raise NotFound("No such offer.")
    return offer, found
