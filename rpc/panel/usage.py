"""An account's use of its request budget, read from the rate limiter's counters without counting anything.

The keys are the limiter's (rpc/ratelimit.py): the `limits` library's key of a per-minute and a per-day item
of the plan's sizes, for the account id. A store that cannot be reached gives no figures (the page says so);
it never fails the page.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerDay, RateLimitItemPerMinute
from limits.aio.storage import Storage

from rpc.core.vocabulary import Plan

log = logging.getLogger(__name__)

STORE_TIMEOUT_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Window:
    """One window of the budget: requests counted in it, its limit, and when it resets (None: not started)."""

    used: int
    limit: int
    resets_at: dt.datetime | None

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.used / self.limit)) if self.limit else 0


@dataclass(frozen=True, slots=True)
class Usage:
    minute: Window
    day: Window


async def read_usage(storage: Storage, plan: Plan, account_id: str) -> Usage | None:
    """Both windows of the account on its plan; None when the counters cannot be read."""
    try:
        async with asyncio.timeout(STORE_TIMEOUT_SECONDS):
            minute = await _window(storage, RateLimitItemPerMinute(plan.per_minute), account_id)
            day = await _window(storage, RateLimitItemPerDay(plan.per_day), account_id)
    except Exception as exc:
        log.warning("rate-limit store unavailable, no usage shown: %s", type(exc).__name__)
        return None
    return Usage(minute=minute, day=day)


async def _window(storage: Storage, item: RateLimitItem, account_id: str) -> Window:
    key = item.key_for(account_id)
    used = await storage.get(key)
    resets_at = dt.datetime.fromtimestamp(await storage.get_expiry(key), dt.UTC) if used else None
    return Window(used=min(used, item.amount), limit=item.amount, resets_at=resets_at)
