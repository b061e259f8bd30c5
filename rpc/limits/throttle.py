"""Limits on what can be asked without a credential (sign-in, token and receiver endpoints): fixed-window
counters on the `limits` library, in memory or Redis (`RATE_LIMIT_STORAGE`).

These fail closed: when the store cannot be reached (or answers slower than a second), the attempt is refused
with `429`, since an unlimited sign-in endpoint is a password-guessing endpoint. Groups that count people who
are signed in (the panel's forms) fail open instead, as the `/v1` budgets of `rpc.limits.ratelimit` do. Client
addresses are counted by `address_key`: an IPv6 client by its /64 network, the allocation one subscriber
usually holds whole.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Collection, Mapping

from limits import RateLimitItem, parse_many
from limits.aio.storage import Storage
from limits.aio.strategies import FixedWindowRateLimiter
from limits.storage import storage_from_string

from rpc.core.errors import RateLimited
from rpc.limits.counters import MemoryCounters

log = logging.getLogger(__name__)

STORE_TIMEOUT_SECONDS = 1.0
STORE_DOWN_RETRY_SECONDS = 5
IPV6_NETWORK_PREFIX = 64


def address_key(address: str) -> str:
    """What a client address is counted as: an IPv4 address (also when mapped into IPv6) as it is, an IPv6
    address by its /64 network, so that hopping between the addresses of one allocation gains nothing."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, IPV6_NETWORK_PREFIX), strict=False))
    return str(parsed)


def open_storage(uri: str) -> Storage:
    """`memory://` (this process's counters) or `redis://host:port/db` (shared), as a `limits` async storage."""
    if uri.removeprefix("async+") == "memory://":
        return MemoryCounters()
    storage = storage_from_string(uri if uri.startswith("async+") else f"async+{uri}")
    assert isinstance(storage, Storage)
    return storage


class Throttle:
    """Named groups of limits, each counted per key (an address, an e-mail): any exhausted limit refuses."""

    def __init__(self, storage: Storage, groups: Mapping[str, str], open_groups: Collection[str] = ()) -> None:
        self._limiter = FixedWindowRateLimiter(storage)
        self._open_groups = frozenset(open_groups)
        # In-process counters have nothing to wait for: no timer armed and cancelled on every attempt.
        self._timeout = None if isinstance(storage, MemoryCounters) else STORE_TIMEOUT_SECONDS
        self._groups: dict[str, list[RateLimitItem]] = {name: parse_many(spec) for name, spec in groups.items()}

    async def hit(self, group: str, key: str) -> None:
        """Count one attempt of `key` in `group`; raise RateLimited when it is over any of the limits, or when
        the store cannot count it."""
        for item in self._groups[group]:
            try:
                async with asyncio.timeout(self._timeout):
                    allowed = await self._limiter.hit(item, group, key)
                    if allowed:
                        continue
                    stats = await self._limiter.get_window_stats(item, group, key)
            except Exception as exc:  # the store is down
                if group in self._open_groups:
                    log.warning("rate-limit store unavailable, not limiting %s: %s", group, type(exc).__name__)
                    return
                log.warning("rate-limit store unavailable, refusing %s: %s", group, type(exc).__name__)
                raise RateLimited(STORE_DOWN_RETRY_SECONDS, "This is paused for a moment; retry shortly.") from exc
            raise RateLimited(stats.reset_time - time.time(), "Too many attempts; retry later.")

    async def hit_address(self, group: str, address: str) -> None:
        """`hit` for a client address, counted by `address_key`."""
        await self.hit(group, address_key(address))
