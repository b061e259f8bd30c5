"""Billing: plans, subscriptions, their payments through the provider, and invoices.

    Subscription: pending → active → cancelled | expired;  pending → failed | cancelled
    Payment:      pending → completed | failed

`billing.subscriptions.create` writes a `pending` subscription and its `pending` payment (or, for the plan
of the account's active subscription, a renewal payment on that one), commits, and only then asks the provider
for its payment page, holding no connection while it waits; a provider that fails takes both back again. The
provider's notification settles the payment (`settle`, called by the provider module inside the transaction
the framework opened); the periodic `expire_subscriptions` ends unpaid periods. Every change is written with
its event in one transaction.

Locks are always taken in one order — payment, then account, then subscriptions — so concurrent
notifications, cancellations and the expiry never deadlock; a notification repeated (even 50 times at once)
waits on the payment's row lock and then finds it settled.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import msgspec
from psycopg.types.json import Jsonb

import procedures
from procedures.common import Id, page_and_total, parse_id
from rpc.catalog import Plan
from rpc.context import Context
from rpc.db import one_row
from rpc.envelope import Page, PageParams, Params, Struct
from rpc.errors import Conflict, InvalidTransition, NotFound, Unavailable
from rpc.events import Emitter
from rpc.registry import procedure
from rpc.types import Connection, Role

log = logging.getLogger(__name__)

T = TypeVar("T", bound=msgspec.Struct)

PROVIDER = "paytr"
# 30 days of 24 hours, whatever the session's time zone (an interval of '30 days' follows DST there).
PERIOD = "interval '720 hours'"
EXPIRY_BATCH = 100
MAX_WAITING_CHECKOUTS = 2  # per account (CONTRACT.md §23)
WAITING_MARGIN_SECONDS = 5
_OID_ALPHABET = string.ascii_letters + string.digits
_OID_PREFIX = "HIRE"
_OID_RANDOM_CHARS = 28  # 28 base62 characters: about 166 bits, unguessable

SubscriptionStatus = Literal["pending", "active", "cancelled", "expired", "failed"]
PaymentStatus = Literal["pending", "completed", "failed"]
PaidPlan = Literal["pro", "enterprise"]


# --- wire shapes ------------------------------------------------------------------------------------------


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


class Ref(Params, frozen=True, kw_only=True):
    id: Id


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


# --- what a provider module plugs in ----------------------------------------------------------------------


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


@runtime_checkable
class PaymentPages(Protocol):
    """A provider that opens a payment page for an order; None when it is not configured."""

    async def checkout(self, ctx: Context, order: Order) -> Checkout | None: ...


@dataclass(frozen=True, slots=True)
class Notice:
    """A provider's verified word on one payment: paid `total_amount` (minor units), or failed (with the
    provider's unsigned, informational reason and code)."""

    merchant_oid: str
    succeeded: bool
    total_amount: int
    failed_reason: str | None = None
    failed_reason_code: str | None = None


# --- SQL ----------------------------------------------------------------------------------------------------

_SUBSCRIPTION = """id::text AS id, plan, status, current_period_start, current_period_end, cancelled_at,
    created_at, updated_at"""
_PAYMENT = """id::text AS id, subscription_id::text AS subscription_id, provider, merchant_oid, amount, currency,
    status, failed_reason, failed_reason_code, created_at, updated_at, completed_at"""
_INVOICE = "id::text AS id, number, payment_id::text AS payment_id, amount, currency, line_items, issued_at"

