"""What a procedure receives besides its params."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import httpx
import msgspec

from rpc.auth.principal import Principal
from rpc.events import Emitter
from rpc.settings import Settings
from rpc.types import Connection


@dataclass(frozen=True, slots=True)
class Context:
    """The caller and their address, a connection (inside the call's transaction for writes), the request's
    id, and the shared HTTP client for the few procedures that call out (the payment provider)."""

    principal: Principal
    conn: Connection
    request_id: str
    client_address: str
    settings: Settings
    emitter: Emitter
    http: httpx.AsyncClient

    async def emit(self, kind: str, data: msgspec.Struct, account_ids: Iterable[str]) -> None:
        """Announce a change to `account_ids`; committed (or rolled back) with the change itself."""
        await self.emitter.emit(self.conn, kind, data, account_ids)
