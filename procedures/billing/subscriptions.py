"""Subscribing (a checkout with the payment provider) and cancelling, and the account's billing records:
subscriptions, payments and invoices.

A checkout writes the `pending` subscription and its `pending` payment (or, for the plan of the account's active
subscription, a renewal payment on that one), commits, and only then asks the provider for its payment page,
holding no connection while it waits (at most PAYTR_TIMEOUT); a provider that fails takes both back again, so
the caller gets `503` and nothing is left behind. A failure once they are stored (the database lost before the
answer is recorded) is a `503` that says so; a retry with the call's Idempotency-Key takes them back and opens the
one checkout in their place. An account has at most two checkouts waiting at once.
"""

from __future__ import annotations

import datetime as dt
import secrets
import string
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import msgspec

from procedures.billing.plans import default_plan
from procedures.billing.provider import PayTRSettings, checkout
from procedures.billing.settlement import lock_account
from procedures.billing.shapes import (
    CreateSubscription,
    Invoice,
    Order,
    Payment,
    Subscribed,
    Subscription,
    SubscriptionEvent,
)
from procedures.vocabulary import PLANS
from rpc.api import (
    Conflict,
    Connection,
    Context,
    Id,
    IdParams,
    InvalidTransition,
    NotFound,
    Page,
    PageParams,
    Role,
    Unavailable,
    one_row,
    page_and_total,
    parse_id,
    procedure,
)
from rpc.core.vocabulary import Plan
from rpc.dispatch.context import TransactionOpener
from rpc.payments.plan_change import change_plan
from rpc.settings import Settings

T = TypeVar("T", bound=msgspec.Struct)

PROVIDER = "paytr"
BILLING_ROLES: tuple[Role, ...] = ("employer", "admin")
MAX_WAITING_CHECKOUTS = 2  # per account (docs/security.md)
WAITING_MARGIN_SECONDS = 5
_OID_ALPHABET = string.ascii_letters + string.digits
_OID_PREFIX = "HIRE"
_OID_RANDOM_CHARS = 28  # 28 base62 characters: about 166 bits, unguessable

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
_LOCK_OWN_SUBSCRIPTION = f"""
SELECT {_SUBSCRIPTION} FROM subscriptions WHERE id = %(id)s AND account_id = %(account_id)s FOR UPDATE
"""
_CANCEL = f"""
UPDATE subscriptions SET status = 'cancelled', cancelled_at = now(), updated_at = now()
WHERE id = %(id)s RETURNING {_SUBSCRIPTION}
"""

# Newest first; timestamps have whole seconds, so invoices of one second follow their numbers.
_LISTS = {
    "subscriptions": (_SUBSCRIPTION, "created_at DESC, id DESC"),
    "payments": (_PAYMENT, "created_at DESC, id DESC"),
    "invoices": (_INVOICE, "issued_at DESC, number DESC"),
}


# Records what a checkout leaves standing (JSON; None: nothing), in the transaction that stored it.
Recorder = Callable[[Connection, Any], Awaitable[None]]


async def _record_nothing(conn: Connection, progress: Any) -> None:
    """The panel's checkout keeps no Idempotency-Key to record with."""


@dataclass(frozen=True, slots=True)
class Buyer:
    """Who checks out, for which account, from which address (the provider records it)."""

    user_id: str
    account_id: str
    address: str


async def open_checkout(
    transactions: TransactionOpener,
    http: httpx.AsyncClient,
    settings: Settings,
    buyer: Buyer,
    plan: Plan,
    record: Recorder = _record_nothing,
    resumed: Any = None,
) -> Subscribed:
    """The checkout of `plan` for the buyer's account, in three steps: the pending objects are written and
    committed, the provider is asked with nothing held, and its answer is recorded in a second transaction.
    `transactions` opens each transaction (the API's confirms the caller's credential in it).

    `record` keeps what is left standing (the API's: with the call's Idempotency-Key). A checkout `resumed` from
    an earlier run of the same call, which stored its pending objects and then failed, first takes those back:
    their payment page, if the provider made one, was never handed out, and this run's takes its place — one
    checkout, never two."""
    async with transactions() as conn:
        if resumed is not None:
            await _abandon_checkout(conn, msgspec.convert(resumed, _Stored))
        pending = await _open(conn, settings, buyer, plan)
        stored = _Stored(pending.payment.id, pending.subscription.id, pending.new_subscription)
        await record(conn, msgspec.to_builtins(stored))
    try:
        page = await checkout(http, settings, pending.order)
    except Unavailable:
        async with transactions() as conn:
            await _abandon_checkout(conn, stored)
            await record(conn, None)
        raise
    async with transactions() as conn:
        await conn.execute(_CHECKOUT_ANSWERED, {"id": pending.payment.id})
    return Subscribed(subscription=pending.subscription, payment=pending.payment, checkout=page)


