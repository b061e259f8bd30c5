"""The wire shapes of billing (results, parameters, event data) and what passes between its modules: an
order for the provider's payment page, and the provider's verified notice about a payment."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import msgspec

from rpc.api import Params, Struct

SubscriptionStatus = Literal["pending", "active", "cancelled", "expired", "failed"]
PaymentStatus = Literal["pending", "completed", "failed"]
PaidPlan = Literal["pro", "enterprise"]


class PlanInfo(Struct, frozen=True, kw_only=True):
    """A plan: its price per 30-day period in minor units (kuruş), and its request budget."""

    name: str
    price: int
    currency: str
    per_minute: int
    per_day: int


class Subscription(Struct, frozen=True, kw_only=True):
    """A subscription of the account to a plan; the period is set once its first payment completes."""

    id: str
    plan: str
    status: SubscriptionStatus
    current_period_start: dt.datetime | None
    current_period_end: dt.datetime | None
    cancelled_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime


class Payment(Struct, frozen=True, kw_only=True):
    """A payment for a subscription's period, known to the provider by `merchant_oid`; amounts in kuruş."""

    id: str
    subscription_id: str
    provider: str
    merchant_oid: str
    amount: int
    currency: str
    status: PaymentStatus
    failed_reason: str | None
    failed_reason_code: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    completed_at: dt.datetime | None


class LineItem(Struct, frozen=True, kw_only=True):
    """One line of an invoice; the period is the one the payment bought (null when it bought none)."""

    description: str
    plan: str
    quantity: int
    unit_amount: int
    amount: int
    period_start: dt.datetime | None
    period_end: dt.datetime | None


class Invoice(Struct, frozen=True, kw_only=True):
    """The invoice of one completed payment; numbers run without gaps within a year (`INV-2026-000042`)."""

    id: str
    number: str
    payment_id: str
    amount: int
    currency: str
    line_items: list[LineItem]
    issued_at: dt.datetime


class Checkout(Struct, frozen=True, kw_only=True):
    """The provider's payment page for a pending payment: its token and the address to open."""

    token: str
    url: str


class Subscribed(Struct, frozen=True, kw_only=True):
    """What `billing.subscriptions.create` answers; `checkout` is null when no provider is configured."""

    subscription: Subscription
    payment: Payment
    checkout: Checkout | None


class CreateSubscription(Params, frozen=True, kw_only=True):
    plan: PaidPlan

    example: ClassVar[Mapping[str, Any]] = {"plan": "pro"}


class PaymentEvent(Struct, frozen=True, kw_only=True):
    """Data of `billing.payment.completed` and `billing.payment.failed` (the latter with `failed_reason`)."""

    payment_id: str
    merchant_oid: str
    amount: int
    currency: str
    status: PaymentStatus
    failed_reason: str | None | msgspec.UnsetType = msgspec.UNSET


class SubscriptionEvent(Struct, frozen=True, kw_only=True):
    """Data of `billing.subscription.created` and `billing.subscription.cancelled`."""

    subscription_id: str
    plan: str
    status: SubscriptionStatus


class InvoiceEvent(Struct, frozen=True, kw_only=True):
    """Data of `billing.invoice.generated`."""

    invoice_id: str
    number: str
    payment_id: str
    amount: int
    currency: str


@dataclass(frozen=True, slots=True)
class Order:
    """A pending payment as a payment page needs it: what is bought, by whom, from which address."""

    merchant_oid: str
    amount: int
    currency: str
    description: str
    email: str
    buyer_name: str
    buyer_ip: str


@dataclass(frozen=True, slots=True)
class Notice:
    """A provider's verified word on one payment: paid `total_amount` (minor units), or failed (with the
    provider's unsigned, informational reason and code)."""

    merchant_oid: str
    succeeded: bool
    total_amount: int
    failed_reason: str | None = None
    failed_reason_code: str | None = None
