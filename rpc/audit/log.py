"""The audit log (docs/privacy.md): who did what to which object of which account, from where.

`record` is the only writer: it appends one entry inside the caller's transaction, so the entry commits (or
rolls back) with the action it records. Each entry holds the SHA-256 of the entry before it and its own hash
over a canonical form of every stored field; writers take the chain's head row FOR UPDATE, so concurrent
writers queue there and the chain never forks. `verify` walks the chain from its anchor (the hash the oldest
kept entry follows: retention moves it forward) and names the first entry whose bytes do not match.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from starlette.requests import HTTPConnection

from rpc.core.principal import Principal
from rpc.core.types import Connection
from rpc.db.pool import one_row

ActorKind = Literal["user", "operator", "oauth_client"]
ACTIONS = frozenset(
    {
        "api_key.created",
        "api_key.revoked",
        "webhook.created",
        "webhook.updated",
        "webhook.deleted",
        "webhook.disabled",
        "webhook.enabled",
        "webhook.secret_revealed",
        "webhook.secret_rotated",
        "oauth_client.created",
        "oauth_client.deleted",
        "oauth_grant.approved",
        "oauth_grant.revoked",
        "member.invited",
        "member.joined",
        "member.removed",
        "plan.changed",
        "signin.succeeded",
        "signin.failed",
        "password.reset",
        "password.changed",
        "sessions.revoked",
        "profile.exported",
        "file.downloaded",
        "user.deleted",
    }
)
_TEXT_LIMIT = 512  # addresses, user agents and target ids may come from the network: bounded, never with NUL


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acted: a user (by id), an operator at `bin/admin` (no id), or a third-party application (its client id)."""

    kind: ActorKind
    id: str | None

    @classmethod
    def of(cls, principal: Principal) -> Actor:
        """The actor behind a request's credential: an OAuth token acts as its application."""
        if principal.credential == "oauth" and principal.client_id is not None:
            return cls("oauth_client", principal.client_id)
        return cls("user", principal.user_id)


OPERATOR = Actor("operator", None)


def automated(name: str) -> Actor:
    """A part of the service acting on its own — a payment provider's notification, a periodic job. The log knows
    three kinds of actor (docs/privacy.md) and no person is behind these, so they are `operator`s; a person at
    `bin/admin` has no id, an automated actor is named by `name` (`paytr`, `subscription-expiry`), so the log can
    tell them apart."""
    return Actor("operator", name)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a request came from, as recorded: the client's address and its User-Agent."""

    client_address: str | None = None
    user_agent: str | None = None

    @classmethod
    def of(cls, request: HTTPConnection) -> Origin:
        return cls(request.client.host if request.client else None, request.headers.get("user-agent"))


NO_ORIGIN = Origin()  # no request behind the action: an operator at the console, a periodic job


class Entry(msgspec.Struct, frozen=True, kw_only=True):
    """One stored entry: every field the hash covers."""

    id: int
    at: dt.datetime
    account_id: str | None
    actor_kind: str
    actor_id: str | None
    action: str
    target_id: str | None
    client_address: str | None
    user_agent: str | None
    prev_hash: bytes
    hash: bytes


def canonical(entry: Entry) -> bytes:
    """The bytes an entry's hash covers: its fields (but the hash) as compact JSON with sorted keys, the time in
    UTC to the microsecond and the previous hash in hex."""
    fields: dict[str, Any] = msgspec.structs.asdict(entry)
    del fields["hash"]
    fields["at"] = entry.at.astimezone(dt.UTC).isoformat(timespec="microseconds")
    fields["prev_hash"] = entry.prev_hash.hex()
    return msgspec.json.encode(dict(sorted(fields.items())))


def _clean(text: str | None) -> str | None:
    return text.replace("\x00", "")[:_TEXT_LIMIT] if text else None


_HEAD = "SELECT head_hash, nextval('audit_entries_id_seq') AS id FROM audit_chain FOR UPDATE"
_APPEND = """
WITH entry AS (
    INSERT INTO audit_entries (id, at, account_id, actor_kind, actor_id, action, target_id, client_address,
                               user_agent, prev_hash, hash)
    VALUES (%(id)s, %(at)s, %(account_id)s, %(actor_kind)s, %(actor_id)s, %(action)s, %(target_id)s,
            %(client_address)s, %(user_agent)s, %(prev_hash)s, %(hash)s)
)
UPDATE audit_chain SET head_hash = %(hash)s
"""


async def record(
    conn: Connection,
    action: str,
    *,
    account_id: str | None,
    actor: Actor,
    target_id: str | None = None,
    origin: Origin = NO_ORIGIN,
) -> None:
    """Append one entry to the log, in `conn`'s current transaction (the action's own)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    head = await one_row(await conn.execute(_HEAD))
    entry = Entry(
        id=head["id"],
        at=dt.datetime.now(dt.UTC),
        account_id=account_id,
        actor_kind=actor.kind,
        actor_id=actor.id,
        action=action,
        target_id=_clean(target_id),
        client_address=_clean(origin.client_address),
        user_agent=_clean(origin.user_agent),
        prev_hash=bytes(head["head_hash"]),
        hash=b"",
    )
    digest = hashlib.sha256(canonical(entry)).digest()
    await conn.execute(_APPEND, {**msgspec.structs.asdict(entry), "hash": digest})


_ENDS = "SELECT anchor_hash, head_hash FROM audit_chain"
_WALK = """
SELECT id, at, account_id::text AS account_id, actor_kind, actor_id, action, target_id, client_address,
       user_agent, prev_hash, hash
FROM audit_entries WHERE id > %(after)s ORDER BY id LIMIT %(limit)s
"""
_PAGE = 1_000


async def verify(conn: Connection) -> dict[str, Any]:
    """Walk the whole chain in pages from the anchor: `{"entries", "ok": true}`, or `"ok": false` with the first
    entry that does not match (its id and what is wrong)."""
    ends = await one_row(await conn.execute(_ENDS))
    expected = bytes(ends["anchor_hash"])
    count, after = 0, 0
    while True:
        cursor = await conn.execute(_WALK, {"after": after, "limit": _PAGE})
        rows = await cursor.fetchall()
        for row in rows:
            entry = Entry(**{**row, "prev_hash": bytes(row["prev_hash"]), "hash": bytes(row["hash"])})
            if entry.prev_hash != expected:
                return _broken(count, entry, "does not follow the entry before it")
            if hashlib.sha256(canonical(entry)).digest() != entry.hash:
                return _broken(count, entry, "its stored fields do not match its hash")
            expected, count, after = entry.hash, count + 1, entry.id
        if len(rows) < _PAGE:
            break
    if expected != bytes(ends["head_hash"]):
        return {"entries": count, "ok": False, "entry": {"id": None, "reason": "the newest entries are missing"}}
    return {"entries": count, "ok": True}


def _broken(count: int, entry: Entry, reason: str) -> dict[str, Any]:
    return {"entries": count, "ok": False, "entry": {"id": str(entry.id), "action": entry.action, "reason": reason}}
