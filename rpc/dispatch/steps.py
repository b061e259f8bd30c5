"""What a write that opens several transactions (`calls_out`) has stored so far.

The procedure records it inside the transaction that stored it (`Context.record_progress`): with the call's
Idempotency-Key when it has one, so that it commits with the work; the dispatcher learns it once that transaction
has committed. A failure past that point is told as it is (`PartlyStored`, never "nothing was applied"), and the
key is kept: a retry with it resumes the call from what was recorded (`Context.resumed`) instead of doing it
twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from rpc.core import idempotency
from rpc.core.database_errors import translate
from rpc.core.errors import PartlyStored, RpcError
from rpc.core.registry import Registry
from rpc.core.types import Connection


class Steps:
    """One call's record of what it has stored: `stored` once committed (what an interrupted earlier run stored,
    when this one resumes it)."""

    def __init__(self, claim: idempotency.Claim | None, resumed: Any = None) -> None:
        self.claim = claim
        self.resumed = resumed
        self.stored: Any = resumed
        self._recorded: tuple[Any] | None = None  # in the transaction open now

    def begin(self) -> None:
        """A transaction of the call begins: nothing recorded in it yet."""
        self._recorded = None

    async def record(self, conn: Connection, progress: Any) -> None:
        if self.claim is not None:
            await idempotency.record(conn, self.claim, progress)
        self._recorded = (progress,)

    def committed(self) -> None:
        """The transaction committed: what it recorded is stored."""
        if self._recorded is not None:
            self.stored = self._recorded[0]
            self._recorded = None

    @contextlib.contextmanager
    def telling(self, registry: Registry) -> Iterator[None]:
        """A failure in the block as it is: a `503` (or a database error that is one) once something was stored
        is `PartlyStored`."""
        try:
            yield
        except (RpcError, psycopg.Error, PoolTimeout) as exc:
            error = exc if isinstance(exc, RpcError) else translate(exc, registry)
            if self.stored is None or error is None or error.status != PartlyStored.status:
                raise
            raise PartlyStored(keyed=self.claim is not None) from exc
