"""OAuth 2.0 clients: third-party applications, their redirect URIs and the scopes they may ask for.

A confidential client authenticates with a secret (`hsec_` + 43 random characters; only its SHA-256 is
kept, the value is shown once); a public client has none and proves itself with PKCE alone. Redirect URIs
are compared as exact strings (RFC 9700 section 4.1.3), with the single exception RFC 8252 section 7.3 demands: for an
`http` loopback-IP redirect URI (a native app's), any port matches.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rpc.core.crypto import random_token, same, token_hash
from rpc.core.types import Connection
from rpc.db.pool import count_for_account, one_row

CLIENT_ID_PREFIX = "app_"
SECRET_PREFIX = "hsec_"  # noqa: S105 - the prefix of generated secrets
MAX_REDIRECT_URIS = 20
MAX_CLIENTS = 20  # per account (docs/security.md)
MAX_REDIRECT_URI_LENGTH = 2000
_FORBIDDEN_SCHEMES = frozenset({"javascript", "data", "vbscript", "file", "about", "blob", "filesystem"})

_COLUMNS = """id, account_id, name, secret_hash, redirect_uris, scopes, created_at"""
_INSERT = f"""
INSERT INTO oauth_clients (id, account_id, created_by, name, secret_hash, redirect_uris, scopes)
VALUES (%(id)s, %(account_id)s, %(created_by)s, %(name)s, %(secret_hash)s, %(redirect_uris)s, %(scopes)s)
RETURNING {_COLUMNS}
"""
_BY_ID = f"SELECT {_COLUMNS} FROM oauth_clients WHERE id = %(id)s"
_COUNT = "SELECT count(*) AS n FROM oauth_clients WHERE account_id = %(account_id)s"
_BY_ACCOUNT = f"SELECT {_COLUMNS} FROM oauth_clients WHERE account_id = %(account_id)s ORDER BY created_at, id"
_SET_REDIRECT_URIS = f"""
UPDATE oauth_clients SET redirect_uris = %(redirect_uris)s, updated_at = now()
WHERE id = %(id)s AND account_id = %(account_id)s
RETURNING {_COLUMNS}
"""
_DELETE = "DELETE FROM oauth_clients WHERE id = %(id)s AND account_id = %(account_id)s RETURNING id"
_UPDATE = f"""
UPDATE oauth_clients SET name = %(name)s, scopes = %(scopes)s, updated_at = now()
WHERE id = %(id)s AND account_id = %(account_id)s
RETURNING {_COLUMNS}
"""
# Narrowing a client's scopes narrows what every person granted it, so that its access tokens lose the scopes at
# their next request (each use looks its grant up). A grant left with no scope at all ends.
_NARROW_GRANTS = """
UPDATE oauth_grants
SET scopes = ARRAY(SELECT s FROM unnest(scopes) AS s WHERE s = ANY(%(scopes)s)),
    revoked_at = CASE WHEN scopes && %(scopes)s THEN revoked_at ELSE coalesce(revoked_at, now()) END
WHERE client_id = %(id)s AND NOT scopes <@ %(scopes)s
"""
_REKEY_CLIENT = """
UPDATE oauth_clients SET secret_hash = %(secret_hash)s, updated_at = now()
WHERE id = %(id)s AND account_id = %(account_id)s AND secret_hash IS NOT NULL
RETURNING id
"""


class InvalidClientSpec(ValueError):
    """A client that cannot be registered as described; `field` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Client:
    """A registered application (never its secret)."""

    id: str
    account_id: str
    name: str
    confidential: bool
    redirect_uris: tuple[str, ...]
    scopes: tuple[str, ...]
    created_at: dt.datetime
    secret_hash: bytes | None = None

    def secret_matches(self, secret: str) -> bool:
        """Constant-time check of a presented secret; a public client has none to match."""
        if self.secret_hash is None:
            return False
        return same(token_hash(secret), self.secret_hash)

    def accepts_redirect(self, redirect_uri: str) -> bool:
        return redirect_matches(self.redirect_uris, redirect_uri)