_LOCK_ACCOUNT_WITH_BUYER = """
SELECT u.email, u.display_name, a.name AS account_name
FROM users AS u JOIN accounts AS a ON a.id = u.account_id
WHERE u.id = %(user_id)s AND a.id = %(account_id)s
FOR UPDATE OF a
"""
# Payments whose checkout is being asked of the provider right now; one left marked by a process that died
# mid-checkout stops counting once the longest wait has passed.
_WAITING_CHECKOUTS = """
SELECT count(*) AS waiting FROM payments
WHERE account_id = %(account_id)s AND checkout_requested_at > now() - %(waiting_for)s
"""
_CHECKOUT_ANSWERED = "UPDATE payments SET checkout_requested_at = NULL WHERE id = %(id)s"
_DELETE_PAYMENT = "DELETE FROM payments WHERE id = %(id)s AND status = 'pending'"
_DELETE_SUBSCRIPTION = "DELETE FROM subscriptions WHERE id = %(id)s AND status = 'pending'"
_ACTIVE_OF_PLAN = f"""
SELECT {_SUBSCRIPTION} FROM subscriptions
WHERE account_id = %(account_id)s AND status = 'active' AND plan = %(plan)s
FOR UPDATE
"""
_INSERT_SUBSCRIPTION = f"""
INSERT INTO subscriptions (account_id, plan, created_by) VALUES (%(account_id)s, %(plan)s, %(user_id)s)
RETURNING {_SUBSCRIPTION}
"""
_INSERT_PAYMENT = f"""
INSERT INTO payments (account_id, subscription_id, provider, merchant_oid, amount, currency, checkout_requested_at)
VALUES (%(account_id)s, %(subscription_id)s, %(provider)s, %(merchant_oid)s, %(amount)s, %(currency)s, now())
RETURNING {_PAYMENT}
"""
_LOCK_ACCOUNT = "SELECT id FROM accounts WHERE id = %(account_id)s FOR UPDATE"
_SET_PLAN = "UPDATE accounts SET plan = %(plan)s WHERE id = %(account_id)s"
_SET_PLANS = "UPDATE accounts SET plan = %(plan)s WHERE id = ANY(%(account_ids)s)"
_LOCK_OWN_SUBSCRIPTION = f"""
SELECT {_SUBSCRIPTION} FROM subscriptions WHERE id = %(id)s AND account_id = %(account_id)s FOR UPDATE
"""
_CANCEL = f"""
UPDATE subscriptions SET status = 'cancelled', cancelled_at = now(), updated_at = now()
WHERE id = %(id)s RETURNING {_SUBSCRIPTION}
"""

_LOCK_PAYMENT = """
SELECT id::text AS id, account_id::text AS account_id, subscription_id::text AS subscription_id, merchant_oid,
       amount, currency, status
FROM payments WHERE merchant_oid = %(merchant_oid)s
FOR UPDATE
"""
_LOCK_SUBSCRIPTION = "SELECT id::text AS id, plan, status FROM subscriptions WHERE id = %(id)s FOR UPDATE"
_COMPLETE_PAYMENT = """
UPDATE payments SET status = 'completed', completed_at = now(), updated_at = now(),
       flagged_for_review = %(flagged)s
WHERE id = %(id)s
"""
_FAIL_PAYMENT = """
UPDATE payments SET status = 'failed', updated_at = now(), failed_reason = %(failed_reason)s,
       failed_reason_code = %(failed_reason_code)s, flagged_for_review = %(flagged)s
WHERE id = %(id)s
"""
_FAIL_PENDING_SUBSCRIPTION = """
UPDATE subscriptions SET status = 'failed', updated_at = now() WHERE id = %(id)s AND status = 'pending'
"""
# Activating a subscription ends any other active one of the account (a change of plan).
_CANCEL_OTHER_ACTIVE = """
UPDATE subscriptions SET status = 'cancelled', cancelled_at = now(), updated_at = now()
WHERE account_id = %(account_id)s AND status = 'active' AND id <> %(id)s
RETURNING id::text AS id, plan, status
"""
# Both return the 30 days the payment bought, for the invoice.
_ACTIVATE = f"""
UPDATE subscriptions
SET status = 'active', current_period_start = now(), current_period_end = now() + {PERIOD}, updated_at = now()
WHERE id = %(id)s
RETURNING current_period_start AS period_start, current_period_end AS period_end
"""
# A renewal extends the period from its end, or from now if that end has already passed.
_EXTEND = f"""
UPDATE subscriptions
SET current_period_end = greatest(current_period_end, now()) + {PERIOD}, updated_at = now()
WHERE id = %(id)s
RETURNING current_period_end - {PERIOD} AS period_start, current_period_end AS period_end
"""
_NEXT_INVOICE_NUMBER = """
INSERT INTO invoice_counters (year, last_number) VALUES (extract(year FROM now() AT TIME ZONE 'UTC')::int, 1)
ON CONFLICT (year) DO UPDATE SET last_number = invoice_counters.last_number + 1
RETURNING year, last_number
"""
_INSERT_INVOICE = """
INSERT INTO invoices (account_id, payment_id, number, amount, currency, line_items)
VALUES (%(account_id)s, %(payment_id)s, %(number)s, %(amount)s, %(currency)s, %(line_items)s)
RETURNING id::text AS id
"""

