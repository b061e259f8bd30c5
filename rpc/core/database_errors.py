"""The database's errors as the API tells them, in one place: a lock conflict is `503 busy`, a lost database
`503 unavailable`, a value it cannot take `422`, and a duplicate key `409` with the message its named constraint
was given (`Registry.on_conflict`). Code that expects a duplicate on one constraint says which (`on_duplicate`),
and any other violation stays the error it is."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import psycopg
from psycopg import errors as pgerrors
from psycopg_pool import PoolTimeout

from rpc.core.errors import Busy, Conflict, InvalidParams, RpcError, Unavailable
from rpc.core.registry import Registry

log = logging.getLogger(__name__)

LOCK_CONFLICTS = (pgerrors.DeadlockDetected, pgerrors.SerializationFailure, pgerrors.LockNotAvailable)


def violated(exc: BaseException) -> str | None:
    """The constraint a duplicate key (or an overlap) broke; None for any other error."""
    if isinstance(exc, pgerrors.UniqueViolation | pgerrors.ExclusionViolation):
        return exc.diag.constraint_name or ""
    return None


@contextlib.contextmanager
def on_duplicate(constraint: str, error: Exception | None) -> Iterator[None]:
    """A duplicate on `constraint` inside the block raises `error` instead (None: the duplicate is expected
    and the block's work is simply not done)."""
    try:
        yield
    except (pgerrors.UniqueViolation, pgerrors.ExclusionViolation) as exc:
        if violated(exc) != constraint:
            raise
        if error is not None:
            raise error from None


def translate(exc: psycopg.Error | PoolTimeout, registry: Registry | None) -> RpcError | None:
    """The API error a driver error stands for, or None when it is a bug (an internal error)."""
    if isinstance(exc, LOCK_CONFLICTS):
        log.warning("database busy, the call was not applied: %s", type(exc).__name__)
        return Busy()
    if isinstance(exc, PoolTimeout | psycopg.OperationalError):
        log.warning("database unavailable: %s", type(exc).__name__)
        return Unavailable()
    constraint = violated(exc)
    if constraint is not None:  # the constraint chooses the message; its name, a detail of our schema, is not shown
        return Conflict(registry.conflict_message(constraint) if registry else None)
    if isinstance(exc, psycopg.DataError):  # SQLSTATE class 22: a value the database cannot take
        return InvalidParams([{"field": "", "message": "A value is not acceptable (out of range or malformed)."}])
    return None
