"""Duplicate keys, read once: which named constraint a violation broke. The dispatcher's translation answers
`409` with the message the constraint was given (`Registry.on_conflict`); code that expects a duplicate on one
constraint says which (`on_duplicate`), and any other violation stays the error it is."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from psycopg import errors as pgerrors


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
