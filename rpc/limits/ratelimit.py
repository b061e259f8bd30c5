"""Per-account request budgets: a minute window and a day window of the account's plan (docs/decisions.md).

Counters live in the `limits` library's storage (memory, or Redis to share them between processes).
Windows are fixed and begin at the account's first counted call in them. A call refused by one window
does not consume the other; refused calls are not counted (an exhausted window's counter may run past
its limit, which changes nothing: it reports 0 left until it resets). The key of a window includes its
size, so a plan change starts fresh windows on the next request. A store that cannot be reached fails
open with a logged warning.

A 429 says which window ran out, its limit, when it resets and which plan allows more (message and details), so
that a caller knows whether to wait or to upgrade. In development (`SERVICE_ENV=development`, a local install)
the default plan's budget is `DEVELOPMENT_FACTOR` times larger: a person trying the API in a loop or from /docs
met the free plan's 60 calls a minute within minutes. Production and the tests keep the plans as sold.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerDay, RateLimitItemPerMinute
from limits.aio.storage import Storage

from rpc.core.errors import RateLimited
from rpc.core.vocabulary import Plan
from rpc.limits.counters import MemoryCounters

log = logging.getLogger(__name__)

STORE_TIMEOUT_SECONDS = 1.0  # a store slower than this is treated as down
DEVELOPMENT_FACTOR = 10  # the free plan's 60 a minute and 1,000 a day become 600 and 10,000 in development


@dataclass(frozen=True, slots=True)
class Quota:
    """One window's state after a call: the three `X-RateLimit-*` headers."""

    limit: int
    remaining: int
    reset_at: float

    def headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(math.ceil(self.reset_at)),
        }


@dataclass(frozen=True, slots=True)
class Window:
    """One window of a plan's budget: its name (`minute`, `day`), its counter, and the plan that allows more."""

    name: str
    item: RateLimitItem
    plan: str
    raised_by: Plan | None


class OverLimit(RateLimited):
    """A 429 that names the exhausted window, its limit, its reset and the plan that raises it, and carries the
    window's headers."""

    def __init__(self, quota: Quota, window: Window) -> None:
        reset = dt.datetime.fromtimestamp(math.ceil(quota.reset_at), dt.UTC).isoformat().replace("+00:00", "Z")
        super().__init__(quota.reset_at - time.time())
        way_up = (
            f" The {window.raised_by.name} plan allows {_per(window.raised_by, window.name):,} a {window.name} "
            "(Billing in the panel, or billing.subscriptions.create)."
            if window.raised_by
            else " No plan allows more: spread the calls out."
        )
        self.message = (
            f"The account's {window.plan} plan allows {quota.limit:,} calls a {window.name}, and they are used up; "
            f"the window resets at {reset} (in {self.retry_after} s).{way_up}"
        )
        self.details = {
            "window": window.name,
            "limit": quota.limit,
            "reset_at": reset,
            "retry_after": self.retry_after,
            "plan": window.plan,
            "upgrade_to": window.raised_by.name if window.raised_by else None,
        }
        self.quota = quota

    def headers(self) -> dict[str, str]:
        return {**super().headers(), **self.quota.headers()}


def _per(plan: Plan, window: str) -> int:
    return plan.per_minute if window == "minute" else plan.per_day


def development_budgets(plans: Mapping[str, Plan]) -> dict[str, Plan]:
    """`plans` with the first (default, free) plan's budget `DEVELOPMENT_FACTOR` times larger."""
    first, *_ = plans
    return {
        name: dataclasses.replace(
            plan, per_minute=plan.per_minute * DEVELOPMENT_FACTOR, per_day=plan.per_day * DEVELOPMENT_FACTOR
        )
        if name == first
        else plan
        for name, plan in plans.items()
    }


class RateLimiter:
    """Counts calls per account against both windows of its plan."""

    def __init__(self, storage: Storage, plans: Mapping[str, Plan]) -> None:
        self._storage = storage
        # In-process counters have nothing to wait for: no timer armed and cancelled on every call.
        self._timeout = None if isinstance(storage, MemoryCounters) else STORE_TIMEOUT_SECONDS
        self._windows = {
            name: (
                _window("minute", RateLimitItemPerMinute(plan.per_minute), plan, plans),
                _window("day", RateLimitItemPerDay(plan.per_day), plan, plans),
            )
            for name, plan in plans.items()
        }

    async def count(self, account_id: str, plan: str) -> Quota | None:
        """Count one call; the tighter window's quota, or None when the store is down. Raises OverLimit."""
        minute, day = self._windows[plan]
        try:
            async with asyncio.timeout(self._timeout):
                return await self._count(account_id, minute, day)
        except OverLimit:
            raise
        except Exception as exc:
            log.warning("rate-limit store unavailable, not limiting: %s", type(exc).__name__)
            return None

    async def release(self, account_id: str, plan: str) -> None:
        """Give back a call that `count` counted in both windows but that is answered as if never made."""
        try:
            async with asyncio.timeout(self._timeout):
                for window in self._windows[plan]:
                    await self._storage.incr(window.item.key_for(account_id), window.item.get_expiry(), amount=-1)
        except Exception as exc:
            log.warning("rate-limit store unavailable, a call stays counted: %s", type(exc).__name__)

    async def _count(self, account_id: str, minute_window: Window, day_window: Window) -> Quota:
        minute, day = minute_window.item, day_window.item
        minute_key, day_key = minute.key_for(account_id), day.key_for(account_id)
        minute_count = await self._storage.incr(minute_key, minute.get_expiry())
        if minute_count > minute.amount:
            raise OverLimit(await self._quota(minute, minute_key, minute_count), minute_window)
        day_count = await self._storage.incr(day_key, day.get_expiry())
        if day_count > day.amount:
            await self._storage.incr(minute_key, minute.get_expiry(), amount=-1)  # refused: give the minute back
            raise OverLimit(await self._quota(day, day_key, day_count), day_window)
        per_minute = await self._quota(minute, minute_key, minute_count)
        per_day = await self._quota(day, day_key, day_count)
        return per_day if per_day.remaining < per_minute.remaining else per_minute

    async def _quota(self, item: RateLimitItem, key: str, count: int) -> Quota:
        reset_at = await self._storage.get_expiry(key)
        return Quota(limit=item.amount, remaining=max(0, item.amount - count), reset_at=reset_at)


def _window(name: str, item: RateLimitItem, plan: Plan, plans: Mapping[str, Plan]) -> Window:
    """A window of `plan`, with the first plan (in the vocabulary's order) whose same window is larger."""
    raised_by = next((other for other in plans.values() if _per(other, name) > _per(plan, name)), None)
    return Window(name=name, item=item, plan=plan.name, raised_by=raised_by)