def _client(row: Mapping[str, Any]) -> Client:
    return Client(
        id=row["id"],
        account_id=str(row["account_id"]),
        name=row["name"],
        confidential=row["secret_hash"] is not None,
        redirect_uris=tuple(row["redirect_uris"]),
        scopes=tuple(row["scopes"]),
        created_at=row["created_at"],
        secret_hash=bytes(row["secret_hash"]) if row["secret_hash"] is not None else None,
    )


def _loopback_ip(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_redirect_uri(uri: str, *, production: bool) -> str:
    """A redirect URI fit for registration (RFC 6749 section 3.1.2, RFC 8252 section 7, RFC 9700 section 2.1), or
    InvalidClientSpec.

    Absolute, no fragment, no user info; `https`, or `http` on a loopback IP (native apps), or a private-use
    scheme in reverse-domain form (`com.example.app:/callback`). Outside production, plain `http` to any host
    is allowed too, for development.
    """
    if not uri or len(uri) > MAX_REDIRECT_URI_LENGTH or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in uri):
        raise InvalidClientSpec("redirect_uris", f"not a usable redirect URI: {uri!r}")
    try:
        parts = urllib.parse.urlsplit(uri)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError as exc:
        raise InvalidClientSpec("redirect_uris", f"not a URI: {uri!r}") from exc
    scheme = parts.scheme.lower()
    if not scheme or scheme in _FORBIDDEN_SCHEMES:
        raise InvalidClientSpec("redirect_uris", f"a redirect URI needs a usable scheme: {uri!r}")
    if parts.fragment or "#" in uri:
        raise InvalidClientSpec("redirect_uris", f"a redirect URI may not have a fragment: {uri!r}")
    if scheme in ("http", "https"):
        if not parts.hostname or parts.username is not None or parts.password is not None:
            raise InvalidClientSpec("redirect_uris", f"a redirect URI needs a host and no user info: {uri!r}")
        if scheme == "http" and production and not _loopback_ip(parts.hostname):
            raise InvalidClientSpec("redirect_uris", f"use https (http only for 127.0.0.1 or [::1]): {uri!r}")
    elif "." not in scheme:
        raise InvalidClientSpec("redirect_uris", f"a private-use scheme must be a reverse domain name: {uri!r}")
    return uri


def redirect_matches(registered: Iterable[str], requested: str) -> bool:
    """Exact string comparison; for `http` on a loopback IP, any port (RFC 8252 section 7.3)."""
    registered = tuple(registered)
    if requested in registered:
        return True
    loose = _without_loopback_port(requested)
    return loose is not None and any(_without_loopback_port(uri) == loose for uri in registered)


def _without_loopback_port(uri: str) -> str | None:
    try:
        parts = urllib.parse.urlsplit(uri)
        parts.port  # noqa: B018
    except ValueError:
        return None
    if parts.scheme != "http" or not _loopback_ip(parts.hostname):
        return None
    host = parts.netloc.rsplit(":", 1)[0] if parts.port is not None else parts.netloc
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def _check_name(name: str) -> str:
    name = name.strip()
    if not 1 <= len(name) <= 100 or any(ord(c) < 0x20 for c in name):
        raise InvalidClientSpec("name", "a name takes 1 to 100 printable characters")
    return name


def _check_redirect_uris(uris: Sequence[str], production: bool) -> list[str]:
    if not 1 <= len(uris) <= MAX_REDIRECT_URIS:
        raise InvalidClientSpec("redirect_uris", f"register 1 to {MAX_REDIRECT_URIS} redirect URIs")
    return list(dict.fromkeys(check_redirect_uri(uri, production=production) for uri in uris))


def _check_scopes(scopes: Sequence[str], every_scope: Sequence[str]) -> list[str]:
    """The chosen scopes in the vocabulary's order; one at least, each a known one."""
    if not scopes or set(scopes) - set(every_scope):
        raise InvalidClientSpec("scopes", f"choose scopes among {', '.join(every_scope)}")
    return [scope for scope in every_scope if scope in set(scopes)]


