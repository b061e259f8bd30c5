"""The panel's first page: the account, its plan and today's use of the plan's request budget, and where to
go next (billing; the first key, endpoint or application when there is none yet)."""

from __future__ import annotations

from starlette.responses import Response

from rpc.panel.handler import Panel, page
from rpc.panel.usage import read_usage

_ACCOUNT = """
SELECT a.name, a.plan, a.created_at,
       (SELECT count(*) FROM api_keys AS k JOIN users AS u ON u.id = k.user_id
        WHERE u.account_id = a.id AND k.revoked_at IS NULL) AS keys,
       (SELECT count(*) FROM webhook_endpoints AS ep WHERE ep.account_id = a.id) AS endpoints,
       (SELECT count(*) FROM oauth_clients AS c WHERE c.account_id = a.id) AS apps
FROM accounts AS a WHERE a.id = %(account_id)s
"""


@page
async def overview_page(panel: Panel) -> Response:
    """`GET /panel`."""
    cursor = await panel.conn.execute(_ACCOUNT, {"account_id": panel.account_id})
    account = await cursor.fetchone()
    assert account is not None  # a session's user has an account (ON DELETE CASCADE)
    plans = panel.services.vocabulary.plans
    plan = plans.get(account["plan"], panel.services.vocabulary.default_plan)
    usage = await read_usage(panel.services.counters, plan, panel.account_id)
    return panel.render("panel/overview.html", section="overview", account=account, plan=plan, usage=usage)
