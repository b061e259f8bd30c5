"""Fixed-window counters on the `limits` library, in memory or Redis (`RATE_LIMIT_STORAGE`).

A store that cannot be reached fails open with a logged warning: an outage of Redis must not become an
outage of the API.
"""

from __future__ import annotations

import logging
import time

from limits import RateLimitItem, parse_many
from limits.aio.storage import Storage
from limits.aio.strategies import FixedWindowRateLimiter
from limits.storage import storage_from_string

from rpc.counters import MemoryCounters
from rpc.errors import RateLimited

log = logging.getLogger(__name__)


def open_storage(uri: str) -> Storage:
    """`memory://` (this process's counters) or `redis://host:port/db` (shared), as a `limits` async storage."""
    if uri.removeprefix("async+") == "memory://":
        return MemoryCounters()
    storage = storage_from_string(uri if uri.startswith("async+") else f"async+{uri}")
    assert isinstance(storage, Storage)
    return storage


class Throttle:
    """Named groups of limits, each counted per key (an address, an e-mail): any exhausted limit refuses."""

    def __init__(self, storage: Storage, groups: dict[str, str]) -> None:
        self._limiter = FixedWindowRateLimiter(storage)
        self._groups: dict[str, list[RateLimitItem]] = {name: parse_many(spec) for name, spec in groups.items()}

    async def hit(self, group: str, key: str) -> None:
        """Count one attempt of `key` in `group`; raise RateLimited when it is over any of the limits."""
        for item in self._groups[group]:
            try:
                allowed = await self._limiter.hit(item, group, key)
                if allowed:
                    continue
                stats = await self._limiter.get_window_stats(item, group, key)
            except Exception as exc:  # the store is down: fail open
                log.warning("rate-limit store unavailable, not throttling: %s", type(exc).__name__)
                return
            raise RateLimited(stats.reset_time - time.time(), "Too many attempts; retry later.")
