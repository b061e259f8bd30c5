"""Credentials remembered between requests, and the check that keeps each use of one honest.

Remembering a credential saves its lookup statement (and a JWT's signature check), but a remembered credential
is never trusted on its own: every call that uses one confirms, in the database, that the credential still
resolves to the very same principal (revocation is immediate, CONTRACT.md §12). A read folds that confirmation
into its own statement (`Context.credential_condition`), so the hot read path is one statement and one round
trip; any other call confirms it with a statement of its own.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rpc.auth.principal import Principal
from rpc.types import Connection

# What a principal is made of, as the lookup queries name it; each one that a lookup row holds is compared.
_COMPARED = ("user_id", "account_id", "role", "plan", "scopes")


class StaleCredential(Exception):
    """A remembered credential no longer resolves to the principal it was remembered with."""


@dataclass(frozen=True, slots=True)
class Remembered:
    """A principal, the SQL condition that holds while its credential still resolves to it, and how long the
    memory may be used before the credential is authenticated afresh (a token's expiry; an API key's next
    last-used stamp)."""

    principal: Principal
    condition: str
    values: Mapping[str, Any]
    fresh_until: float


def remembered(
    principal: Principal, lookup: str, lookup_values: Mapping[str, Any], row: Mapping[str, Any], fresh_until: float
) -> Remembered:
    """`principal`, resolved by `lookup` (whose placeholders are all named `credential_*`) into `row`: the
    condition is that the same lookup still finds a row with the same user, account, role, plan and scopes."""
    compared = [column for column in _COMPARED if column in row]
    matches = " AND ".join(f"credential.{column} = %(credential_was_{column})s" for column in compared)
    return Remembered(
        principal=principal,
        condition=f"EXISTS (SELECT FROM ({lookup}) AS credential WHERE {matches})",
        values={**lookup_values, **{f"credential_was_{column}": row[column] for column in compared}},
        fresh_until=fresh_until,
    )


class CredentialCheck:
    """One call's confirmation of a remembered credential: reported by a statement that folded the condition
    in, or else run on its own."""

    def __init__(self, memory: Remembered) -> None:
        self.condition = memory.condition
        self.values = memory.values
        self.confirmed = False

    def report(self, holds: bool) -> None:
        """What a statement carrying the condition found; raises StaleCredential when it did not hold."""
        if not holds:
            raise StaleCredential()
        self.confirmed = True

    async def confirm(self, conn: Connection) -> None:
        """Run the check unless a statement of the call has already confirmed it."""
        if self.confirmed:
            return
        cursor = await conn.execute(f"SELECT {self.condition} AS holds", self.values)
        row = await cursor.fetchone()
        self.report(row is not None and bool(row["holds"]))


class RememberedCredentials:
    """Remembered credentials by the SHA-256 of the token, bounded: the least recently used goes first."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: OrderedDict[bytes, Remembered] = OrderedDict()

    def get(self, digest: bytes) -> Remembered | None:
        entry = self._entries.get(digest)
        if entry is None:
            return None
        if entry.fresh_until <= time.time():
            del self._entries[digest]
            return None
        self._entries.move_to_end(digest)
        return entry

    def put(self, digest: bytes, entry: Remembered) -> None:
        self._entries[digest] = entry
        self._entries.move_to_end(digest)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def forget(self, digest: bytes) -> None:
        self._entries.pop(digest, None)
