"""What a payment provider is to the framework: it checks and applies one notification."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from rpc.audit import log as audit_log
from rpc.core.types import Connection
from rpc.outbox.emit import Emitter
from rpc.settings import Settings


@dataclass(frozen=True, slots=True)
class Verdict:
    """The provider's answer (status and plain-text body) and the word recorded for audit."""

    status: int
    body: str
    outcome: str


class Provider(Protocol):
    """Checks a notification's signature and applies it, inside the transaction it is given. `signed_fields`
    are the fields its signature covers (kept, cut short, even of a notification that does not verify)."""

    @property
    def signed_fields(self) -> tuple[str, ...]: ...

    async def receive(
        self,
        conn: Connection,
        emitter: Emitter,
        settings: Settings,
        fields: Mapping[str, str],
        origin: audit_log.Origin,
    ) -> Verdict: ...
