"""Webhook delivery end to end (docs/webhooks.md, docs/decisions.md; docs/architecture.md): events made through the
API reach a
real receiver on a loopback port — a customer's, which checks the signature — through the live server's
in-process worker, with the retry waits and the timeout shrunk. Real time, bounded polling waits, no mocks."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec
import pytest

from rpc.core.errors import NotFound
from rpc.outbox.deliverer import USER_AGENT
from tests.conftest import Databases
from tests.receiver import Hook, Received, Receiver, Reply
from tests.support import (
    TEST_SECRET_KEY,
    TIMESTAMP,
    Admin,
    Call,
    LiveServer,
    User,
    emitter_for,
    eventually,
    ok,
    refused,
    settings_for,
)

T = TypeVar("T")

WAITS = (0.0, 0.3, 0.6, 0.9, 1.2)
TIMEOUT = 1.0
JITTER = 0.05  # clock and scheduling slack on a lower bound
ENVELOPE_KEYS = {"event", "data", "timestamp", "idempotency_key"}
SECRET = re.compile(r"^whsec_[A-Za-z0-9+/]{43}=$")  # standard base64 of 32 bytes, padded (docs/webhooks.md)
HEX_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """This module's server: five attempts 0.3 s to 1.2 s apart, and a 1 s timeout per attempt."""
    return settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
        WEBHOOK_RETRY_WAITS=",".join(f"{wait:g}" for wait in WAITS),
        WEBHOOK_TIMEOUT=f"{TIMEOUT:g}",
    )


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(scope="module")
def api(receiver: Receiver, live: LiveServer) -> Iterator[Call]:
    """`api(name, user, **params)`: POST a procedure as the user (the receiver outlives the server)."""
    with live.client() as http:

        def call(name: str, who: User, **params: Any) -> httpx.Response:
            return http.post(f"/v1/{name}", json=params, headers=who.auth)

        yield call


@dataclass(frozen=True)
class Endpoint:
    id: str
    secret: str
    hook: Hook
    user: User


Make = Callable[..., Endpoint]


@pytest.fixture(scope="module")
def endpoint(receiver: Receiver, admin: Admin, api: Call) -> Make:
    """`endpoint(user, kinds, *replies, default=...)`: a hook on the receiver, configured as the user's
    account's webhook endpoint; the customer knows its secret (a request it cannot verify is answered 401)."""

    def make(user: User, kinds: list[str], *replies: Reply, default: Reply | None = None) -> Endpoint:
        hook = receiver.hook(*replies, default=default)
        created = admin.webhook(user, hook.url, kinds)
        assert set(created) == {"id", "secret"} and SECRET.match(created["secret"])
        hook.know(created["secret"])
        return Endpoint(created["id"], created["secret"], hook, user)

    return make


# --- helpers ------------------------------------------------------------------------------------------------


def draft(api: Call, user: User, title: str | None = None) -> dict[str, Any]:
    job: dict[str, Any] = ok(
        api("jobs.create", user, title=title or f"Job {uuid.uuid4().hex[:8]}", company="Acme", location="Remote")
    )
    return job


def published(api: Call, user: User) -> dict[str, Any]:
    job: dict[str, Any] = ok(api("jobs.publish", user, id=draft(api, user)["id"]))
    return job


