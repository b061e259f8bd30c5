"""Per-account request budgets: a minute window and a day window of the account's plan (CONTRACT.md §10).

Counters live in the `limits` library's storage (memory, or Redis to share them between processes).
Windows are fixed and begin at the account's first counted call in them. A call refused by one window
does not consume the other; refused calls are not counted (an exhausted window's counter may run past
its limit, which changes nothing: it reports 0 left until it resets). The key of a window includes its
size, so a plan change starts fresh windows on the next request. A store that cannot be reached fails
open with a logged warning.
"""

from __future__ import annotations

import asyncio
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


class OverLimit(RateLimited):
    """A 429 that also carries the exhausted window's headers."""

    def __init__(self, quota: Quota) -> None:
        super().__init__(quota.reset_at - time.time(), "The account's request budget is used up; retry later.")
        self.quota = quota

    def headers(self) -> dict[str, str]:
        return {**super().headers(), **self.quota.headers()}


class RateLimiter:
    """Counts calls per account against both windows of its plan."""

    def __init__(self, storage: Storage, plans: Mapping[str, Plan]) -> None:
        self._storage = storage
        # In-process counters have nothing to wait for: no timer armed and cancelled on every call.
        self._timeout = None if isinstance(storage, MemoryCounters) else STORE_TIMEOUT_SECONDS
        self._windows = {
            name: (RateLimitItemPerMinute(plan.per_minute), RateLimitItemPerDay(plan.per_day))
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
                for item in self._windows[plan]:
                    await self._storage.incr(item.key_for(account_id), item.get_expiry(), amount=-1)
        except Exception as exc:
            log.warning("rate-limit store unavailable, a call stays counted: %s", type(exc).__name__)

    async def _count(self, account_id: str, minute: RateLimitItem, day: RateLimitItem) -> Quota:
        minute_key, day_key = minute.key_for(account_id), day.key_for(account_id)
        minute_count = await self._storage.incr(minute_key, minute.get_expiry())
        if minute_count > minute.amount:
            raise OverLimit(await self._quota(minute, minute_key, minute_count))
        day_count = await self._storage.incr(day_key, day.get_expiry())
        if day_count > day.amount:
            await self._storage.incr(minute_key, minute.get_expiry(), amount=-1)  # refused: give the minute back
            raise OverLimit(await self._quota(day, day_key, day_count))
        per_minute = await self._quota(minute, minute_key, minute_count)
        per_day = await self._quota(day, day_key, day_count)
        return per_day if per_day.remaining < per_minute.remaining else per_minute

    async def _quota(self, item: RateLimitItem, key: str, count: int) -> Quota:
        reset_at = await self._storage.get_expiry(key)
        return Quota(limit=item.amount, remaining=max(0, item.amount - count), reset_at=reset_at)
