"""The panel's Billing page (Account > Billing): the account's plan among the plans on offer, and its
subscriptions, payments and invoices, newest first. The payment provider sends people back here
(`?payment=ok` or `?payment=failed`); the plan changes when the provider's notification arrives, which this
page says. It shows what the API's billing procedures show, to the roles they serve."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.responses import Response
from starlette.routing import Route

from procedures.billing.provider import PayTRSettings
from procedures.billing.subscriptions import BILLING_ROLES, Buyer, open_checkout
from procedures.vocabulary import PLANS
from rpc.api import Conflict, Connection, Unavailable
from rpc.panel import reveals
from rpc.panel.handler import Panel, error_page, page, page_calling_out
from rpc.panel.pages import PanelPages
from rpc.web.auth_api import client_address
from rpc.web.pages import redirect

PAGES = PanelPages("procedures.billing")

SHOWN = 20

_ACCOUNT = "SELECT name, plan FROM accounts WHERE id = %(account_id)s"
_SUBSCRIPTIONS = """
SELECT id::text AS id, plan, status, current_period_start, current_period_end, created_at, cancelled_at
FROM subscriptions WHERE account_id = %(account_id)s ORDER BY created_at DESC, id DESC LIMIT %(limit)s
"""
_PAYMENTS = """
SELECT id::text AS id, merchant_oid, amount, currency, status, failed_reason, created_at, completed_at
FROM payments WHERE account_id = %(account_id)s ORDER BY created_at DESC, id DESC LIMIT %(limit)s
"""
_INVOICES = """
SELECT id::text AS id, number, amount, currency, issued_at
FROM invoices WHERE account_id = %(account_id)s ORDER BY issued_at DESC, id DESC LIMIT %(limit)s
"""
NO_PROVIDER = (
    "No payment provider is configured on this server, so there is no payment page to open, and nothing was "
    "created. To take payments, set PAYTR_MERCHANT_ID, PAYTR_MERCHANT_KEY and PAYTR_MERCHANT_SALT (see "
    "docs/billing.md) and restart. To change this account's plan without a payment (a local install, a "
    "trial), an operator runs: bin/admin set-plan --email <your e-mail> --plan pro"
)
RETURNS = {
    "ok": "Thank you: the payment provider accepted your payment. Your plan changes as soon as the provider "
    "confirms it to us, usually within a minute; reload this page to see it.",
    "failed": "The payment did not go through and nothing was charged. You can try again with another card.",
}


def money(amount: int, currency: str) -> str:
    """Minor units as the panel shows them: `990.00 TRY`."""
    return f"{amount // 100:,}.{amount % 100:02d} {currency}"


def _not_for_you(panel: Panel) -> Response:
    return error_page(
        403,
        "Billing",
        "Billing belongs to hiring accounts: their employers and admins see the plan, payments and invoices here.",
        user=panel.user,
    )


@page
async def billing_page(panel: Panel) -> Response:
    """`GET /panel/billing[?payment=ok|failed]`; with `?reveal=`, once, the payment page of the checkout just
    opened. People whose role the API's billing procedures refuse get a page that says billing belongs to hiring
    accounts."""
    if panel.user.role not in BILLING_ROLES:
        return _not_for_you(panel)
    reveal = await reveals.take(panel, "checkout")
    notice = reveals.shown_already(panel, reveal)
    return await _billing(panel, checkout_url=reveal.secret if reveal else None, notice=notice)


@page_calling_out
async def upgrade(panel: Panel) -> Response:
    """`POST /panel/billing/upgrade` with `plan`: the checkout `billing.subscriptions.create` opens (a pending
    subscription and payment, then the provider's payment page), redirecting to this page, which links to the
    provider's page once. The provider's address is a link, not a redirect: the panel's forms post only to
    itself (`form-action 'self'`). No connection is held while the provider thinks: each step takes its own."""
    if panel.user.role not in BILLING_ROLES:
        return _not_for_you(panel)
    plan = panel.field("plan")
    if plan not in PLANS or not PLANS[plan].price:
        return await _billing_again(panel, 400, "Choose one of the paid plans.")
    if not PayTRSettings.of(panel.services.settings).configured:  # a pending checkout nobody could ever pay
        return await _billing_again(panel, 409, NO_PROVIDER)
    buyer = Buyer(user_id=panel.user.user_id, account_id=panel.account_id, address=client_address(panel.request))

    @contextlib.asynccontextmanager
    async def transaction() -> AsyncIterator[Connection]:
        async with panel.connected() as step, step.conn.transaction():
            yield step.conn

    try:
        subscribed = await open_checkout(transaction, panel.services.http, panel.services.settings, buyer, PLANS[plan])
    except Conflict as exc:
        return await _billing_again(panel, 409, _sentence(exc.message))
    except Unavailable:
        error = "The payment provider did not answer. Nothing was charged or kept; try again in a minute."
        return await _billing_again(panel, 503, error)
    assert subscribed.checkout is not None, "a configured provider opens a payment page or raises"
    async with panel.connected() as step, step.conn.transaction():
        token = await reveals.keep(step, "checkout", subscribed.payment.id, subscribed.checkout.url)
    return redirect(f"/panel/billing?reveal={token}")


async def _billing_again(panel: Panel, status: int, error: str) -> Response:
    """The Billing page again, with what stopped the form."""
    async with panel.connected() as page:
        return await _billing(page, status=status, error=error)


def _sentence(message: str) -> str:
    return message[:1].upper() + message[1:]


async def _billing(
    panel: Panel,
    *,
    status: int = 200,
    error: str | None = None,
    checkout_url: str | None = None,
    notice: str | None = None,
) -> Response:
    params = {"account_id": panel.account_id, "limit": SHOWN}
    account = await (await panel.conn.execute(_ACCOUNT, params)).fetchone()
    subscriptions = await (await panel.conn.execute(_SUBSCRIPTIONS, params)).fetchall()
    payments = await (await panel.conn.execute(_PAYMENTS, params)).fetchall()
    invoices = await (await panel.conn.execute(_INVOICES, params)).fetchall()
    outcome = panel.request.query_params.get("payment", "")
    context = panel.context(
        section="billing",
        account=account,
        plans=list(PLANS.values()),
        subscriptions=subscriptions,
        payments=payments,
        invoices=invoices,
        outcome=outcome if outcome in RETURNS else "",
        outcome_message=RETURNS.get(outcome, ""),
        money=money,
        error=error,
        checkout_url=checkout_url,
        notice=notice,
    )
    return PAGES.render("billing/billing.html", context, status)


routes = [
    Route("/panel/billing", billing_page, methods=["GET"]),
    Route("/panel/billing/upgrade", upgrade, methods=["POST"]),
]
