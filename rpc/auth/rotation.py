"""Refresh-token rotation with reuse detection, written once for the built-in provider's sign-ins and for OAuth
grants: a refresh token is good for one use; presenting it again means it was copied, so everything its family
(a sign-in, an authorization) issued is revoked, and that revocation is committed before the refusal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rpc.core.crypto import token_hash
from rpc.core.types import Connection

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Rotation:
    """One kind of refresh token, as SQL: `lock` finds and locks a token by `%(hash)s` among live credentials,
    with the columns `id`, `expired`, `used`, `revoked` and its family's column; `mark_used` takes `%(id)s`;
    `revoke_family` takes `%(family)s`."""

    lock: str
    mark_used: str
    revoke_family: str
    family: str  # the column of `lock` naming the token's family


async def rotate(
    conn: Connection,
    rotation: Rotation,
    token: str,
    *,
    belongs: Callable[[dict[str, Any]], bool],
    invalid: Exception,
    reused: Exception,
    issue: Callable[[dict[str, Any]], Awaitable[T]],
) -> T:
    """What `issue` gives for the token's row, the token marked used in the same transaction; `invalid` if it is
    unknown, expired, revoked or not `belongs`; `reused` (its family revoked first) if it was used before."""
    async with conn.transaction():
        cursor = await conn.execute(rotation.lock, {"hash": token_hash(token)})
        row = await cursor.fetchone()
        if row is None or row["revoked"] or row["expired"] or not belongs(row):
            raise invalid
        if not row["used"]:
            await conn.execute(rotation.mark_used, {"id": row["id"]})
            return await issue(row)
        await conn.execute(rotation.revoke_family, {"family": row[rotation.family]})
    # Outside the transaction, so that the family's revocation is committed before the refusal.
    raise reused
