"""The plans on offer: `billing.plans.list`, and the plan an account falls back to."""

from __future__ import annotations

from procedures.billing.shapes import PlanInfo
from procedures.vocabulary import PLANS, VOCABULARY
from rpc.api import Context, Page, PageParams, procedure
from rpc.core.vocabulary import Plan


def default_plan() -> str:
    """The plan of an account without an active subscription."""
    return VOCABULARY.default_plan.name


def plan_info(plan: Plan) -> PlanInfo:
    return PlanInfo(
        name=plan.name, price=plan.price, currency=plan.currency, per_minute=plan.per_minute, per_day=plan.per_day
    )


@procedure("billing.plans.list", scope="read:billing")
async def list_plans(ctx: Context, params: PageParams) -> Page[PlanInfo]:
    """List the plans: price per 30-day period in minor units (kuruş) and currency, and the request limits."""
    plans = [plan_info(plan) for plan in PLANS.values()]
    data = plans[params.offset : params.offset + params.per_page]
    return Page(data=data, total=len(plans), page=params.page, per_page=params.per_page)
