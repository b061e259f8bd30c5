"""The audit log's chain (docs/privacy.md): any sequence of entries verifies, concurrent writers never fork it,
the database refuses to change or delete an entry, and a byte changed anyway is named by `verify-audit`."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpc.audit import log as audit_log
from rpc.ops import admin as ops
from tests.support import Admin

ACTIONS = sorted(audit_log.ACTIONS)
ACCOUNTS = [str(uuid.uuid4()) for _ in range(3)]


# Every stored column but `id` (the chain's order: see docs/privacy.md), and how to change one byte of it.
def _other_first(value: str, usual: str, instead: str) -> str:
    """SQL: `value` with its first character replaced by one it surely is not (`usual`, or `instead` if it was)."""
    first = f"CASE WHEN left({value}, 1) = '{usual}' THEN '{instead}' ELSE '{usual}' END"
    return f"overlay({value} placing {first} from 1 for 1)"


TAMPER = {
    "at": "at + interval '1 microsecond'",
    "account_id": f"coalesce({_other_first('account_id::text', 'f', 'e')}, %(account)s)::uuid",
    "actor_kind": "CASE actor_kind WHEN 'user' THEN 'operator' ELSE 'user' END",
    "actor_id": _other_first("coalesce(actor_id, 'x')", "~", "^"),
    "action": "action || ' '",
    "target_id": _other_first("coalesce(target_id, 'x')", "~", "^"),
    "client_address": _other_first("coalesce(client_address, 'x')", "~", "^"),
    "user_agent": _other_first("coalesce(user_agent, 'x')", "~", "^"),
    "prev_hash": "set_byte(prev_hash, 0, (get_byte(prev_hash, 0) + 1) %% 256)",
    "hash": "set_byte(hash, 31, (get_byte(hash, 31) + 1) %% 256)",
}

entries = st.lists(
    st.tuples(
        st.sampled_from(ACTIONS),
        st.sampled_from([*ACCOUNTS, None]),
        st.sampled_from(["user", "operator", "oauth_client"]),
        st.one_of(st.none(), st.text(max_size=40)),
        st.one_of(st.none(), st.text(max_size=80)),
    ),
    min_size=1,
    max_size=8,
)


async def _record(conn: Any, batch: list[tuple[Any, ...]]) -> None:
    for action, account, kind, target, agent in batch:
        async with conn.transaction():
            actor = audit_log.OPERATOR if kind == "operator" else audit_log.Actor(kind, str(uuid.uuid4()))
            origin = audit_log.Origin("203.0.113.7", agent)
            await audit_log.record(conn, action, account_id=account, actor=actor, target_id=target, origin=origin)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=entries, column=st.sampled_from(sorted(TAMPER)), pick=st.integers(min_value=0))
def test_any_sequence_verifies_and_any_changed_byte_is_named(
    admin: Admin, batch: list[tuple[Any, ...]], column: str, pick: int
) -> None:
    admin.run(_record, batch)
    assert admin.run(audit_log.verify)["ok"] is True
    ids = [row["id"] for row in admin.sql("SELECT id FROM audit_entries ORDER BY id")]
    victim = ids[pick % len(ids)]
    before = admin.sql("SELECT * FROM audit_entries WHERE id = %(id)s", {"id": victim})[0]
    _as_superuser(admin, f"UPDATE audit_entries SET {column} = {TAMPER[column]} WHERE id = %(id)s", victim)
    try:
        verdict = admin.run(audit_log.verify)
        assert verdict["ok"] is False
        assert verdict["entry"]["id"] == str(victim)
    finally:
        _as_superuser(
            admin, f"UPDATE audit_entries SET {column} = %(old)s WHERE id = %(id)s", victim, old=before[column]
        )
    assert admin.run(audit_log.verify)["ok"] is True


def _as_superuser(admin: Admin, statement: str, entry_id: int, **values: Any) -> None:
    """A change the trigger would refuse, made as a superuser can: with triggers off for the session."""

    async def go(conn: Any) -> None:
        async with conn.transaction():
            await conn.execute("SET LOCAL session_replication_role = replica")
            await conn.execute(statement, {"id": entry_id, "account": ACCOUNTS[0], **values})

    admin.run(go)


def test_the_database_refuses_to_change_or_delete_an_entry(admin: Admin) -> None:
    admin.run(_record, [("plan.changed", ACCOUNTS[0], "operator", None, None)])
    for statement in (
        "UPDATE audit_entries SET action = 'user.deleted'",
        "DELETE FROM audit_entries",
        "TRUNCATE audit_entries",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            admin.sql(statement)
    assert admin.run(audit_log.verify)["ok"] is True


def test_a_missing_newest_entry_is_detected(admin: Admin) -> None:
    admin.run(_record, [("plan.changed", ACCOUNTS[1], "operator", None, None)])
    newest = admin.sql("SELECT max(id) AS id FROM audit_entries")[0]["id"]
    before = admin.sql("SELECT * FROM audit_entries WHERE id = %(id)s", {"id": newest})[0]
    _as_superuser(admin, "DELETE FROM audit_entries WHERE id = %(id)s", newest)
    assert admin.run(audit_log.verify)["ok"] is False
    columns = ", ".join(before)
    placeholders = ", ".join(f"%({name})s" for name in before)
    _as_superuser(admin, f"INSERT INTO audit_entries ({columns}) VALUES ({placeholders})", newest, **before)
    assert admin.run(audit_log.verify)["ok"] is True


def test_concurrent_writers_never_fork_the_chain(admin: Admin) -> None:
    before = admin.run(audit_log.verify)["entries"]

    async def one(_: int) -> None:
        async with await ops.connect(admin.database_url) as conn:
            await _record(conn, [("signin.succeeded", ACCOUNTS[2], "user", None, None)] * 3)

    async def many() -> None:
        await asyncio.gather(*(one(n) for n in range(8)))

    asyncio.run(many())
    verdict = admin.run(audit_log.verify)
    assert verdict == {"entries": before + 24, "ok": True}
    links = admin.sql("SELECT count(DISTINCT prev_hash) AS n, count(*) AS total FROM audit_entries")[0]
    assert links["n"] == links["total"]  # no two entries follow the same one
