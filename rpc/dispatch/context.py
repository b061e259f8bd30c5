"""What a procedure receives besides its params."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from rpc.audit import log as audit_log
from rpc.core.memory import Memory, Slot, T
from rpc.core.principal import Principal
from rpc.core.types import Connection
from rpc.dispatch.steps import Steps
from rpc.files.service import Files
from rpc.mail.outbox import Mail
from rpc.outbox.emit import Emitter, UnknownEventKind
from rpc.settings import Settings

TransactionOpener = Callable[[], AbstractAsyncContextManager[Connection]]


@dataclass(frozen=True, slots=True)
class Context:
    """The caller and their address, the request's id, the call's connection (inside the call's transaction for
    writes), and the shared HTTP client for the few procedures that call another service.

    A procedure registered with `calls_out=True` (it waits on another service) gets no connection: it opens
    short transactions of its own with `transaction()`, so that nothing is held while it waits.
    """

    principal: Principal
    request_id: str
    client_address: str
    user_agent: str
    settings: Settings
    emitter: Emitter
    http: httpx.AsyncClient
    connection: Connection | None
    transactions: TransactionOpener
    memory: Memory  # what procedures keep between calls in this app (`kept`)
    emits: frozenset[str] = frozenset()  # the event kinds the procedure declared
    probes: Mapping[str, str] = field(default_factory=dict)  # the probes it declared, name → scalar query
    probed: Mapping[str, Any] = field(default_factory=dict)  # their values, when the credential's statement read them
    # This process's search indexes by corpus name (`rpc.search.index.SearchIndex`; typed loosely, as the ground
    # floor imports no room above it).
    indexes: Mapping[str, Any] = field(default_factory=dict)
    files: Files | None = None  # the file store and the download links
    mail: Mail | None = None  # mail queued in this call's transaction (a replayed write sends none again)
    steps: Steps | None = None  # what a `calls_out` call has stored so far (`record_progress`)

    @property
    def conn(self) -> Connection:
        if self.connection is None:
            raise RuntimeError("a procedure that calls out opens its own transactions: use ctx.transaction()")
        return self.connection

    async def probe(self, name: str) -> Any:
        """A declared probe's value: read with the caller's credential in one statement when it could be, else
        now. A hint of freshness taken as the call began: what is cached must be keyed by the value read
        together with the data it caches, not by this one."""
        if name in self.probed:
            return self.probed[name]
        cursor = await self.conn.execute(f"SELECT ({self.probes[name]}) AS value")
        row = await cursor.fetchone()
        return row["value"] if row else None

    def kept(self, slot: Slot[T]) -> T:
        """This app's value of `slot` (made at its first use): state kept between calls, never shared with
        another app in the process."""
        return self.memory.get(slot)

    def transaction(self) -> AbstractAsyncContextManager[Connection]:
        """A connection of its own in a transaction of its own, the caller's credential confirmed inside it."""
        return self.transactions()

    async def record_progress(self, conn: Connection, progress: Any) -> None:
        """Inside one of this call's transactions: what the call has stored so far (JSON; None when nothing is, as
        once undone), committed with the transaction. A `calls_out` call that fails past it answers that part was
        stored, and a retry with the same Idempotency-Key resumes it (`resumed`). Elsewhere, nothing."""
        if self.steps is not None:
            await self.steps.record(conn, progress)

    @property
    def resumed(self) -> Any:
        """What an earlier run of this very call (its Idempotency-Key, procedure and parameters) recorded before it
        failed: the call resumes from there. None for a call's first run."""
        return self.steps.resumed if self.steps is not None else None

    async def emit(self, kind: str, data: msgspec.Struct, account_ids: Iterable[str]) -> None:
        """Announce a change to `account_ids`; committed (or rolled back) with the change itself. Only a kind
        the procedure declared (`@procedure(emits=...)`)."""
        if kind not in self.emits:
            raise UnknownEventKind(f"the procedure did not declare that it emits {kind!r}")
        await self.emitter.emit(self.conn, kind, data, account_ids)

    @property
    def actor(self) -> audit_log.Actor:
        """The caller, as the audit log records who acted."""
        return audit_log.Actor.of(self.principal)

    @property
    def origin(self) -> audit_log.Origin:
        """The caller's address and User-Agent, as the audit log records them."""
        return audit_log.Origin(self.client_address, self.user_agent)

    async def audit(self, action: str, target_id: str | None = None, *, account_id: str | None = None) -> None:
        """Record `action` in the audit log, in this call's transaction, as done by the caller from their address
        (in the caller's account unless `account_id` names the one it concerns)."""
        await audit_log.record(
            self.conn,
            action,
            account_id=account_id or self.principal.account_id,
            actor=self.actor,
            target_id=target_id,
            origin=self.origin,
        )
