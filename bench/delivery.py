"""Webhook events for the delivery scenario, emitted straight through the service's `Emitter`.

The events are written as a write procedure writes them (the event row, a delivery per subscribed endpoint and
their queue jobs, one transaction per event), but without the HTTP write around them: the write path serves
about 250 writes/s on the bench machine, four times too few to load a worker at its 1,000 events/s target.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Sequence

import msgspec

from rpc.ops import admin as ops
from rpc.outbox.emit import Emitter

KIND = "application.status_changed"
CONNECTIONS = 4  # emitting transactions in flight at once, as concurrent writes would have them


class StatusChanged(msgspec.Struct, frozen=True):
    """The data of an `application.status_changed` event (docs/webhooks.md), for applications that need not exist."""

    application_id: str
    job_id: str
    old_status: str
    new_status: str
    updated_by: str


async def emit_events(url: str, emitter: Emitter, accounts: Sequence[str], count: int, rate: float | None) -> float:
    """Emit `count` events, one transaction each, to `accounts` in turn, as fast as `CONNECTIONS` transactions
    at once allow or started at `rate` a second; the rate they were emitted at."""
    turn = itertools.cycle(accounts)
    numbers = iter(range(count))
    started = time.monotonic()

    async def emitting() -> None:
        async with await ops.connect(url) as conn:
            for number in numbers:
                if rate is not None:
                    await asyncio.sleep(max(0.0, started + number / rate - time.monotonic()))
                data = StatusChanged(str(uuid.uuid4()), str(uuid.uuid4()), "applied", "interview_scheduled", "bench")
                async with conn.transaction():
                    await emitter.emit(conn, KIND, data, [next(turn)])

    await asyncio.gather(*(emitting() for _ in range(CONNECTIONS)))
    return count / max(time.monotonic() - started, 1e-9)