# Active subscriptions whose period has ended, with their accounts; rows another transaction holds (a
# notification renewing one right now) are skipped and looked at again on the next run.
_CLAIM_EXPIRED = """
SELECT s.id, s.account_id FROM subscriptions AS s JOIN accounts AS a ON a.id = s.account_id
WHERE s.status = 'active' AND s.current_period_end < now()
ORDER BY s.current_period_end
LIMIT %(limit)s
FOR UPDATE OF s, a SKIP LOCKED
"""
_EXPIRE = """
UPDATE subscriptions SET status = 'expired', updated_at = now() WHERE id = ANY(%(ids)s)
RETURNING id::text AS id, account_id::text AS account_id, plan, status
"""

# Newest first; timestamps have whole seconds, so invoices of one second follow their numbers.
_LISTS = {
    "subscriptions": (_SUBSCRIPTION, "created_at DESC, id DESC"),
    "payments": (_PAYMENT, "created_at DESC, id DESC"),
    "invoices": (_INVOICE, "issued_at DESC, number DESC"),
}


# --- procedures ---------------------------------------------------------------------------------------------

BILLING_ROLES: tuple[Role, ...] = ("employer", "admin")


@procedure("billing.plans.list", scope="read:billing")
async def list_plans(ctx: Context, params: PageParams) -> Page[PlanInfo]:
    """List the plans: price per 30-day period in minor units (kuruş) and currency, and the request limits."""
    plans = [PlanInfo(**_plan_fields(plan)) for plan in _plans().values()]
    data = plans[params.offset : params.offset + params.per_page]
    return Page(data=data, total=len(plans), page=params.page, per_page=params.per_page)


@procedure("billing.subscriptions.create", scope="write:billing", write=True, roles=BILLING_ROLES, calls_out=True)
async def create_subscription(ctx: Context, params: CreateSubscription) -> Subscribed:
    """Subscribe your account to `pro` or `enterprise`: a `pending` subscription and its `pending` payment,
    with the provider's payment page as `checkout` (null when no provider is configured). For the plan of
    your active subscription this is a renewal: a new payment on that subscription, whose period extends by
    30 days when it completes. An account has at most two checkouts waiting on the provider at once."""
    plan = _plans()[params.plan]
    async with ctx.transaction() as conn:
        pending = await _open_checkout(ctx, conn, plan)
    try:
        checkout = await _checkout(ctx, pending)
    except Unavailable:
        async with ctx.transaction() as conn:
            await _abandon_checkout(conn, pending)
        raise
    async with ctx.transaction() as conn:
        await conn.execute(_CHECKOUT_ANSWERED, {"id": pending.payment.id})
    return Subscribed(subscription=pending.subscription, payment=pending.payment, checkout=checkout)


