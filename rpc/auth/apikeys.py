"""API keys: `service_{live|test}_` + 32 random base62 characters + a 6-character checksum, and the keys of
an account as the panel and `bin/admin` manage them (one set of rules for both).

The checksum (CRC-32 of everything before it) lets a mistyped or made-up key be refused before any
database lookup; only the SHA-256 of the whole key is stored.
"""

from __future__ import annotations

import secrets
import string
import uuid
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rpc.core.crypto import token_hash
from rpc.core.types import Connection
from rpc.db.pool import count_for_account, one_row

Mode = Literal["live", "test"]

PREFIX = "service_"
_ALPHABET = string.digits + string.ascii_letters
_BODY_LENGTH = 32
_CHECKSUM_LENGTH = 6
DISPLAY_PREFIX_LENGTH = len("service_live_") + 4


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits.append(_ALPHABET[digit])
    return "".join(reversed(digits))


def _checksum(head: str) -> str:
    return _base62(zlib.crc32(head.encode()), _CHECKSUM_LENGTH)


def generate(mode: Mode) -> str:
    """A new key value; shown once, never stored."""
    head = f"{PREFIX}{mode}_" + "".join(secrets.choice(_ALPHABET) for _ in range(_BODY_LENGTH))
    return head + _checksum(head)


def looks_like_key(token: str) -> bool:
    """Whether a bearer token claims to be an API key (as opposed to a JWT)."""
    return token.startswith(PREFIX)


def parse_mode(token: str) -> Mode | None:
    """The key's mode if it is well-formed with a valid checksum, else None."""
    for mode in ("live", "test"):
        head_prefix = f"{PREFIX}{mode}_"
        if token.startswith(head_prefix):
            body = token[len(head_prefix) :]
            if len(body) != _BODY_LENGTH + _CHECKSUM_LENGTH or any(c not in _ALPHABET for c in body):
                return None
            head, checksum = token[:-_CHECKSUM_LENGTH], token[-_CHECKSUM_LENGTH:]
            return mode if secrets.compare_digest(_checksum(head), checksum) else None
    return None


# --- the keys of an account: one service for the panel and `bin/admin` ------------------------------------------

KEY_ROLES = frozenset({"employer", "admin"})
MAX_ACTIVE_KEYS = 50  # per account (docs/security.md)
MAX_NAME_LENGTH = 100

_COLUMNS = """
k.id::text AS id, k.name, k.mode, k.prefix, k.scopes, k.created_at, k.last_used_at, k.revoked_at,
u.email AS created_by
"""
_LIST = f"""
SELECT {_COLUMNS} FROM api_keys AS k JOIN users AS u ON u.id = k.user_id
WHERE u.account_id = %(account_id)s
ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC, k.id DESC
"""
_ONE = f"""
SELECT {_COLUMNS} FROM api_keys AS k JOIN users AS u ON u.id = k.user_id
WHERE k.id = %(id)s AND u.account_id = %(account_id)s
"""
_ACTIVE = """
SELECT count(*) AS n FROM api_keys AS k JOIN users AS u ON u.id = k.user_id
WHERE u.account_id = %(account_id)s AND k.revoked_at IS NULL
"""
_INSERT = """
INSERT INTO api_keys (user_id, name, mode, prefix, key_hash, scopes)
VALUES (%(user_id)s, %(name)s, %(mode)s, %(prefix)s, %(hash)s, %(scopes)s)
RETURNING id::text AS id
"""
# The account is optional for the operator, who may revoke any key.
_REVOKE = """
UPDATE api_keys AS k SET revoked_at = coalesce(k.revoked_at, now())
FROM users AS u
WHERE k.id = %(id)s AND u.id = k.user_id AND (%(account_id)s::uuid IS NULL OR u.account_id = %(account_id)s)
RETURNING k.id::text AS id, k.revoked_at, u.account_id::text AS account_id
"""


class InvalidKey(ValueError):
    """A key that cannot be created as asked: a message for each field at fault (`form` for the account's cap)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(" ".join(errors.values()))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Owner:
    """The person a new key acts as."""

    user_id: str
    account_id: str
    role: str


async def create_key(
    conn: Connection,
    owner: Owner,
    *,
    name: str,
    scopes: Collection[str],
    mode: str,
    every_scope: Sequence[str],
    production: bool,
) -> tuple[str, str]:
    """A new key of `owner` (its id, and its value: shown once, never stored); InvalidKey when the request
    breaks a rule, or when the account already has `MAX_ACTIVE_KEYS` active keys."""
    name = name.strip()
    errors = {}
    if owner.role not in KEY_ROLES:
        errors["role"] = "API keys are for employers and admins; candidates use sessions or OAuth apps."
    if not 1 <= len(name) <= MAX_NAME_LENGTH or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        errors["name"] = f"Give the key a name of 1 to {MAX_NAME_LENGTH} characters, e.g. where it is used."
    if not scopes or set(scopes) - set(every_scope):
        errors["scopes"] = f"Choose one or more scopes among {', '.join(every_scope)}."
    if mode not in ("live", "test"):
        errors["mode"] = "Choose live or test."
    elif mode == "test" and production:
        errors["mode"] = "This is a production deployment: it refuses test keys. Choose live."
    if errors:
        raise InvalidKey(errors)
    key = generate("live" if mode == "live" else "test")
    async with conn.transaction():
        if await count_for_account(conn, owner.account_id, _ACTIVE) >= MAX_ACTIVE_KEYS:
            message = f"This account has {MAX_ACTIVE_KEYS} active keys, the most it may have: revoke one first."
            raise InvalidKey({"form": message})
        cursor = await conn.execute(
            _INSERT,
            {
                "user_id": owner.user_id,
                "name": name,
                "mode": mode,
                "prefix": key[:DISPLAY_PREFIX_LENGTH],
                "hash": token_hash(key),
                "scopes": [scope for scope in every_scope if scope in set(scopes)],
            },
        )
        key_id = str((await one_row(cursor))["id"])
    return key_id, key


async def list_keys(conn: Connection, account_id: str) -> list[dict[str, Any]]:
    """The account's keys, active first, newest first (never a key's value or hash)."""
    cursor = await conn.execute(_LIST, {"account_id": account_id})
    return await cursor.fetchall()


async def find_key(conn: Connection, account_id: str, key_id: uuid.UUID) -> dict[str, Any] | None:
    cursor = await conn.execute(_ONE, {"id": key_id, "account_id": account_id})
    return await cursor.fetchone()


async def revoke_key(conn: Connection, key_id: uuid.UUID, account_id: str | None) -> dict[str, Any] | None:
    """Revoke a key (of `account_id`, or any for the operator); revoking twice keeps the first time. None when
    there is no such key. Calls made with it are refused from the very next one."""
    cursor = await conn.execute(_REVOKE, {"id": key_id, "account_id": account_id})
    return await cursor.fetchone()
