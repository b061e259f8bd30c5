"""Idempotent writes (docs/security.md): a write sent again with the same `Idempotency-Key` answers what the first
answered, and does nothing else.

A key belongs to the account — and, for a procedure about one person (`profile.*`), to the calling person too,
so that two members' keys never meet there — and is kept 24 hours, with the procedure, the calling person (an
erased person's keys go with them) and a fingerprint of the parameters (the SHA-256 of the body as canonical
JSON: keys sorted, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same call).
The first call claims the key's row inside its own transaction and stores its answer there too, so that a crash
can never leave a write without its key or a key without its write. A transaction-scoped advisory lock on the key
keeps a concurrent call with the same key from waiting on that row: it is told at once that the key is in use
(`409`). A procedure that calls another service (`calls_out`) opens its own transactions, so its claim is
committed first with a short lease: a call that dies while it waits leaves the key free again once the lease
runs out. Such a call records with its key what it has stored so far (`record`, in the transaction that stored
it): one that fails after storing something keeps its key, and a retry with the key resumes it from there
(`Interrupted`) rather than doing it twice.

Kept: any success, and the procedure's own refusals (`403`, `404`, `409`), whose work is rolled back to a
savepoint while the key keeps the answer. Not kept — the key stays free — is everything refused before the
procedure ran, any other error, and every `5xx`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass
from typing import Any

import msgspec
from psycopg.types.json import Jsonb
from starlette.requests import Request

from rpc.core.errors import Conflict, InvalidParams, RpcError
from rpc.core.periodic import EventSink, Periodic
from rpc.core.types import Connection

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
KEPT_FOR = dt.timedelta(hours=24)
CALLS_OUT_LEASE = dt.timedelta(minutes=2)  # longer than any wait on another service (PAYTR_TIMEOUT ≤ 60 s)
KEPT_REFUSALS = frozenset({403, 404, 409})
PURGE_BATCH = 1000
_PRINTABLE = re.compile(r"^[\x20-\x7e]{1,255}$")
PERSONAL = "profile."  # the procedures about the calling person alone: their keys are the person's

_LOCK = "SELECT pg_try_advisory_xact_lock(%(lock)s) AS locked"
_FIND = """
SELECT procedure, fingerprint, status, body, progress, coalesce(lease_until > now(), false) AS running
FROM idempotency_keys
WHERE account_id = %(account_id)s AND scope = %(scope)s AND key = %(key)s AND expires_at > now()
"""
# Takes the place of an expired row, or of a claim whose call died (its lease ran out): a live one was found first.
_CLAIM = """
INSERT INTO idempotency_keys (account_id, scope, key, user_id, procedure, fingerprint, expires_at, lease_until)
VALUES (%(account_id)s, %(scope)s, %(key)s, %(user_id)s, %(procedure)s, %(fingerprint)s, now() + %(kept_for)s,
        %(lease_until)s)
ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO UPDATE
SET procedure = EXCLUDED.procedure, fingerprint = EXCLUDED.fingerprint, status = NULL, body = NULL,
    created_at = now(), expires_at = EXCLUDED.expires_at, lease_until = EXCLUDED.lease_until,
    user_id = EXCLUDED.user_id, progress = NULL
"""
_RESUME = """
UPDATE idempotency_keys SET lease_until = %(lease_until)s
WHERE account_id = %(account_id)s AND scope = %(scope)s AND key = %(key)s
"""
_RECORD = """
UPDATE idempotency_keys SET progress = %(progress)s
WHERE account_id = %(account_id)s AND scope = %(scope)s AND key = %(key)s AND status IS NULL
"""
_KEEP = """
UPDATE idempotency_keys SET status = %(status)s, body = %(body)s, lease_until = NULL
WHERE account_id = %(account_id)s AND scope = %(scope)s AND key = %(key)s
"""
# A call that ended without an answer to keep: its key is free again, or, when it had stored something, left for
# a retry to resume at once.
_RELEASE = """
DELETE FROM idempotency_keys
WHERE account_id = %(account_id)s AND scope = %(scope)s AND key = %(key)s AND status IS NULL AND progress IS NULL
"""
_INTERRUPT = """
UPDATE idempotency_keys SET lease_until = now()
WHERE account_id = %(account_id)s AND scope = %(scope)s AND key = %(key)s AND status IS NULL
  AND progress IS NOT NULL