@procedure("billing.subscriptions.cancel", scope="write:billing", write=True, roles=BILLING_ROLES)
async def cancel_subscription(ctx: Context, params: Ref) -> Subscription:
    """Cancel a `pending` or `active` subscription of your account at once (event
    `billing.subscription.cancelled`); cancelling the active one puts the account back on the free plan."""
    subscription_id = parse_id(params.id)
    account_id = ctx.principal.account_id
    await ctx.conn.execute(_LOCK_ACCOUNT, {"account_id": account_id})
    cursor = await ctx.conn.execute(_LOCK_OWN_SUBSCRIPTION, {"id": subscription_id, "account_id": account_id})
    row = await cursor.fetchone()
    if row is None:
        raise NotFound("No such subscription.")
    if row["status"] not in ("pending", "active"):
        raise InvalidTransition(row["status"], "cancelled")
    cursor = await ctx.conn.execute(_CANCEL, {"id": subscription_id})
    cancelled = Subscription(**await cursor.fetchone())  # type: ignore[arg-type]
    if row["status"] == "active":
        await ctx.conn.execute(_SET_PLAN, {"plan": _default_plan(), "account_id": account_id})
    await ctx.emit(
        "billing.subscription.cancelled",
        SubscriptionEvent(subscription_id=cancelled.id, plan=cancelled.plan, status=cancelled.status),
        [account_id],
    )
    return cancelled


@procedure("billing.subscriptions.list", scope="read:billing", roles=BILLING_ROLES)
async def list_subscriptions(ctx: Context, params: PageParams) -> Page[Subscription]:
    """List your account's subscriptions, newest first."""
    return await _list(ctx, "subscriptions", params, Subscription)


@procedure("billing.subscriptions.get", scope="read:billing", roles=BILLING_ROLES)
async def get_subscription(ctx: Context, params: Ref) -> Subscription:
    """Get one subscription of your account."""
    return await _get(ctx, "subscriptions", params.id, Subscription)


@procedure("billing.payments.list", scope="read:billing", roles=BILLING_ROLES)
async def list_payments(ctx: Context, params: PageParams) -> Page[Payment]:
    """List your account's payments, newest first."""
    return await _list(ctx, "payments", params, Payment)


@procedure("billing.payments.get", scope="read:billing", roles=BILLING_ROLES)
async def get_payment(ctx: Context, params: Ref) -> Payment:
    """Get one payment of your account."""
    return await _get(ctx, "payments", params.id, Payment)


@procedure("billing.invoices.list", scope="read:billing", roles=BILLING_ROLES)
async def list_invoices(ctx: Context, params: PageParams) -> Page[Invoice]:
    """List your account's invoices, newest first."""
    return await _list(ctx, "invoices", params, Invoice)


@procedure("billing.invoices.get", scope="read:billing", roles=BILLING_ROLES)
async def get_invoice(ctx: Context, params: Ref) -> Invoice:
    """Get one invoice of your account."""
    return await _get(ctx, "invoices", params.id, Invoice)


async def _list(ctx: Context, table: str, params: PageParams, shape: type[T]) -> Page[T]:
    columns, order = _LISTS[table]
    values = {"account_id": ctx.principal.account_id, "limit": params.per_page, "offset": params.offset}
    rows, total = await page_and_total(ctx, columns, f"FROM {table} WHERE account_id = %(account_id)s", order, values)
    items = [_convert(row, shape) for row in rows]
    return Page(data=items, total=total, page=params.page, per_page=params.per_page)


async def _get(ctx: Context, table: str, object_id: Id, shape: type[T]) -> T:
    columns, _ = _LISTS[table]
    cursor = await ctx.conn.execute(
        f"SELECT {columns} FROM {table} WHERE id = %(id)s AND account_id = %(account_id)s",
        {"id": parse_id(object_id), "account_id": ctx.principal.account_id},
    )
    row = await cursor.fetchone()
    if row is None:  # another account's object is not found, never forbidden
        raise NotFound(f"No such {table[:-1]}.")
    return _convert(row, shape)


