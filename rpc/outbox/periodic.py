"""Periodic business work the delivery workers run (subscription expiry and the like)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rpc.core.types import Connection
from rpc.outbox.emit import Emitter


@dataclass(frozen=True, slots=True)
class Periodic:
    """Work run every `cron` (with an optional 6th field for seconds) by one of the workers, in one
    transaction, with an emitter for its events."""

    cron: str
    run: Callable[[Connection, Emitter], Awaitable[None]]
