"""The in-process rate-limit counters: the same fixed-window answers as `limits`' own memory storage, in
constant time per call, with windows that really expire."""

from __future__ import annotations

import asyncio
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from limits import RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import FixedWindowRateLimiter

from rpc.limits.counters import MemoryCounters
from rpc.limits.throttle import open_storage

KEYS = st.sampled_from(["a", "b", "c"])
CALLS = st.lists(st.tuples(st.sampled_from(["incr", "get"]), KEYS, st.integers(-1, 3)), max_size=40)


def test_memory_uris_get_these_counters() -> None:
    assert isinstance(open_storage("memory://"), MemoryCounters)
    assert isinstance(open_storage("async+memory://"), MemoryCounters)


@settings(max_examples=60, deadline=None)
@given(CALLS)
def test_counts_match_the_limits_memory_storage(calls: list[tuple[str, str, int]]) -> None:
    async def both() -> None:
        ours, theirs = MemoryCounters(), MemoryStorage()
        for operation, key, amount in calls:
            if operation == "incr":
                assert await ours.incr(key, 60, amount) == await theirs.incr(key, 60, amount)
            else:
                assert await ours.get(key) == await theirs.get(key)

    asyncio.run(both())


class Clock:
    """Epoch seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_window_expires_and_the_next_call_starts_a_new_one() -> None:
    async def scenario() -> None:
        clock = Clock()
        counters = MemoryCounters(clock)
        assert await counters.incr("k", 1) == 1
        assert await counters.incr("k", 1) == 2
        first_end = await counters.get_expiry("k")
        assert first_end == clock.now + 1
        clock.now += 1.0
        assert await counters.get("k") == 0
        assert await counters.incr("k", 1) == 1
        assert await counters.get_expiry("k") == first_end + 1

    asyncio.run(scenario())


def test_expired_windows_are_swept_away_once_a_minute() -> None:
    async def scenario() -> None:
        clock = Clock()
        counters = MemoryCounters(clock)
        for key in ("a", "b", "c"):
            await counters.incr(key, 1)
        clock.now += 30
        await counters.incr("d", 60)
        assert counters._windows.keys() == {"a", "b", "c", "d"}, "no sweep before the minute is up"
        clock.now += 30
        await counters.incr("e", 60)
        assert counters._windows.keys() == {"d", "e"}

    asyncio.run(scenario())


def test_the_fixed_window_strategy_of_limits_runs_on_them() -> None:
    async def scenario() -> None:
        limiter, item = FixedWindowRateLimiter(MemoryCounters()), RateLimitItemPerMinute(2)
        assert [await limiter.hit(item, "x") for _ in range(3)] == [True, True, False]
        stats = await limiter.get_window_stats(item, "x")
        assert stats.remaining == 0 and time.time() < stats.reset_time <= time.time() + 60
        assert await limiter.hit(item, "y")

    asyncio.run(scenario())