def _convert(row: Mapping[str, Any], shape: type[T]) -> T:
    return msgspec.convert(row, shape)


@dataclass(frozen=True, slots=True)
class _PendingCheckout:
    """What the first transaction of a checkout wrote, and the order the provider is asked about."""

    subscription: Subscription
    payment: Payment
    new_subscription: bool
    order: Order


async def _open_checkout(ctx: Context, conn: Connection, plan: Plan) -> _PendingCheckout:
    """The pending subscription (or the active one, for a renewal) and a pending payment marked as waiting on
    the provider; `409` when the account already has `MAX_WAITING_CHECKOUTS` waiting (counted under the
    account's row lock, so concurrent checkouts cannot both pass)."""
    account_id = ctx.principal.account_id
    values: dict[str, Any] = {"account_id": account_id, "user_id": ctx.principal.user_id, "plan": plan.name}
    cursor = await conn.execute(_LOCK_ACCOUNT_WITH_BUYER, values)
    buyer = await cursor.fetchone()
    if buyer is None:
        raise NotFound("Your user no longer exists.")
    waiting_for = dt.timedelta(seconds=ctx.settings.paytr_timeout + WAITING_MARGIN_SECONDS)
    cursor = await conn.execute(_WAITING_CHECKOUTS, {"account_id": account_id, "waiting_for": waiting_for})
    if (await one_row(cursor))["waiting"] >= MAX_WAITING_CHECKOUTS:
        raise Conflict(
            f"Your account already has {MAX_WAITING_CHECKOUTS} checkouts waiting for the payment provider; "
            "retry when they have finished."
        )
    cursor = await conn.execute(_ACTIVE_OF_PLAN, values)
    row = await cursor.fetchone()
    new_subscription = row is None
    if row is None:
        cursor = await conn.execute(_INSERT_SUBSCRIPTION, values)
        row = await one_row(cursor)
    subscription = Subscription(**row)
    merchant_oid = new_merchant_oid()
    cursor = await conn.execute(
        _INSERT_PAYMENT,
        {
            "account_id": account_id,
            "subscription_id": subscription.id,
            "provider": PROVIDER,
            "merchant_oid": merchant_oid,
            "amount": plan.price,
            "currency": plan.currency,
        },
    )
    payment = Payment(**await one_row(cursor))
    # The provider requires an e-mail; users of an external identity provider may have none.
    email = buyer["email"] or f"{ctx.principal.user_id}@users.invalid"
    order = Order(
        merchant_oid=merchant_oid,
        amount=plan.price,
        currency=plan.currency,
        description=f"Hire API {plan.name} plan, 30 days",
        email=email,
        buyer_name=buyer["display_name"] or buyer["account_name"] or email,
        buyer_ip=ctx.client_address,
    )
    return _PendingCheckout(subscription, payment, new_subscription, order)


async def _checkout(ctx: Context, pending: _PendingCheckout) -> Checkout | None:
    """The provider's payment page, asked with no transaction open and no connection held; a provider that
    fails (or does not answer within PAYTR_TIMEOUT) raises `Unavailable`."""
    provider = procedures.CATALOG.providers.get(PROVIDER)
    if not isinstance(provider, PaymentPages):
        return None
    return await provider.checkout(ctx, pending.order)


async def _abandon_checkout(conn: Connection, pending: _PendingCheckout) -> None:
    """A checkout the provider failed leaves nothing behind: its payment, and the subscription made for it."""
    await conn.execute(_DELETE_PAYMENT, {"id": pending.payment.id})
    if pending.new_subscription:
        await conn.execute(_DELETE_SUBSCRIPTION, {"id": pending.subscription.id})


# --- settlement (called by a provider module with a verified notice) ---------------------------------------