"""
_PURGE = """
DELETE FROM idempotency_keys
WHERE (account_id, scope, key) IN (
    SELECT account_id, scope, key FROM idempotency_keys WHERE expires_at < now() LIMIT %(batch)s
)
"""


class KeyInUse(Conflict):
    """The first call with this key is still running."""

    code = "idempotency_key_in_use"
    default_message = "A call with this Idempotency-Key is still running; retry when it has answered."

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "1"}


class KeyReused(RpcError):
    """The key was used for another procedure or other parameters."""

    status = 422
    code = "idempotency_key_reused"
    default_message = (
        "This Idempotency-Key was used with another procedure or other parameters; use a new key for a new call."
    )


@dataclass(frozen=True, slots=True)
class Kept:
    """The answer a key keeps."""

    status: int
    body: bytes


@dataclass(frozen=True, slots=True)
class Interrupted:
    """An earlier run of this very call stored part of its work and failed: this one resumes from `progress`."""

    progress: Any


@dataclass(frozen=True, slots=True)
class Claim:
    """One call's key: the account it belongs to (and the person, for a procedure about them: `scope`), the key,
    who calls, and what the call is (procedure and parameters)."""

    account_id: str
    scope: str
    key: str
    user_id: str
    procedure: str
    fingerprint: bytes

    @property
    def values(self) -> dict[str, object]:
        return {"account_id": self.account_id, "scope": self.scope, "key": self.key}


def key_of(request: Request) -> str | None:
    """The request's `Idempotency-Key`, if it sent one: 1–255 printable ASCII characters, else `422`."""
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not _PRINTABLE.match(key):
        raise InvalidParams([{"field": HEADER, "message": "Use 1 to 255 printable ASCII characters."}])
    return key


def claim_for(account_id: str, user_id: str, key: str, procedure: str, body: bytes | None) -> Claim:
    """The key of `user_id`'s call, in their account's keys or (`profile.*`) their own."""
    canonical = msgspec.json.encode(msgspec.json.decode(body or b"{}"), order="sorted")
    scope = user_id if procedure.startswith(PERSONAL) else ""
    return Claim(account_id, scope, key, user_id, procedure, hashlib.sha256(canonical).digest())


async def claim(conn: Connection, call: Claim, *, lease: dt.timedelta | None = None) -> Kept | Interrupted | None:
    """Inside the call's transaction: None when this call is the key's first (it runs, and `keep`s its answer in
    this transaction); the kept answer when it was answered already; `Interrupted` when an earlier run of it
    stored part of its work and failed (it resumes, under a new lease); `409` while it runs, `422` if the key
    was used for another call."""
    locked_name = f"{call.account_id}\x00{call.scope}\x00{call.key}".encode()
    lock = int.from_bytes(hashlib.sha256(locked_name).digest()[:8], signed=True)
    cursor = await conn.execute(_LOCK, {"lock": lock})
    locked = await cursor.fetchone()
    if not (locked and locked["locked"]):
        raise KeyInUse()
    cursor = await conn.execute(_FIND, call.values)
    row = await cursor.fetchone()
    lease_until = dt.datetime.now(dt.UTC) + lease if lease else None
    if row is not None and (row["status"] is not None or row["running"] or row["progress"] is not None):
        if row["procedure"] != call.procedure or bytes(row["fingerprint"]) != call.fingerprint:
            raise KeyReused()
        if row["status"] is not None:
            return Kept(row["status"], bytes(row["body"]))
        if row["running"]:
            raise KeyInUse()
        await conn.execute(_RESUME, {**call.values, "lease_until": lease_until})
        return Interrupted(row["progress"])
    await conn.execute(
        _CLAIM,
        {
            **call.values,
            "user_id": call.user_id,
            "procedure": call.procedure,
            "fingerprint": call.fingerprint,
            "kept_for": KEPT_FOR,
            "lease_until": lease_until,
        },
    )
    return None


async def record(conn: Connection, call: Claim, progress: Any) -> None:
    """Inside a transaction of the call: `progress` (JSON; None when nothing is stored, as after undoing it) is
    what it has stored, committed with what it stored."""
    await conn.execute(_RECORD, {**call.values, "progress": None if progress is None else Jsonb(progress)})


async def keep(conn: Connection, call: Claim, status: int, body: bytes) -> None:
    await conn.execute(_KEEP, {**call.values, "status": status, "body": body})


async def release(conn: Connection, call: Claim) -> None:
    """A claimed key whose call ended without an answer to keep: free again when nothing of the call was stored;
    else its lease ends now, so that a retry resumes the call at once."""
    await conn.execute(_RELEASE, call.values)
    await conn.execute(_INTERRUPT, call.values)


async def _purge(conn: Connection, emitter: EventSink) -> None:
    """Keys past their 24 hours, in batches (each its own short statement)."""
    while (await conn.execute(_PURGE, {"batch": PURGE_BATCH})).rowcount == PURGE_BATCH:
        pass


PERIODIC = Periodic(cron="7,37 * * * *", run=_purge)  # twice an hour, on the delivery workers
