"""The panel's Billing page (Account > Billing): the account's plan among the plans on offer, and its
subscriptions, payments and invoices, newest first. The payment provider sends people back here
(`?payment=ok` or `?payment=failed`); the plan changes when the provider's notification arrives, which this
page says. It shows what the API's billing procedures show, to the roles they serve."""

from __future__ import annotations

from starlette.responses import Response
from starlette.routing import Route

from procedures.billing.subscriptions import BILLING_ROLES
from procedures.vocabulary import PLANS
from rpc.panel.handler import Panel, error_page, page
from rpc.panel.pages import PanelPages

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
RETURNS = {
    "ok": "Thank you: the payment provider accepted your payment. Your plan changes as soon as the provider "
    "confirms it to us, usually within a minute; reload this page to see it.",
    "failed": "The payment did not go through and nothing was charged. You can try again with another card.",
}


def money(amount: int, currency: str) -> str:
    """Minor units as the panel shows them: `990.00 TRY`."""
    return f"{amount // 100:,}.{amount % 100:02d} {currency}"


@page
async def billing_page(panel: Panel) -> Response:
    """`GET /panel/billing[?payment=ok|failed]`; people whose role the API's billing procedures refuse get a page
    that says billing belongs to hiring accounts."""
    if panel.user.role not in BILLING_ROLES:
        return error_page(
            403,
            "Billing",
            "Billing belongs to hiring accounts: their employers and admins see the plan, payments and invoices here.",
            user=panel.user,
        )
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
    )
    return PAGES.render("billing/billing.html", context)


routes = [Route("/panel/billing", billing_page, methods=["GET"])]
