"""The rate limits' counters of one process (`RATE_LIMIT_STORAGE=memory://`), as a `limits` storage.

`limits`' own async memory storage starts a task on every increment that walks every key it holds, so each
call costs time in proportion to the number of accounts and addresses seen in the last day (measured: 17 µs
a call at 200 keys, one sixth of a `jobs.list`). These counters do the same fixed-window arithmetic in
constant time per call and drop expired windows in one sweep a minute. Redis stays `limits`' own storage.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from limits.aio.storage import Storage

SWEEP_SECONDS = 60.0


class MemoryCounters(Storage):
    """Fixed-window counters: a count per key until the key's window expires."""

    STORAGE_SCHEME = None  # never chosen by URI: rpc.limits.throttle.open_storage picks it for `memory://`

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self._clock = clock  # epoch seconds; tests pass their own
        self._windows: dict[str, tuple[int, float]] = {}  # key → (count, end of its window in epoch seconds)
        self._next_sweep = clock() + SWEEP_SECONDS

    @property
    def base_exceptions(self) -> type[Exception]:
        return ValueError

    async def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Add `amount` to the key's window; a key without a live window starts one of `expiry` seconds."""
        now = self._clock()
        if now >= self._next_sweep:
            self._sweep(now)
        count, expires_at = self._windows.get(key, (0, 0.0))
        if expires_at <= now:
            count, expires_at = 0, now + expiry
        count += amount
        self._windows[key] = (count, expires_at)
        return count

    async def get(self, key: str) -> int:
        count, expires_at = self._windows.get(key, (0, 0.0))
        return count if expires_at > self._clock() else 0

    async def get_expiry(self, key: str) -> float:
        """When the key's window ends; now, for a key without a live window (as `limits`' storages answer)."""
        now = self._clock()
        _, expires_at = self._windows.get(key, (0, now))
        return expires_at if expires_at > now else now

    async def check(self) -> bool:
        return True

    async def reset(self) -> int | None:
        cleared = len(self._windows)
        self._windows.clear()
        return cleared

    async def clear(self, key: str) -> None:
        self._windows.pop(key, None)

    def _sweep(self, now: float) -> None:
        self._windows = {key: window for key, window in self._windows.items() if window[1] > now}
        self._next_sweep = now + SWEEP_SECONDS