async def settle(conn: Connection, emitter: Emitter, notice: Notice) -> str:
    """Apply a verified notice to its payment, in the caller's transaction; return the audit word.

    `unknown_order` and `duplicate` change nothing. A paid amount at least the payment's completes it
    (`applied`): the subscription becomes active (or a renewal extends it), the account's plan follows, an
    invoice is generated. A failure (`failed`) or an underpaid success (`amount_mismatch`, flagged for
    review) fails the payment and its still-pending subscription.
    """
    cursor = await conn.execute(_LOCK_PAYMENT, {"merchant_oid": notice.merchant_oid})
    payment = await cursor.fetchone()
    if payment is None:
        return "unknown_order"
    if payment["status"] != "pending":
        return "duplicate"
    await conn.execute(_LOCK_ACCOUNT, {"account_id": payment["account_id"]})
    cursor = await conn.execute(_LOCK_SUBSCRIPTION, {"id": payment["subscription_id"]})
    subscription = await cursor.fetchone()
    assert subscription is not None  # payments_subscription_fkey
    if not notice.succeeded:
        await _fail(conn, emitter, payment, notice.failed_reason, notice.failed_reason_code, flagged=False)
        return "failed"
    if notice.total_amount < payment["amount"]:
        await _fail(conn, emitter, payment, "amount_mismatch", None, flagged=True)
        return "amount_mismatch"
    await _complete(conn, emitter, payment, subscription, overpaid=notice.total_amount > payment["amount"])
    return "applied"


async def _fail(
    conn: Connection,
    emitter: Emitter,
    payment: Mapping[str, Any],
    reason: str | None,
    code: str | None,
    *,
    flagged: bool,
) -> None:
    await conn.execute(
        _FAIL_PAYMENT,
        {"id": payment["id"], "failed_reason": reason, "failed_reason_code": code, "flagged": flagged},
    )
    # A failed renewal leaves the active subscription running until its period ends.
    await conn.execute(_FAIL_PENDING_SUBSCRIPTION, {"id": payment["subscription_id"]})
    await emitter.emit(
        conn, "billing.payment.failed", _payment_event(payment, "failed", failed_reason=reason), [payment["account_id"]]
    )


async def _complete(
    conn: Connection, emitter: Emitter, payment: Mapping[str, Any], subscription: Mapping[str, Any], *, overpaid: bool
) -> None:
    account_id = payment["account_id"]
    status = subscription["status"]
    # Paid for a subscription cancelled (or expired) meanwhile: the money is taken, so the payment completes
    # and is invoiced, but nothing is revived; it is flagged for a person to refund.
    flagged = overpaid or status not in ("pending", "active")
    period: Mapping[str, Any] = {"period_start": None, "period_end": None}
    replaced: list[dict[str, Any]] = []
    if status == "pending":
        cursor = await conn.execute(_CANCEL_OTHER_ACTIVE, {"account_id": account_id, "id": subscription["id"]})
        replaced = await cursor.fetchall()
        # Two checkouts of one plan both paid: the second replaces the first's unused days; a person decides.
        flagged = flagged or any(other["plan"] == subscription["plan"] for other in replaced)
    await conn.execute(_COMPLETE_PAYMENT, {"id": payment["id"], "flagged": flagged})
    await emitter.emit(conn, "billing.payment.completed", _payment_event(payment, "completed"), [account_id])
    if status == "pending":
        for other in replaced:
            await emitter.emit(
                conn,
                "billing.subscription.cancelled",
                SubscriptionEvent(subscription_id=other["id"], plan=other["plan"], status=other["status"]),
                [account_id],
            )
        cursor = await conn.execute(_ACTIVATE, {"id": subscription["id"]})
        period = await cursor.fetchone() or period
        await conn.execute(_SET_PLAN, {"plan": subscription["plan"], "account_id": account_id})
        await emitter.emit(
            conn,
            "billing.subscription.created",
            SubscriptionEvent(subscription_id=subscription["id"], plan=subscription["plan"], status="active"),
            [account_id],
        )
    elif status == "active":
        cursor = await conn.execute(_EXTEND, {"id": subscription["id"]})
        period = await cursor.fetchone() or period
    await _invoice(conn, emitter, payment, subscription["plan"], period)


