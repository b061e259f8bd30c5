"""An account's plan changes here, wherever the change comes from — a payment's notification, the expiry of an
unpaid period, a cancellation, an operator's `bin/admin set-plan` — so that each records `plan.changed` in its own
transaction, and only when the plan is really another one afterwards (a renewal or a repeated command records
nothing)."""

from __future__ import annotations

from collections.abc import Sequence

from rpc.audit import log as audit_log
from rpc.core.types import Connection

# Returns the accounts whose plan changed: only those get a `plan.changed` entry.
_SET_PLANS = """
UPDATE accounts SET plan = %(plan)s WHERE id = ANY(%(account_ids)s) AND plan IS DISTINCT FROM %(plan)s
RETURNING id::text AS id
"""


async def change_plans(
    conn: Connection,
    account_ids: Sequence[str],
    plan: str,
    *,
    actor: audit_log.Actor,
    origin: audit_log.Origin = audit_log.NO_ORIGIN,
) -> list[str]:
    """Put the accounts on `plan` in the caller's transaction; record `plan.changed` by `actor` (the account is
    both whose log it is and what changed) for each that was on another one, and return those."""
    cursor = await conn.execute(_SET_PLANS, {"plan": plan, "account_ids": list(account_ids)})
    changed = [str(row["id"]) for row in await cursor.fetchall()]
    for account_id in changed:
        await audit_log.record(
            conn,
            "plan.changed",
            account_id=account_id,
            actor=actor,
            target_id=account_id,
            origin=origin,
        )
    return changed


async def change_plan(
    conn: Connection,
    account_id: str,
    plan: str,
    *,
    actor: audit_log.Actor,
    origin: audit_log.Origin = audit_log.NO_ORIGIN,
) -> bool:
    """`change_plans` for one account: whether its plan changed."""
    return bool(await change_plans(conn, [account_id], plan, actor=actor, origin=origin))
