"""The delivery policy, apart from the machinery that applies it: after an attempt, whether the delivery
succeeded, failed for good or waits for its next attempt (WEBHOOK_RETRY_WAITS); and how often a worker looks
for due jobs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Literal

Status = Literal["succeeded", "failed", "pending"]


def next_step(
    status_code: int | None, number: int, waits: Sequence[float], ended: dt.datetime
) -> tuple[Status, dt.datetime | None]:
    """After attempt `number` (from 1) ended at `ended` with `status_code` (None: no answer): `succeeded` on a
    200; `failed` after the last of `len(waits)` attempts; else `pending`, with the next attempt one wait of
    `waits` after this one's end."""
    if status_code == 200:
        return "succeeded", None
    if number >= len(waits):
        return "failed", None
    return "pending", ended + dt.timedelta(seconds=waits[number])


def polling_interval(waits: Sequence[float]) -> float:
    """How often a worker looks for due jobs: a retry is deferred with a future `schedule_at`, and the
    queue's notification comes when it is inserted, not when it falls due; only a poll finds it then.
    It polls every tenth of the shortest wait (between 50 ms and 1 s), so a retry is at most that late."""
    positive = [wait for wait in waits if wait > 0]
    return max(0.05, min(1.0, min(positive) / 10)) if positive else 1.0