async def create_client(
    conn: Connection,
    *,
    account_id: str,
    created_by: str | None,
    name: str,
    redirect_uris: Sequence[str],
    confidential: bool,
    scopes: Sequence[str] | None,
    every_scope: Sequence[str],
    production: bool,
) -> tuple[Client, str | None]:
    """Register a client; returns it and its secret (None for a public client), which is shown once. An account
    has at most `MAX_CLIENTS`."""
    chosen = list(every_scope) if scopes is None else _check_scopes(scopes, every_scope)
    values = {
        "id": CLIENT_ID_PREFIX + secrets.token_hex(12),
        "account_id": account_id,
        "created_by": created_by,
        "name": _check_name(name),
        "redirect_uris": _check_redirect_uris(redirect_uris, production),
        "scopes": chosen,
    }
    secret = SECRET_PREFIX + random_token() if confidential else None
    async with conn.transaction():
        if await count_for_account(conn, account_id, _COUNT) >= MAX_CLIENTS:
            raise InvalidClientSpec(
                "form", f"this account has {MAX_CLIENTS} applications, the most it may have: delete one first"
            )
        cursor = await conn.execute(_INSERT, {**values, "secret_hash": token_hash(secret) if secret else None})
        row = await one_row(cursor)
    return _client(row), secret


async def find_client(conn: Connection, client_id: str) -> Client | None:
    """The client of that id, or None (also for ids that could never exist)."""
    if not client_id or len(client_id) > 64:
        return None
    cursor = await conn.execute(_BY_ID, {"id": client_id})
    row = await cursor.fetchone()
    return _client(row) if row else None


async def list_clients(conn: Connection, account_id: str) -> list[Client]:
    """An account's clients, oldest first."""
    cursor = await conn.execute(_BY_ACCOUNT, {"account_id": account_id})
    return [_client(row) for row in await cursor.fetchall()]


async def set_redirect_uris(
    conn: Connection, account_id: str, client_id: str, redirect_uris: Sequence[str], *, production: bool
) -> Client | None:
    """Replace a client's redirect URIs; None when the account has no such client."""
    uris = _check_redirect_uris(redirect_uris, production)
    cursor = await conn.execute(_SET_REDIRECT_URIS, {"id": client_id, "account_id": account_id, "redirect_uris": uris})
    row = await cursor.fetchone()
    return _client(row) if row else None


async def delete_client(conn: Connection, account_id: str, client_id: str) -> bool:
    """Delete a client of the account, and with it every grant, code and token it holds."""
    cursor = await conn.execute(_DELETE, {"id": client_id, "account_id": account_id})
    return await cursor.fetchone() is not None


async def update_client(
    conn: Connection, account_id: str, client_id: str, *, name: str, scopes: Sequence[str], every_scope: Sequence[str]
) -> Client | None:
    """Rename a client and change the scopes it may ask for; None when the account has no such client.

    Narrowing takes effect at once: every grant loses the scopes taken away (a grant left with none ends), so
    access tokens already issued lose them at their next request and refreshes cannot bring them back. Widening
    changes no grant: a person consented to what was asked then, and the new scopes need a new authorization.
    """
    values: dict[str, Any] = {"id": client_id, "account_id": account_id, "name": _check_name(name)}
    values["scopes"] = _check_scopes(scopes, every_scope)
    async with conn.transaction():
        cursor = await conn.execute(_UPDATE, values)
        row = await cursor.fetchone()
        if row is None:
            return None
        await conn.execute(_NARROW_GRANTS, values)
    return _client(row)


async def rotate_secret(conn: Connection, account_id: str, client_id: str) -> str | None:
    """A new secret for a confidential client of the account, shown once; the old one stops working at once
    (a leaked secret must). Grants and tokens stay: nobody has to authorize the application again. None when
    the account has no such confidential client."""
    secret = SECRET_PREFIX + random_token()
    values = {"id": client_id, "account_id": account_id, "secret_hash": token_hash(secret)}
    cursor = await conn.execute(_REKEY_CLIENT, values)
    return secret if await cursor.fetchone() is not None else None