def in_transaction(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """The Webhooks method run in a transaction: what it defers on the queue commits with it."""

    async def run(conn: Any, *args: Any, **kwargs: Any) -> T:
        async with conn.transaction():
            return await method(conn, *args, **kwargs)

    return run


def deliveries(admin: Admin, *endpoint_ids: str) -> list[dict[str, Any]]:
    """The deliveries to the endpoints, oldest first, with their event's kind and rendered body."""
    rows = admin.sql(
        """SELECT d.id::text AS id, d.event_id::text AS event_id, d.endpoint_id::text AS endpoint_id, d.status,
                  d.attempts, d.last_status_code, d.last_error, d.next_attempt_at, d.created_at, e.kind, e.body
           FROM webhook_deliveries AS d JOIN events AS e ON e.id = d.event_id
           WHERE d.endpoint_id = ANY(%(ids)s::uuid[]) ORDER BY d.created_at, d.id""",
        {"ids": list(endpoint_ids)},
    )
    for row in rows:
        row["body"] = bytes(row["body"])
    return rows


def attempts(admin: Admin, delivery_id: str) -> list[dict[str, Any]]:
    return admin.sql(
        """SELECT number, started_at, duration_ms, status_code, error, response_excerpt FROM webhook_attempts
           WHERE delivery_id = %(id)s ORDER BY number""",
        {"id": delivery_id},
    )


_LEFT = """
SELECT count(*) FILTER (WHERE d.status = 'pending') AS pending,
       (SELECT count(*) FROM procrastinate_jobs AS j
        WHERE j.status IN ('todo', 'doing')
          AND j.args ->> 'delivery_id' IN (SELECT id::text FROM webhook_deliveries
                                          WHERE endpoint_id = ANY(%(ids)s::uuid[]))) AS queued
FROM webhook_deliveries AS d WHERE d.endpoint_id = ANY(%(ids)s::uuid[])
"""


def settle(admin: Admin, *endpoint_ids: str, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The endpoints' deliveries once none is pending and no queue job of theirs is left to run."""

    def left() -> dict[str, Any]:
        [row] = admin.sql(_LEFT, {"ids": list(endpoint_ids)})
        return row

    # The receiver records each request before it answers: once settled here, every attempt is recorded there.
    eventually(lambda: left() == {"pending": 0, "queued": 0}, lambda: f"deliveries settled: {left()}", timeout)
    return deliveries(admin, *endpoint_ids)


def delivered(hook: Hook, delivery_id: str, count: int = 1, timeout: float = 20.0) -> list[Received]:
    """The first `count` requests of one delivery (by `X-Service-Delivery`), once they are recorded."""

    def found() -> list[Received]:
        return [r for r in hook.received() if r.delivery == delivery_id]

    eventually(
        lambda: len(found()) >= count, lambda: f"{len(found())} of {count} requests of delivery {delivery_id}", timeout
    )
    return sorted(found(), key=lambda r: r.arrived)[:count]


def gaps(requests: list[Received]) -> list[float]:
    """Seconds from each answer to the next request: the wait as the receiver sees it."""
    return [later.arrived - earlier.answered for earlier, later in itertools.pairwise(requests)]


def attempt_gaps(rows: list[dict[str, Any]]) -> list[float]:
    """Seconds from the end of each recorded attempt to the start of the next: the wait as the worker saw it."""
    return [
        (later["started_at"] - earlier["started_at"]).total_seconds() - earlier["duration_ms"] / 1000
        for earlier, later in itertools.pairwise(rows)
    ]


# --- the request ---------------------------------------------------------------------------------------------


def test_envelope_headers_and_signature(api: Call, admin: Admin, endpoint: Make) -> None:
    user = admin.user("employer")
    ep = endpoint(user, ["job.published", "job.updated"])
    second = endpoint(user, ["job.published"])
    job = draft(api, user)
    ok(api("jobs.update", user, id=job["id"], title="Renamed"))
    ok(api("jobs.publish", user, id=job["id"]))

    rows = settle(admin, ep.id, second.id)
    assert [(row["endpoint_id"], row["status"], row["attempts"]) for row in rows if row["endpoint_id"] == ep.id] == [
        (ep.id, "succeeded", 1),
        (ep.id, "succeeded", 1),
    ]
    received = {r.delivery: r for r in ep.hook.wait_for(2)}
    assert len(ep.hook.received()) == 2
    assert set(received) == {row["id"] for row in rows if row["endpoint_id"] == ep.id}
    for row in rows:
        request = received[row["id"]] if row["endpoint_id"] == ep.id else second.hook.wait_for(1)[0]
        secret = ep.secret if row["endpoint_id"] == ep.id else second.secret
        assert request.body == row["body"], "the bytes rendered once at emit are the bytes sent"
        envelope = request.envelope
        assert set(envelope) == ENVELOPE_KEYS
        assert envelope["event"] == row["kind"] == request.headers["x-service-event"]
        assert envelope["idempotency_key"] == row["event_id"]
        assert TIMESTAMP.match(envelope["timestamp"])
        status = "published" if row["kind"] == "job.published" else "draft"
        assert envelope["data"] == {"job_id": job["id"], "title": "Renamed", "status": status}
        assert request.headers["x-service-delivery"] == row["id"]
        assert request.headers["content-type"] == "application/json"
        assert request.headers["user-agent"] == USER_AGENT
        assert HEX_SIGNATURE.match(request.headers["x-service-signature"])
        assert request.valid and request.signed_with(secret) and request.status == 200
        assert "x-service-signature-next" not in request.headers
        for name, value in request.headers.items():
            assert secret not in value and secret.removeprefix("whsec_") not in value, name

    mine = [received[row["id"]].envelope for row in rows if row["endpoint_id"] == ep.id]
    assert sorted(envelope["event"] for envelope in mine) == ["job.published", "job.updated"]
    assert len({envelope["idempotency_key"] for envelope in mine}) == 2, "one idempotency_key per event"
    [theirs] = second.hook.received()
    [same_event] = [envelope for envelope in mine if envelope["event"] == "job.published"]
    assert theirs.envelope == same_event, "one event: the same body and key at every endpoint"
    assert theirs.delivery not in received, "a delivery per endpoint"
    assert theirs.signed_with(second.secret) and not theirs.signed_with(ep.secret)


# --- attempts and retries --------------------------------------------------------------------------------------


def test_500_500_200_is_three_attempts_spaced_by_the_waits(api: Call, admin: Admin, endpoint: Make) -> None:
    long_answer = ("0123456789abcdef" * 200).encode()  # 3,200 bytes: only the first KiB is kept
    user = admin.user("employer")
    ep = endpoint(
        user,
        ["job.published"],
        Reply(500, long_answer),
        Reply(500, b"still down"),
        default=Reply(200, b"thanks"),
    )
    published(api, user)

    [delivery] = settle(admin, ep.id)
    assert delivery["status"] == "succeeded" and delivery["attempts"] == 3
    assert delivery["last_status_code"] == 200 and delivery["last_error"] is None
    assert delivery["next_attempt_at"] is None
    requests = ep.hook.wait_for(3)
    assert len(ep.hook.received()) == 3, "nothing after the 200"
    assert [r.status for r in requests] == [500, 500, 200]
    assert {r.body for r in requests} == {delivery["body"]}, "every attempt sends byte-identical bodies"
    assert {r.delivery for r in requests} == {delivery["id"]}
    assert len({r.headers["x-service-signature"] for r in requests}) == 1
    seen = gaps(requests)
    for gap, wait in zip(seen, WAITS[1:], strict=False):
        assert gap >= wait - JITTER, (seen, WAITS)
    assert sum(seen) < sum(WAITS[1:3]) + 2.0, f"retries are due on time, not at the next poll: {seen}"

    rows = attempts(admin, delivery["id"])
    assert [row["number"] for row in rows] == [1, 2, 3]
    assert [row["status_code"] for row in rows] == [500, 500, 200]
    assert [row["error"] for row in rows] == [None, None, None]
    assert all(isinstance(row["duration_ms"], int) and 0 <= row["duration_ms"] < 1000 for row in rows)
    assert [row["response_excerpt"] for row in rows] == [long_answer[:1024].decode(), "still down", "thanks"]
    for gap, wait in zip(attempt_gaps(rows), WAITS[1:], strict=False):
        assert gap >= wait - JITTER, "the wait counts from the end of the failed attempt"
    print(f"\nattempt spacing (receiver): {[round(g, 3) for g in seen]} for waits {list(WAITS[1:3])}")


@dataclass(frozen=True)
class Failures:
    endpoint: Endpoint
    before: list[dict[str, Any]]  # failed deliveries created before `since`
    after: list[dict[str, Any]]  # and at or after it
    since: dt.datetime
    job_id: str


@pytest.fixture(scope="module")
def failed(api: Call, admin: Admin, endpoint: Make) -> Failures:
    """Four deliveries to a receiver that answers 201 to everything: all end `failed`, concurrently."""
    user = admin.user("employer")
    ep = endpoint(user, ["job.published", "job.updated"], default=Reply(201, b"created"))
    job = draft(api, user, title="first")
    ok(api("jobs.update", user, id=job["id"], title="second"))
    ok(api("jobs.update", user, id=job["id"], title="third"))
    since = admin.sql("SELECT now() AS t")[0]["t"]
    ok(api("jobs.update", user, id=job["id"], title="fourth"))
    ok(api("jobs.publish", user, id=job["id"]))
    rows = settle(admin, ep.id, timeout=30)
    assert [row["status"] for row in rows] == ["failed"] * 4, rows
    before = [row for row in rows if row["created_at"] < since]
    after = [row for row in rows if row["created_at"] >= since]
    assert (len(before), len(after)) == (2, 2)
    return Failures(ep, before, after, since, job["id"])


def test_201_is_a_failure_and_five_failures_end_the_delivery(failed: Failures, admin: Admin) -> None:
    hook = failed.endpoint.hook
    delivery = failed.before[0]
    assert delivery["status"] == "failed" and delivery["attempts"] == len(WAITS)
    assert delivery["last_status_code"] == 201 and delivery["next_attempt_at"] is None
    rows = attempts(admin, delivery["id"])
    assert [row["number"] for row in rows] == [1, 2, 3, 4, 5]
    assert [row["status_code"] for row in rows] == [201] * 5
    assert [row["response_excerpt"] for row in rows] == ["created"] * 5
    requests = delivered(hook, delivery["id"], count=5)
    assert {r.body for r in requests} == {delivery["body"]}
    seen = gaps(requests)
    for gap, wait in zip(seen, WAITS[1:], strict=True):
        assert gap >= wait - JITTER, (seen, WAITS)
    assert sum(seen) < sum(WAITS) + 3.0, f"retries are due on time, not at the next poll: {seen}"
    print(f"\nattempt spacing (receiver): {[round(g, 3) for g in seen]} for waits {list(WAITS[1:])}")

    # No sixth attempt can come: the delivery is final and no job of it is left in the queue.
    [row] = admin.sql(
        "SELECT count(*) AS n FROM procrastinate_jobs WHERE args ->> 'delivery_id' = %(id)s AND status = 'todo'",
        {"id": delivery["id"]},
    )
    assert row["n"] == 0
    assert [r.delivery for r in hook.received()].count(delivery["id"]) == 5
    assert len(hook.received()) == 5 * 4, "each of the four deliveries: exactly five attempts"


def test_a_hanging_receiver_times_out_and_is_retried(api: Call, admin: Admin, endpoint: Make) -> None:
    user = admin.user("employer")
    ep = endpoint(user, ["job.published"], Reply(hang=True), default=Reply(200))
    published(api, user)
    [delivery] = settle(admin, ep.id)
    assert delivery["status"] == "succeeded" and delivery["attempts"] == 2
    first, second = attempts(admin, delivery["id"])
    assert first["status_code"] is None and first["error"] == f"timed out after {TIMEOUT:g} s"
    assert first["response_excerpt"] is None
    assert TIMEOUT * 1000 - 50 <= first["duration_ms"] < TIMEOUT * 1000 + 1000, first
    assert second["status_code"] == 200 and second["error"] is None
    hung, answered = ep.hook.wait_for(2)
    assert hung.status is None and answered.status == 200 and hung.body == answered.body
    assert answered.arrived - hung.arrived >= TIMEOUT + WAITS[1] - JITTER


def test_a_slow_answer_within_the_timeout_is_waited_for(
    databases: Databases, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """WEBHOOK_TIMEOUT is the attempt's whole deadline: no shorter default of the HTTP client cuts it."""
    database = databases.copy()
    slow = settings_for(
        database, DATA_DIR=str(tmp_path_factory.mktemp("slow")), WEBHOOK_TIMEOUT="7", WEBHOOK_RETRY_WAITS="0,0.3"
    )
    admin = Admin(database, slow)
    user = admin.user("employer")
    hook = receiver.hook(default=Reply(200, delay=5.5))
    created = admin.webhook(user, hook.url, ["job.published"])
    hook.know(created["secret"])
    with LiveServer(slow) as server, server.client() as http:
        job = ok(http.post("/v1/jobs.create", json={"title": "t", "company": "c", "location": "l"}, headers=user.auth))
        ok(http.post("/v1/jobs.publish", json={"id": job["id"]}, headers=user.auth))
        [request] = hook.wait_for(1, timeout=15)
        [delivery] = settle(admin, created["id"], timeout=15)
    assert request.status == 200
    assert delivery["status"] == "succeeded" and delivery["attempts"] == 1
    [attempt] = attempts(admin, delivery["id"])
    assert attempt["status_code"] == 200 and attempt["error"] is None and attempt["duration_ms"] >= 5500


# --- routing ----------------------------------------------------------------------------------------------------


def test_only_subscribed_kinds_arrive(api: Call, admin: Admin, endpoint: Make) -> None:
    user = admin.user("employer")
    candidate = admin.user("candidate")
    closed = endpoint(user, ["job.closed"])
    applied = endpoint(user, ["application.created"])
    job = published(api, user)
    ok(api("jobs.update", user, id=job["id"], title="Renamed"))
    ok(api("applications.create", candidate, job_id=job["id"]))
    ok(api("jobs.close", user, id=job["id"]))
    rows = settle(admin, closed.id, applied.id)
    assert sorted((row["endpoint_id"], row["kind"]) for row in rows) == sorted(
        [(closed.id, "job.closed"), (applied.id, "application.created")]
    )
    assert [r.envelope["event"] for r in closed.hook.received()] == ["job.closed"]
    assert [r.envelope["event"] for r in applied.hook.received()] == ["application.created"]


def test_a_disabled_endpoint_receives_nothing(api: Call, admin: Admin, endpoint: Make) -> None:
    """Nothing is sent to a disabled endpoint; the events meant for it are kept as failed deliveries, never
    attempted, that can be redelivered once it is enabled."""
    user = admin.user("employer")
    control = endpoint(user, ["job.published"])
    off = endpoint(user, ["job.published"])
    changed = admin.run(in_transaction(admin.webhooks.update), user.account_id, off.id, enabled=False)
    assert changed.enabled is False
    first = published(api, user)
    rows = settle(admin, control.id, off.id)
    kept = {row["endpoint_id"]: row for row in rows}
    assert set(kept) == {control.id, off.id} and kept[control.id]["status"] == "succeeded"
    assert (kept[off.id]["status"], kept[off.id]["attempts"]) == ("failed", 0)
    assert kept[off.id]["last_error"] == "the endpoint is disabled" and attempts(admin, kept[off.id]["id"]) == []
    assert off.hook.received() == [] and len(control.hook.received()) == 1

    admin.run(in_transaction(admin.webhooks.update), user.account_id, off.id, enabled=True)
    second = published(api, user)
    settle(admin, control.id, off.id)
    assert [r.envelope["data"]["job_id"] for r in off.hook.received()] == [second["id"]], (
        "an event emitted while disabled is not delivered later unless redelivered"
    )
    assert first["id"] != second["id"]


def test_disabling_an_endpoint_stops_its_retries(api: Call, admin: Admin, endpoint: Make) -> None:
    gate = threading.Event()
    user = admin.user("employer")
    ep = endpoint(user, ["job.published"], Reply(500, hold=gate), default=Reply(200))
    published(api, user)
    ep.hook.wait_arrivals(1)
    admin.run(in_transaction(admin.webhooks.update), user.account_id, ep.id, enabled=False)
    gate.set()
    [delivery] = settle(admin, ep.id)
    assert delivery["status"] == "failed" and delivery["attempts"] == 1
    assert delivery["last_error"] == "the endpoint is disabled"
    assert len(attempts(admin, delivery["id"])) == 1
    # No retry can come: the delivery is final and no job of it is left in the queue.
    [row] = admin.sql(
        "SELECT count(*) AS n FROM procrastinate_jobs WHERE args ->> 'delivery_id' = %(id)s AND status = 'todo'",
        {"id": delivery["id"]},
    )
    assert row["n"] == 0 and len(ep.hook.received()) == 1


def test_events_stay_in_their_accounts(api: Call, admin: Admin, endpoint: Make) -> None:
    kinds = list(admin.vocabulary.event_kinds)
    a, b = admin.user("employer"), admin.user("employer")
    candidate = admin.user("candidate")
    ep_a, ep_b = endpoint(a, kinds), endpoint(b, kinds)
    ep_c = endpoint(candidate, ["application.created", "application.status_changed", "job.published"])
    job = published(api, a)
    application = ok(api("applications.create", candidate, job_id=job["id"]))
    ok(api("applications.update_status", a, id=application["id"], status="rejected"))
    rows = settle(admin, ep_a.id, ep_b.id, ep_c.id)
    got = {ep.id: sorted(row["kind"] for row in rows if row["endpoint_id"] == ep.id) for ep in (ep_a, ep_b, ep_c)}
    assert got == {
        ep_a.id: ["application.created", "application.status_changed", "job.published"],
        ep_b.id: [],
        ep_c.id: ["application.created", "application.status_changed"],
    }
    assert ep_b.hook.received() == []
    assert len(ep_a.hook.received()) == 3 and len(ep_c.hook.received()) == 2

    theirs = published(api, b)
    settle(admin, ep_a.id, ep_b.id, ep_c.id)
    assert [r.envelope["data"]["job_id"] for r in ep_b.hook.received()] == [theirs["id"]]
    assert len(ep_a.hook.received()) == 3 and len(ep_c.hook.received()) == 2


def test_an_endpoint_added_after_an_event_does_not_receive_it(api: Call, admin: Admin, endpoint: Make) -> None:
    gate = threading.Event()
    user = admin.user("employer")
    early = endpoint(user, ["job.published", "job.updated"], Reply(500, hold=gate), default=Reply(200))
    job = published(api, user)
    early.hook.wait_arrivals(1)  # the event is still being delivered (and will be retried)
    late = endpoint(user, ["job.published", "job.updated"])
    gate.set()
    ok(api("jobs.update", user, id=job["id"], title="Later"))
    rows = settle(admin, early.id, late.id)
    assert sorted((row["endpoint_id"] == late.id, row["kind"]) for row in rows) == [
        (False, "job.published"),
        (False, "job.updated"),
        (True, "job.updated"),
    ]
    assert [r.envelope["event"] for r in late.hook.received()] == ["job.updated"]


# --- secrets -----------------------------------------------------------------------------------------------------


def test_rotate_now_signs_with_the_new_secret_only(api: Call, admin: Admin, endpoint: Make) -> None:
    gate = threading.Event()
    user = admin.user("employer")
    ep = endpoint(user, ["job.published", "job.closed"], Reply(500, hold=gate), default=Reply(200))
    job = published(api, user)
    ep.hook.wait_arrivals(1)  # attempt 1 is signed with the old secret; it will fail and be retried
    new = admin.run(in_transaction(admin.webhooks.rotate_secret), user.account_id, ep.id, overlap=False)
    assert SECRET.match(new) and new != ep.secret
    ep.hook.know(new)  # the customer switches at once too
    gate.set()
    ok(api("jobs.close", user, id=job["id"]))
    settle(admin, ep.id)
    first, *later = sorted(ep.hook.wait_for(3), key=lambda r: r.arrived)
    assert first.signed_with(ep.secret) and not first.signed_with(new)
    assert len(later) == 2 and {r.envelope["event"] for r in later} == {"job.published", "job.closed"}
    for request in later:
        assert request.valid and request.status == 200
        assert request.signed_with(new) and not request.signed_with(ep.secret)
        assert "x-service-signature-next" not in request.headers
    assert admin.run(admin.webhooks.reveal_secret, user.account_id, ep.id) == new
    assert admin.run(admin.webhooks.get, user.account_id, ep.id).overlap_until is None


def test_rotate_with_overlap_signs_with_both_then_the_new_only(api: Call, admin: Admin, endpoint: Make) -> None:
    user = admin.user("employer")
    ep = endpoint(user, ["job.published", "job.closed"])
    old = ep.secret
    new = admin.run(in_transaction(admin.webhooks.rotate_secret), user.account_id, ep.id, overlap=True)
    assert SECRET.match(new) and new != old
    overlap_until = admin.run(admin.webhooks.get, user.account_id, ep.id).overlap_until
    assert abs(overlap_until - (dt.datetime.now(dt.UTC) + dt.timedelta(hours=24))) < dt.timedelta(minutes=1)

    job = published(api, user)  # the customer has not switched yet: it knows only the old secret
    [request] = ep.hook.wait_for(1)
    assert request.valid and request.status == 200
    assert request.signed_with(old) and not request.signed_with(new)
    assert HEX_SIGNATURE.match(request.headers["x-service-signature-next"])
    assert request.next_signed_with(new) and not request.next_signed_with(old)
    # Standard Webhooks: two signatures, the new secret's first, so that either secret verifies (docs/webhooks.md).
    assert request.standard_verified_with(old) and request.standard_verified_with(new)
    assert len(request.headers["webhook-signature"].split(" ")) == 2

    admin.sql(
        "UPDATE webhook_endpoints SET overlap_until = now() - interval '1 second' WHERE id = %(id)s", {"id": ep.id}
    )  # 24 hours later
    ep.hook.know(new)
    ok(api("jobs.close", user, id=job["id"]))
    settle(admin, ep.id)
    _, after = ep.hook.wait_for(2)
    assert after.envelope["event"] == "job.closed" and after.valid and after.status == 200
    assert after.signed_with(new) and not after.signed_with(old)
    assert "x-service-signature-next" not in after.headers
    assert after.standard_verified_with(new) and not after.standard_verified_with(old)
    assert admin.run(admin.webhooks.reveal_secret, user.account_id, ep.id) == new


def test_every_attempt_verifies_with_the_standard_webhooks_library(api: Call, admin: Admin, endpoint: Make) -> None:
    """The standardwebhooks package's own `Webhook(secret).verify(body, headers)` accepts each attempt as sent:
    webhook-id is the event's idempotency_key in every attempt, webhook-timestamp is when each was signed."""
    user = admin.user("employer")
    ep = endpoint(user, ["job.published"], Reply(500), Reply(200))
    published(api, user)
    first, second = ep.hook.wait_for(2)
    for request in (first, second):
        assert request.standard_verified_with(ep.secret)
        assert request.headers["webhook-id"] == request.envelope["idempotency_key"]
        assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 60, "signed now, in Unix seconds"
    assert first.body == second.body and first.headers["webhook-id"] == second.headers["webhook-id"]
    assert not first.standard_verified_with("whsec_" + base64.b64encode(b"x" * 32).decode())


def test_one_event_has_one_webhook_id_at_every_endpoint(api: Call, admin: Admin, endpoint: Make) -> None:
    user = admin.user("employer")
    one, two = endpoint(user, ["job.published"]), endpoint(user, ["job.published"])
    published(api, user)
    [at_one], [at_two] = one.hook.wait_for(1), two.hook.wait_for(1)
    assert at_one.headers["webhook-id"] == at_two.headers["webhook-id"]
    assert at_one.standard_verified_with(one.secret) and at_two.standard_verified_with(two.secret)


# --- the panel's actions -------------------------------------------------------------------------------------------


def test_send_test_event_reaches_that_endpoint_whatever_its_subscriptions(
    api: Call, admin: Admin, endpoint: Make
) -> None:
    user = admin.user("employer")
    ep = endpoint(user, ["job.closed"], Reply(500), default=Reply(200))
    other = endpoint(user, ["job.closed"])
    admin.run(in_transaction(admin.webhooks.send_test_event), user.account_id, ep.id)
    rows = settle(admin, ep.id, other.id)
    assert [(row["endpoint_id"], row["kind"], row["status"], row["attempts"]) for row in rows] == [
        (ep.id, "webhook.test", "succeeded", 2)
    ], "the same queue, signature and retries"
    failed_once, request = ep.hook.wait_for(2)
    assert failed_once.body == request.body
    envelope = request.envelope
    assert set(envelope) == ENVELOPE_KEYS
    assert envelope["event"] == request.headers["x-service-event"] == "webhook.test"
    assert envelope["data"] == {"endpoint_id": ep.id}
    assert request.valid and request.signed_with(ep.secret)
    assert other.hook.received() == []


def test_redeliver_sends_the_same_bytes_again(failed: Failures, admin: Admin) -> None:
    ep = failed.endpoint
    ep.hook.answer(default=Reply(200, b"back"))
    old = failed.before[0]
    new_id = admin.run(in_transaction(admin.webhooks.redeliver), ep.user.account_id, old["id"])
    assert new_id != old["id"]
    [request] = delivered(ep.hook, new_id)
    [earlier, *_] = delivered(ep.hook, old["id"], count=5)
    assert request.body == earlier.body == old["body"], "byte-identical: same idempotency_key and timestamp"
    assert request.envelope["idempotency_key"] == old["event_id"]
    assert request.valid and request.status == 200
    rows = {row["id"]: row for row in settle(admin, ep.id)}
    assert rows[new_id]["event_id"] == old["event_id"]
    assert (rows[new_id]["status"], rows[new_id]["attempts"]) == ("succeeded", 1)
    assert (rows[old["id"]]["status"], rows[old["id"]]["attempts"]) == ("failed", 5)


def test_redeliver_is_only_for_a_failed_delivery_of_the_account(
    failed: Failures, api: Call, admin: Admin, endpoint: Make
) -> None:
    user = admin.user("employer")
    ep = endpoint(user, ["job.published"])
    published(api, user)
    [succeeded] = settle(admin, ep.id)
    before = len(deliveries(admin, ep.id, failed.endpoint.id))
    redeliver = in_transaction(admin.webhooks.redeliver)
    with pytest.raises(NotFound):
        admin.run(redeliver, user.account_id, succeeded["id"])
    with pytest.raises(NotFound):  # another account's failed delivery
        admin.run(redeliver, user.account_id, failed.before[1]["id"])
    with pytest.raises(NotFound):
        admin.run(redeliver, user.account_id, "not-an-id")
    assert len(deliveries(admin, ep.id, failed.endpoint.id)) == before


def test_redeliver_failed_since(failed: Failures, admin: Admin) -> None:
    ep = failed.endpoint
    ep.hook.answer(default=Reply(200, b"back"))
    redeliver = in_transaction(admin.webhooks.redeliver_failed_since)
    ids = admin.run(redeliver, ep.user.account_id, ep.id, failed.since)
    assert len(ids) == 2
    rows = {row["id"]: row for row in settle(admin, ep.id)}
    assert sorted(rows[i]["event_id"] for i in ids) == sorted(row["event_id"] for row in failed.after)
    assert all(rows[i]["status"] == "succeeded" for i in ids)
    bodies = {row["event_id"]: row["body"] for row in failed.after}
    for delivery_id in ids:
        [request] = delivered(ep.hook, delivery_id)
        assert request.body == bodies[rows[delivery_id]["event_id"]]
    assert admin.run(redeliver, ep.user.account_id, ep.id, failed.since) == [], (
        "asking again does not send the redelivered events a second time"
    )


def test_bin_admin_redeliver_by_id(failed: Failures, admin: Admin, database: str) -> None:
    ep = failed.endpoint
    ep.hook.answer(default=Reply(200, b"back"))
    old = failed.before[1]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TEST_DATABASE_URL")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "admin"), "redeliver", "--id", old["id"]],
        env={**env, "DATABASE_URL": database, "SERVICE_SECRET_KEY": TEST_SECRET_KEY},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.strip().splitlines()
    printed = json.loads(line)
    assert set(printed) == {"deliveries"} and len(printed["deliveries"]) == 1
    [new_id] = printed["deliveries"]
    [request] = delivered(ep.hook, new_id)  # the live server's worker picks up the other process's job
    assert request.body == old["body"] and request.status == 200
    rows = {row["id"]: row for row in settle(admin, ep.id)}
    assert (rows[new_id]["event_id"], rows[new_id]["status"]) == (old["event_id"], "succeeded")


# --- no event without its change -------------------------------------------------------------------------------------


def test_a_refused_write_emits_nothing(api: Call, admin: Admin, endpoint: Make) -> None:
    user = admin.user("employer")
    stranger = admin.user("employer")
    ep = endpoint(user, ["job.published", "job.updated", "job.closed"])
    job = published(api, user)
    refused(api("jobs.publish", user, id=job["id"]), 409, "invalid_transition")
    refused(api("jobs.update", stranger, id=job["id"], title="Mine now"), 403, "forbidden")
    refused(api("jobs.update", user, id=job["id"], title=""), 422, "invalid_params")
    ok(api("jobs.close", user, id=job["id"]))
    rows = settle(admin, ep.id)
    assert [row["kind"] for row in rows] == ["job.published", "job.closed"]
    assert sorted(r.envelope["event"] for r in ep.hook.received()) == ["job.closed", "job.published"]
    [count] = admin.sql(
        "SELECT count(*) AS n FROM events WHERE convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'job_id' = %(id)s",
        {"id": job["id"]},
    )
    assert count["n"] == 2


class Marker(msgspec.Struct, frozen=True, kw_only=True):
    marker: str


class RolledBack(Exception):
    """The change after the event failed."""


def test_a_rolled_back_emit_is_never_delivered(admin: Admin, endpoint: Make) -> None:
    user = admin.user("employer")
    ep = endpoint(user, ["job.updated"])
    emitter = emitter_for(admin.settings)
    gone, kept = f"gone-{uuid.uuid4().hex}", f"kept-{uuid.uuid4().hex}"

    async def emit(conn: Any, marker: str, *, fail: bool) -> None:
        with contextlib.suppress(RolledBack):
            async with conn.transaction():
                await emitter.emit(conn, "job.updated", Marker(marker=marker), [user.account_id])
                if fail:
                    raise RolledBack

    admin.run(emit, gone, fail=True)
    admin.run(emit, kept, fail=False)
    rows = settle(admin, ep.id)
    assert [(row["status"], json.loads(row["body"])["data"]) for row in rows] == [("succeeded", {"marker": kept})]
    assert [r.envelope["data"] for r in ep.hook.wait_for(1)] == [{"marker": kept}]
    [count] = admin.sql(
        "SELECT count(*) AS n FROM events WHERE convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'marker' = %(m)s",
        {"m": gone},
    )
    assert count["n"] == 0