async def _invoice(
    conn: Connection, emitter: Emitter, payment: Mapping[str, Any], plan: str, period: Mapping[str, Any]
) -> None:
    """The payment's invoice, numbered from the year's counter row, which stays locked until this commits:
    a number is used exactly when its invoice is, so numbers run without gaps."""
    cursor = await conn.execute(_NEXT_INVOICE_NUMBER)
    counter = await cursor.fetchone()
    assert counter is not None
    number = f"INV-{counter['year']}-{counter['last_number']:06d}"
    item = LineItem(
        description=f"Hire API {plan} plan, 30 days",
        plan=plan,
        quantity=1,
        unit_amount=payment["amount"],
        amount=payment["amount"],
        period_start=period["period_start"],
        period_end=period["period_end"],
    )
    cursor = await conn.execute(
        _INSERT_INVOICE,
        {
            "account_id": payment["account_id"],
            "payment_id": payment["id"],
            "number": number,
            "amount": payment["amount"],
            "currency": payment["currency"],
            "line_items": Jsonb(msgspec.to_builtins([item])),
        },
    )
    invoice = await cursor.fetchone()
    assert invoice is not None
    await emitter.emit(
        conn,
        "billing.invoice.generated",
        InvoiceEvent(
            invoice_id=invoice["id"],
            number=number,
            payment_id=payment["id"],
            amount=payment["amount"],
            currency=payment["currency"],
        ),
        [payment["account_id"]],
    )


def _payment_event(
    payment: Mapping[str, Any], status: PaymentStatus, failed_reason: str | None | msgspec.UnsetType = msgspec.UNSET
) -> PaymentEvent:
    return PaymentEvent(
        payment_id=payment["id"],
        merchant_oid=payment["merchant_oid"],
        amount=payment["amount"],
        currency=payment["currency"],
        status=status,
        failed_reason=failed_reason,
    )


# --- periodic work ------------------------------------------------------------------------------------------


async def expire_subscriptions(conn: Connection, emitter: Emitter) -> None:
    """End the active subscriptions whose period has passed unpaid: `expired`, the account back on the free
    plan, and `billing.subscription.cancelled` with status `expired`; in batches, skipping rows in use."""
    while True:
        cursor = await conn.execute(_CLAIM_EXPIRED, {"limit": EXPIRY_BATCH})
        claimed = await cursor.fetchall()
        if not claimed:
            return
        cursor = await conn.execute(_EXPIRE, {"ids": [row["id"] for row in claimed]})
        expired = await cursor.fetchall()
        await conn.execute(_SET_PLANS, {"plan": _default_plan(), "account_ids": [row["account_id"] for row in claimed]})
        for row in expired:
            await emitter.emit(
                conn,
                "billing.subscription.cancelled",
                SubscriptionEvent(subscription_id=row["id"], plan=row["plan"], status=row["status"]),
                [row["account_id"]],
            )
        log.info("expired %d subscriptions", len(expired))
        if len(claimed) < EXPIRY_BATCH:
            return


# --- helpers --------------------------------------------------------------------------------------------------


def new_merchant_oid() -> str:
    """A fresh order id: alphanumeric (as the provider requires) and unguessable."""
    return _OID_PREFIX + "".join(secrets.choice(_OID_ALPHABET) for _ in range(_OID_RANDOM_CHARS))


def _plans() -> Mapping[str, Plan]:
    # Read at call time: the catalog is built in `procedures/__init__.py`, which imports this module.
    return procedures.CATALOG.plans


def _default_plan() -> str:
    return procedures.CATALOG.default_plan.name


def _plan_fields(plan: Plan) -> dict[str, Any]:
    return {
        "name": plan.name,
        "price": plan.price,
        "currency": plan.currency,
        "per_minute": plan.per_minute,
        "per_day": plan.per_day,
    }
