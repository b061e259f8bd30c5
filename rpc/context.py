"""What a procedure receives besides its params."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from rpc.auth.principal import Principal
from rpc.auth.remembered import CredentialCheck
from rpc.events import Emitter
from rpc.settings import Settings
from rpc.types import Connection


@dataclass(frozen=True, slots=True)
class Context:
    """The caller and their address, a connection (inside the call's transaction for writes), the request's
    id, and the shared HTTP client for the few procedures that call out (the payment provider).

    `credential` is set when a read runs for a remembered credential that is not confirmed yet: the read may
    fold its condition into a statement (`credential_condition`, then `credential_found`); if none does, the
    dispatcher confirms it after the read, before anything is answered. So reads must have no side effects.
    """

    principal: Principal
    conn: Connection
    request_id: str
    client_address: str
    settings: Settings
    emitter: Emitter
    http: httpx.AsyncClient
    credential: CredentialCheck | None = None

    async def emit(self, kind: str, data: msgspec.Struct, account_ids: Iterable[str]) -> None:
        """Announce a change to `account_ids`; committed (or rolled back) with the change itself."""
        await self.emitter.emit(self.conn, kind, data, account_ids)

    def credential_condition(self) -> tuple[str, Mapping[str, Any]]:
        """SQL that holds while the caller's credential stands, and its values, to AND into a statement of the
        call: its confirmation then costs no statement of its own. Placeholders are named `credential_*`."""
        if self.credential is None:
            return "true", {}
        return self.credential.condition, self.credential.values

    def credential_found(self, found: bool) -> None:
        """Report whether a statement carrying `credential_condition` found its row, from a statement that
        always finds one while the credential stands. Raises StaleCredential when it found none."""
        if self.credential is not None:
            self.credential.report(found)
