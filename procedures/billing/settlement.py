"""Settlement: a provider's verified notice applied to its payment, and the periodic end of unpaid periods.

Locks are always taken in one order — payment, then account, then subscriptions — so concurrent
notifications, cancellations and the expiry never deadlock; a notification repeated (even 50 times at once)
waits on the payment's row lock and then finds it settled. Every change of an account's plan goes through
`rpc.payments.plan_change`, which records `plan.changed` in the audit log in the same transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import msgspec
from psycopg.types.json import Jsonb

from procedures.billing.plans import default_plan
from procedures.billing.shapes import (
    InvoiceEvent,
    LineItem,
    Notice,
    PaymentEvent,
    PaymentStatus,
    SubscriptionEvent,
)
from rpc.api import Connection
from rpc.audit import log as audit_log
from rpc.core.periodic import EventSink, Periodic
from rpc.payments.plan_change import change_plan, change_plans

log = logging.getLogger(__name__)

# 30 days of 24 hours, whatever the session's time zone (an interval of '30 days' follows DST there).
PERIOD = "interval '720 hours'"
EXPIRY_BATCH = 100
EXPIRY_ACTOR = audit_log.automated("subscription-expiry")

_LOCK_ACCOUNT = "SELECT id FROM accounts WHERE id = %(account_id)s FOR UPDATE"
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


async def lock_account(conn: Connection, account_id: str) -> None:
    """The account's row lock, taken after the payment's and before any subscription's."""
    await conn.execute(_LOCK_ACCOUNT, {"account_id": account_id})


async def settle(
    conn: Connection,
    emitter: EventSink,
    notice: Notice,
    *,
    actor: audit_log.Actor,
    origin: audit_log.Origin = audit_log.NO_ORIGIN,
) -> str:
    """Apply a verified notice to its payment, in the caller's transaction; return the audit word. `actor` is
    the provider, as the audit log records a plan it changes.

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
    await lock_account(conn, payment["account_id"])
    cursor = await conn.execute(_LOCK_SUBSCRIPTION, {"id": payment["subscription_id"]})
    subscription = await cursor.fetchone()
    assert subscription is not None  # payments_subscription_fkey
    if not notice.succeeded:
        await _fail(conn, emitter, payment, notice.failed_reason, notice.failed_reason_code, flagged=False)
        return "failed"
    if notice.total_amount < payment["amount"]:
        await _fail(conn, emitter, payment, "amount_mismatch", None, flagged=True)
        return "amount_mismatch"
    overpaid = notice.total_amount > payment["amount"]
    await _complete(conn, emitter, payment, subscription, actor, origin, overpaid=overpaid)
    return "applied"


async def _fail(
    conn: Connection,
    emitter: EventSink,
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
    conn: Connection,
    emitter: EventSink,
    payment: Mapping[str, Any],
    subscription: Mapping[str, Any],
    actor: audit_log.Actor,
    origin: audit_log.Origin,
    *,
    overpaid: bool,
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
        await change_plan(conn, account_id, subscription["plan"], actor=actor, origin=origin)
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
    conn: Connection, emitter: EventSink, payment: Mapping[str, Any], plan: str, period: Mapping[str, Any]
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


async def expire_subscriptions(conn: Connection, emitter: EventSink) -> None:
    """End the active subscriptions whose period has passed unpaid: `expired`, the account back on the free
    plan (`plan.changed` by the automated `subscription-expiry`), and `billing.subscription.cancelled` with status
    `expired`; in batches, skipping rows in use."""
    while True:
        cursor = await conn.execute(_CLAIM_EXPIRED, {"limit": EXPIRY_BATCH})
        claimed = await cursor.fetchall()
        if not claimed:
            return
        cursor = await conn.execute(_EXPIRE, {"ids": [row["id"] for row in claimed]})
        expired = await cursor.fetchall()
        await change_plans(conn, [row["account_id"] for row in claimed], default_plan(), actor=EXPIRY_ACTOR)
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


EXPIRY = Periodic(cron="* * * * *", run=expire_subscriptions)  # every minute, on the delivery workers