@procedure("billing.subscriptions.create", scope="write:billing", write=True, roles=BILLING_ROLES, calls_out=True)
async def create_subscription(ctx: Context, params: CreateSubscription) -> Subscribed:
    """Subscribe your account to `pro` or `enterprise`: a `pending` subscription and its `pending` payment,
    with the provider's payment page as `checkout` (null when no provider is configured). For the plan of
    your active subscription this is a renewal: a new payment on that subscription, whose period extends by
    30 days when it completes. An account has at most two checkouts waiting on the provider at once."""
    buyer = Buyer(user_id=ctx.principal.user_id, account_id=ctx.principal.account_id, address=ctx.client_address)
    plan = PLANS[params.plan]
    return await open_checkout(ctx.transaction, ctx.http, ctx.settings, buyer, plan, ctx.record_progress, ctx.resumed)


@procedure(
    "billing.subscriptions.cancel",
    scope="write:billing",
    write=True,
    roles=BILLING_ROLES,
    emits=("billing.subscription.cancelled",),
)
async def cancel_subscription(ctx: Context, params: IdParams) -> Subscription:
    """Cancel a `pending` or `active` subscription of your account at once (event
    `billing.subscription.cancelled`); cancelling the active one puts the account back on the free plan."""
    subscription_id = parse_id(params.id)
    account_id = ctx.principal.account_id
    await lock_account(ctx.conn, account_id)
    cursor = await ctx.conn.execute(_LOCK_OWN_SUBSCRIPTION, {"id": subscription_id, "account_id": account_id})
    row = await cursor.fetchone()
    if row is None:
        raise NotFound("No such subscription.")
    if row["status"] not in ("pending", "active"):
        raise InvalidTransition(row["status"], "cancelled")
    cursor = await ctx.conn.execute(_CANCEL, {"id": subscription_id})
    cancelled = Subscription(**await cursor.fetchone())  # type: ignore[arg-type]
    if row["status"] == "active":
        await change_plan(ctx.conn, account_id, default_plan(), actor=ctx.actor, origin=ctx.origin)
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
async def get_subscription(ctx: Context, params: IdParams) -> Subscription:
    """Get one subscription of your account."""
    return await _get(ctx, "subscriptions", params.id, Subscription)


@procedure("billing.payments.list", scope="read:billing", roles=BILLING_ROLES)
async def list_payments(ctx: Context, params: PageParams) -> Page[Payment]:
    """List your account's payments, newest first."""
    return await _list(ctx, "payments", params, Payment)


@procedure("billing.payments.get", scope="read:billing", roles=BILLING_ROLES)
async def get_payment(ctx: Context, params: IdParams) -> Payment:
    """Get one payment of your account."""
    return await _get(ctx, "payments", params.id, Payment)


@procedure("billing.invoices.list", scope="read:billing", roles=BILLING_ROLES)
async def list_invoices(ctx: Context, params: PageParams) -> Page[Invoice]:
    """List your account's invoices, newest first."""
    return await _list(ctx, "invoices", params, Invoice)


@procedure("billing.invoices.get", scope="read:billing", roles=BILLING_ROLES)
async def get_invoice(ctx: Context, params: IdParams) -> Invoice:
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


async def _open(conn: Connection, settings: Settings, buyer: Buyer, plan: Plan) -> _PendingCheckout:
    """The pending subscription (or the active one, for a renewal) and a pending payment marked as waiting on
    the provider; `409` when the account already has `MAX_WAITING_CHECKOUTS` waiting (counted under the
    account's row lock, so concurrent checkouts cannot both pass)."""
    account_id = buyer.account_id
    values: dict[str, Any] = {"account_id": account_id, "user_id": buyer.user_id, "plan": plan.name}
    cursor = await conn.execute(_LOCK_ACCOUNT_WITH_BUYER, values)
    person = await cursor.fetchone()
    if person is None:
        raise NotFound("Your user no longer exists.")
    waiting_for = dt.timedelta(seconds=PayTRSettings.of(settings).timeout + WAITING_MARGIN_SECONDS)
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
    email = person["email"] or f"{buyer.user_id}@users.invalid"
    order = Order(
        merchant_oid=merchant_oid,
        amount=plan.price,
        currency=plan.currency,
        description=f"Hire API {plan.name} plan, 30 days",
        email=email,
        buyer_name=person["display_name"] or person["account_name"] or email,
        buyer_ip=buyer.address,
    )
    return _PendingCheckout(subscription, payment, new_subscription, order)


class _Stored(msgspec.Struct, frozen=True):
    """What the first step of a checkout leaves standing: its payment, and its subscription when made for it."""

    payment_id: str
    subscription_id: str
    new_subscription: bool


async def _abandon_checkout(conn: Connection, stored: _Stored) -> None:
    """A checkout the provider failed (or one a resumed call takes the place of) leaves nothing behind: its
    payment, and the subscription made for it, while still pending."""
    await conn.execute(_DELETE_PAYMENT, {"id": stored.payment_id})
    if stored.new_subscription:
        await conn.execute(_DELETE_SUBSCRIPTION, {"id": stored.subscription_id})


def new_merchant_oid() -> str:
    """A fresh order id: alphanumeric (as the provider requires) and unguessable."""
    return _OID_PREFIX + "".join(secrets.choice(_OID_ALPHABET) for _ in range(_OID_RANDOM_CHARS))
