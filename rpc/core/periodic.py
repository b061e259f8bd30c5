"""Periodic work the delivery workers run (clean-ups, retention, subscription expiry and the like), as the
framework and the business describe it; `rpc.services.periodic_work` lists it all, `rpc.worker` runs it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import msgspec

from rpc.core.types import Connection


class EventSink(Protocol):
    """What periodic work announces its changes through (`rpc.outbox.emit.Emitter`), in its own transaction."""

    async def emit(self, conn: Connection, kind: str, data: msgspec.Struct, account_ids: Iterable[str]) -> object: ...


@dataclass(frozen=True, slots=True)
class Periodic:
    """Work run every `cron` (with an optional 6th field for seconds) by one of the workers, in one
    transaction, with an emitter for its events."""

    cron: str
    run: Callable[[Connection, EventSink], Awaitable[None]]
