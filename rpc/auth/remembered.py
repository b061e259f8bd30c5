"""Resolved credentials, and the memory that saves re-verifying them.

A bearer credential resolves to a principal through one indexed lookup (an API key by its hash, a JWT's user,
an OAuth token's grant). Every use of a credential runs that lookup again — revocation and every change to the
principal act on the very next call (docs/decisions.md) — but a credential seen before is remembered with its
lookup, so that a later use skips what does not need the database: parsing, hashing the key's checksum, a JWT's
signature check.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rpc.core.principal import CredentialKind, Principal


@dataclass(frozen=True, slots=True)
class Credential:
    """A credential's principal, the SHA-256 of its token (what it is remembered by), and the lookup that
    resolves it (placeholders named `credential_*`).

    `token_scopes` are the scopes an OAuth access token carries (its grant may hold fewer by now); `fresh_until`
    is how long it may be remembered (a token's expiry; an API key's next last-used stamp).
    """

    principal: Principal
    digest: bytes
    lookup: str
    values: Mapping[str, Any]
    token_scopes: frozenset[str] | None
    fresh_until: float

    def resolve(self, row: Mapping[str, Any]) -> Principal:
        """The principal the lookup's `row` stands for now."""
        return principal_of(self.principal.credential, row, self.token_scopes)


def principal_of(kind: CredentialKind, row: Mapping[str, Any], token_scopes: frozenset[str] | None) -> Principal:
    """The principal of a lookup row: a session carries every scope, an API key its own, an OAuth token what
    both the token and its grant hold."""
    scopes: frozenset[str] | None = None
    if kind == "api_key":
        scopes = frozenset(row["scopes"])
    elif kind == "oauth":
        scopes = frozenset(row["scopes"]) & (token_scopes or frozenset())
    return Principal(
        user_id=str(row["user_id"]),
        account_id=str(row["account_id"]),
        role=row["role"],
        plan=row["plan"],
        credential=kind,
        scopes=scopes,
        client_id=row.get("client_id"),
    )


class RememberedCredentials:
    """Credentials by the SHA-256 of the token, bounded: the least recently used goes first."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: OrderedDict[bytes, Credential] = OrderedDict()

    def get(self, digest: bytes) -> Credential | None:
        entry = self._entries.get(digest)
        if entry is None:
            return None
        if entry.fresh_until <= time.time():
            del self._entries[digest]
            return None
        self._entries.move_to_end(digest)
        return entry

    def put(self, digest: bytes, entry: Credential) -> None:
        self._entries[digest] = entry
        self._entries.move_to_end(digest)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def forget(self, digest: bytes) -> None:
        self._entries.pop(digest, None)
