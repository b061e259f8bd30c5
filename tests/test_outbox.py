"""The transactional outbox (docs/decisions.md, docs/webhooks.md): every job change and its event commit together, and a
refused or rolled-back change leaves no event."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import msgspec
import psycopg
import pytest
from psycopg.rows import dict_row

from rpc.outbox.emit import Emitter
from rpc.settings import Settings
from tests.support import TIMESTAMP, Admin, Call, User, emitter_for, ok

ENVELOPE_KEYS = {"event", "data", "timestamp", "idempotency_key"}


class Probe(msgspec.Struct, frozen=True, kw_only=True):
    marker: str


def events_of(admin: Admin, job_id: str) -> list[dict[str, Any]]:
    """The event rows about one job, oldest first, with their body decoded."""
    rows = admin.sql(
        """SELECT id::text AS id, kind, account_ids::text[] AS account_ids, body, created_at FROM events
           WHERE convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'job_id' = %(job_id)s
           ORDER BY created_at, kind""",
        {"job_id": job_id},
    )
    for row in rows:
        row["envelope"] = json.loads(bytes(row["body"]))
    return rows


def all_event_count(admin: Admin) -> int:
    return int(admin.sql("SELECT count(*) AS n FROM events")[0]["n"])


@pytest.fixture
def draft(call: Call, employer: User) -> dict[str, Any]:
    job: dict[str, Any] = ok(
        call("jobs.create", employer, title=f"Outbox {uuid.uuid4().hex[:8]}", company="Acme", location="X")
    )
    return job


def test_create_emits_nothing(call: Call, admin: Admin, employer: User) -> None:
    before = all_event_count(admin)
    job = ok(call("jobs.create", employer, title="Quiet", company="Acme", location="X"))
    assert events_of(admin, job["id"]) == []
    assert all_event_count(admin) == before


def test_publish_writes_one_job_published_event(
    call: Call, admin: Admin, employer: User, draft: dict[str, Any]
) -> None:
    job = ok(call("jobs.publish", employer, id=draft["id"]))
    [row] = events_of(admin, job["id"])
    assert row["kind"] == "job.published"
    assert row["account_ids"] == [employer.account_id]
    envelope = row["envelope"]
    assert set(envelope) == ENVELOPE_KEYS
    assert envelope["event"] == "job.published"
    assert envelope["data"] == {"job_id": job["id"], "title": job["title"], "status": "published"}
    assert envelope["idempotency_key"] == row["id"]
    assert TIMESTAMP.match(envelope["timestamp"])
    assert envelope["timestamp"] == row["created_at"].strftime("%Y-%m-%dT%H:%M:%SZ")


def test_close_writes_job_closed(call: Call, admin: Admin, employer: User, draft: dict[str, Any]) -> None:
    ok(call("jobs.publish", employer, id=draft["id"]))
    ok(call("jobs.close", employer, id=draft["id"]))
    kinds = sorted(row["kind"] for row in events_of(admin, draft["id"]))
    assert kinds == ["job.closed", "job.published"]
    [closed] = [row for row in events_of(admin, draft["id"]) if row["kind"] == "job.closed"]
    assert closed["envelope"]["data"] == {"job_id": draft["id"], "title": draft["title"], "status": "closed"}
    assert closed["account_ids"] == [employer.account_id]


def test_update_emits_job_updated_with_the_new_title(
    call: Call, admin: Admin, employer: User, draft: dict[str, Any]
) -> None:
    ok(call("jobs.update", employer, id=draft["id"], title="Renamed"))
    [row] = events_of(admin, draft["id"])
    assert row["kind"] == "job.updated" and row["account_ids"] == [employer.account_id]
    assert set(row["envelope"]) == ENVELOPE_KEYS
    assert row["envelope"]["data"] == {"job_id": draft["id"], "title": "Renamed", "status": "draft"}


def test_empty_update_emits_nothing(call: Call, admin: Admin, employer: User, draft: dict[str, Any]) -> None:
    ok(call("jobs.update", employer, id=draft["id"]))
    assert events_of(admin, draft["id"]) == []


def test_event_belongs_to_the_owner_account_whoever_acts(
    call: Call, admin: Admin, employer: User, draft: dict[str, Any]
) -> None:
    operator = admin.user("admin")
    ok(call("jobs.publish", operator, id=draft["id"]))
    [row] = events_of(admin, draft["id"])
    assert row["account_ids"] == [employer.account_id]


def test_every_event_has_its_own_idempotency_key(
    call: Call, admin: Admin, employer: User, draft: dict[str, Any]
) -> None:
    for title in ("one", "two", "three"):
        ok(call("jobs.update", employer, id=draft["id"], title=title))
    rows = events_of(admin, draft["id"])
    keys = [row["envelope"]["idempotency_key"] for row in rows]
    assert len(rows) == 3 and len(set(keys)) == 3
    assert sorted(row["envelope"]["data"]["title"] for row in rows) == ["one", "three", "two"]


def test_refused_transition_writes_no_event(call: Call, admin: Admin, employer: User, draft: dict[str, Any]) -> None:
    before = all_event_count(admin)
    assert call("jobs.close", employer, id=draft["id"]).status_code == 409
    assert all_event_count(admin) == before
    ok(call("jobs.publish", employer, id=draft["id"]))
    assert call("jobs.publish", employer, id=draft["id"]).status_code == 409
    assert [row["kind"] for row in events_of(admin, draft["id"])] == ["job.published"]


def test_refused_callers_write_no_event(
    call: Call, admin: Admin, employer: User, candidate: User, draft: dict[str, Any]
) -> None:
    stranger = admin.user("employer")
    before = all_event_count(admin)
    assert call("jobs.publish", stranger, id=draft["id"]).status_code == 404
    assert call("jobs.update", stranger, id=draft["id"], title="x").status_code == 404
    assert call("jobs.publish", candidate, id=draft["id"]).status_code == 403
    assert call("jobs.update", employer, id=draft["id"], title="").status_code == 422
    assert all_event_count(admin) == before


def test_change_and_event_are_one_transaction(call: Call, admin: Admin, employer: User, draft: dict[str, Any]) -> None:
    """The event row commits with the change: same transaction id on both rows."""
    ok(call("jobs.publish", employer, id=draft["id"]))
    [job] = admin.sql("SELECT xmin::text AS x FROM jobs WHERE id = %(id)s::uuid", {"id": draft["id"]})
    [event] = admin.sql(
        "SELECT xmin::text AS x FROM events WHERE convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'job_id' = %(id)s",
        {"id": draft["id"]},
    )
    assert job["x"] == event["x"]


# --- emit itself ------------------------------------------------------------------------------------------


class ChangeFailed(Exception):
    """The change after the event failed, so its transaction rolls back."""


@pytest.fixture(scope="module")
def emitter(settings: Settings) -> Emitter:
    return emitter_for(settings)


@pytest.fixture(scope="module")
def subscribed(admin: Admin, employer: User) -> str:
    """An account with an endpoint subscribed to job.updated: an event to it has a delivery and a queue job."""
    admin.webhook(employer, "http://127.0.0.1:9/hook", ["job.updated"])
    return employer.account_id


async def _emit_then(emitter: Emitter, database: str, account: str, marker: str, *, fail: bool) -> None:
    connecting = psycopg.AsyncConnection.connect(database, row_factory=dict_row, autocommit=True)
    async with await connecting as conn, conn.transaction():
        await emitter.emit(conn, "job.updated", Probe(marker=marker), [account])
        if fail:
            raise ChangeFailed()


def marked(admin: Admin, marker: str) -> list[dict[str, Any]]:
    """The events carrying `marker`, each with its deliveries and how many of them have a queue job.

    Deliveries with a job, not jobs: the module's live server delivers too, and its first failed attempt
    (nothing listens on port 9) may already have queued the retry as a second job."""
    return admin.sql(
        """
        SELECT e.id,
               (SELECT count(*) FROM webhook_deliveries AS d WHERE d.event_id = e.id) AS deliveries,
               (SELECT count(DISTINCT d.id) FROM webhook_deliveries AS d JOIN procrastinate_jobs AS j
                    ON j.args ->> 'delivery_id' = d.id::text WHERE d.event_id = e.id) AS queued
        FROM events AS e
        WHERE convert_from(e.body, 'UTF8')::jsonb -> 'data' ->> 'marker' = %(m)s
        """,
        {"m": marker},
    )


def test_emit_inside_a_committed_transaction_writes_event_delivery_and_job(
    emitter: Emitter, database: str, admin: Admin, subscribed: str
) -> None:
    marker = uuid.uuid4().hex
    asyncio.run(_emit_then(emitter, database, subscribed, marker, fail=False))
    [event] = marked(admin, marker)
    assert (event["deliveries"], event["queued"]) == (1, 1)


def test_emit_in_a_rolled_back_transaction_leaves_nothing(
    emitter: Emitter, database: str, admin: Admin, subscribed: str
) -> None:
    marker = uuid.uuid4().hex
    with pytest.raises(ChangeFailed):
        asyncio.run(_emit_then(emitter, database, subscribed, marker, fail=True))
    assert marked(admin, marker) == []
    orphans = admin.sql(
        """SELECT count(*) AS n FROM procrastinate_jobs AS j
           WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries AS d WHERE d.id::text = j.args ->> 'delivery_id')
             AND j.task_name = 'hire.deliver_webhook'"""
    )
    assert orphans == [{"n": 0}], "no queue job may outlive its rolled-back delivery"


def test_emit_outside_a_transaction_is_refused(emitter: Emitter, database: str, admin: Admin, subscribed: str) -> None:
    marker = uuid.uuid4().hex

    async def go() -> None:
        async with await psycopg.AsyncConnection.connect(database, row_factory=dict_row, autocommit=True) as conn:
            await emitter.emit(conn, "job.updated", Probe(marker=marker), [subscribed])

    with pytest.raises(RuntimeError, match="inside the transaction"):
        asyncio.run(go())
    assert marked(admin, marker) == []
