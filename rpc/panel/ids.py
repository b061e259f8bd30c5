"""Ids in panel addresses: a malformed one is a 404, like an unknown one (never a 500 from the database)."""

from __future__ import annotations

import uuid

from rpc.core.errors import NotFound


def uuid_or_404(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise NotFound() from exc
