"""An offer on the wire: its terms, its approvals, the parameters of its procedures and its events.

pending_approval → approved → sent → accepted | declined | expired
pending_approval → rejected (an approver said no)
any open one → cancelled; a change of terms → superseded (by the next version)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec
import pycountry

from rpc.api import EXAMPLE_ID, NO_NUL, FieldError, Id, Moment, PageParams, Params, ShortText, Struct

OfferStatus = Literal[
    "pending_approval", "approved", "rejected", "sent", "accepted", "declined", "expired", "cancelled", "superseded"
]
OPEN: tuple[OfferStatus, ...] = ("pending_approval", "approved", "sent")
# What the candidate reads: offers that reached them.
SHOWN_TO_CANDIDATE: tuple[OfferStatus, ...] = ("sent", "accepted", "declined", "expired")
Period = Literal["year", "month", "hour"]
Decision = Literal["pending", "approved", "rejected"]
# More than zero, said by the pattern itself so that the document allows no amount the server refuses: a
# non-zero whole part of up to 12 digits with up to 4 decimals, or a zero whole part with a non-zero fraction.
Amount = Annotated[
    str,
    msgspec.Meta(
        max_length=40,
        pattern=r"^(0*[1-9][0-9]{0,11}(\.[0-9]{1,4})?|0+\.(0{0,3}[1-9]|0{0,2}[1-9][0-9]|0?[1-9][0-9]{2}|[1-9][0-9]{3}))$",
        description="A decimal string of more than zero in the currency's main unit, e.g. 85000.00.",
    ),
]
Note = Annotated[str, msgspec.Meta(max_length=2_000, pattern=NO_NUL)]
Notes = Annotated[str, msgspec.Meta(max_length=20_000, pattern=NO_NUL)]
StartDate = Annotated[dt.date, msgspec.Meta(description="The first working day, e.g. 2027-01-04.")]
ApproverIds = Annotated[
    tuple[Id, ...],
    msgspec.Meta(
        max_length=5,
        description="0 to 5 distinct members of the job's account, in the order they approve.",
        extra_json_schema={"uniqueItems": True},
    ),
]
# Codes ISO 4217 keeps for no currency at all, and for tests.
_NOT_MONEY = frozenset({"XXX", "XTS"})
# Every code the server takes, listed in the document (a pattern of three letters would allow `BJG`).
Currency = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[A-Z]{3}$",
        description="An ISO 4217 code, e.g. EUR or TRY.",
        extra_json_schema={"enum": sorted({code.alpha_3 for code in pycountry.currencies} - _NOT_MONEY)},
    ),
]


class Salary(Params, frozen=True, kw_only=True):
    amount: Amount
    currency: Currency
    period: Period

    def __post_init__(self) -> None:
        if self.currency in _NOT_MONEY or pycountry.currencies.get(alpha_3=self.currency) is None:
            raise FieldError("salary", f"{self.currency} is not an ISO 4217 currency code (EUR, USD, TRY, ...).")


class Approval(Struct, frozen=True, kw_only=True):
    """One approver's turn: `pending` until they decide (a note they give with it is shown on the panel's
    application page)."""

    approver_id: str
    decision: Decision
    decided_at: dt.datetime | None


class Offer(Struct, frozen=True, kw_only=True):
    """One version of an offer. `expired` is how a sent offer reads once `expires_at` has passed unanswered. The
    candidate reads their offers without `approvals` and `notes` (the employer's). The notes given with a
    decision or an answer are kept and shown on the panel's application page and in the export."""

    id: str
    application_id: str
    job_id: str
    version: int
    previous_id: str | None
    status: OfferStatus
    title: str
    start_date: dt.date
    salary: Salary
    expires_at: dt.datetime
    approvals: list[Approval] | msgspec.UnsetType = msgspec.UNSET
    notes: str | None | msgspec.UnsetType = msgspec.UNSET
    created_by: str | None
    sent_at: dt.datetime | None
    responded_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime


class OfferEvent(Struct, frozen=True, kw_only=True):
    """Data of every `offer.*` event."""

    offer_id: str
    application_id: str
    job_id: str
    version: int
    status: OfferStatus


class CreateOffer(Params, frozen=True, kw_only=True):
    application_id: Id
    title: ShortText
    start_date: StartDate
    salary: Salary
    expires_at: Moment
    approver_ids: ApproverIds = ()
    notes: Notes | None = None

    example: ClassVar[Mapping[str, Any]] = {
        "application_id": EXAMPLE_ID,
        "title": "Senior backend engineer",
        "start_date": "2027-01-04",
        "salary": {"amount": "85000.00", "currency": "EUR", "period": "year"},
        "expires_at": "2026-12-18T17:00:00+01:00",
        "approver_ids": ["5b2d6a1e-9c3f-4e8a-b7d2-0a1b2c3d4e5f"],
        "notes": "Within band; relocation support agreed verbally.",
    }


class UpdateOffer(Params, frozen=True, kw_only=True):
    id: Id
    title: ShortText | msgspec.UnsetType = msgspec.UNSET
    start_date: StartDate | msgspec.UnsetType = msgspec.UNSET
    salary: Salary | msgspec.UnsetType = msgspec.UNSET
    expires_at: Moment | msgspec.UnsetType = msgspec.UNSET
    notes: Notes | None | msgspec.UnsetType = msgspec.UNSET

    example: ClassVar[Mapping[str, Any]] = {
        "id": EXAMPLE_ID,
        "salary": {"amount": "90000.00", "currency": "EUR", "period": "year"},
    }


class ApproveOffer(Params, frozen=True, kw_only=True):
    id: Id
    decision: Literal["approved", "rejected"]
    note: Note | None = None

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID, "decision": "approved", "note": "Fits the band."}


class RespondToOffer(Params, frozen=True, kw_only=True):
    id: Id
    decision: Literal["accept", "decline"]
    note: Note | None = None

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID, "decision": "accept", "note": "Looking forward to it!"}


class ListOffers(PageParams, frozen=True, kw_only=True):
    application_id: Id

    example: ClassVar[Mapping[str, Any]] = {"application_id": EXAMPLE_ID}
