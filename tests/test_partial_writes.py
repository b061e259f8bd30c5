"""A write that opens several transactions and fails after one of them committed (docs/security.md): its `503`
says that part of it was stored, and a retry with the same Idempotency-Key completes it — one checkout (one
File), never two. The fault is real: the payment provider holds its answer while the test takes a lock the
service's next step needs, then kills the connection that waits on it, as a failover would."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.fake_paytr import FakePayTR
from tests.files_support import PDF, upload
from tests.support import Admin, User, eventually, ok, settings_for

CREATE = "/v1/billing.subscriptions.create"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakePayTR]:
    with FakePayTR("123456", "partial-test-key", "partial-test-salt") as provider:
        yield provider


@pytest.fixture(scope="module")
def settings(database: str, fake: FakePayTR, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
        PUBLIC_URL="https://hire.example.test",
        PAYTR_TIMEOUT="30",
        **fake.settings(),
    )


def checkouts(admin: Admin, payer: User) -> list[dict[str, Any]]:
    query = "SELECT id::text AS id, status FROM payments WHERE account_id = %(a)s ORDER BY created_at, id"
    return admin.sql(query, {"a": payer.account_id})


def lost_between_steps(client: httpx.Client, fake: FakePayTR, database: str, headers: dict[str, str]) -> httpx.Response:
    """`billing.subscriptions.create` whose pending payment is stored and whose provider answers, but whose
    connection is killed while it records that answer."""
    fake.mode = "hold"
    fake.held.clear()
    fake.release.clear()
    answered: list[httpx.Response] = []
    calling = threading.Thread(
        target=lambda: answered.append(client.post(CREATE, json={"plan": "pro"}, headers=headers))
    )
    calling.start()
    try:
        assert fake.held.wait(30), "the service asked the provider (its pending payment committed)"
        with psycopg.connect(database) as locker:
            locker.execute("LOCK TABLE payments IN ACCESS EXCLUSIVE MODE")
            fake.mode = None
            fake.release.set()
            waiting = eventually(lambda: _waiting_on_a_lock(locker), "the service's step waiting on the lock")
            locker.execute("SELECT pg_terminate_backend(%s)", (waiting,))
            locker.rollback()
    finally:
        fake.release.set()
        calling.join(timeout=60)
    return answered[0]


def _waiting_on_a_lock(conn: psycopg.Connection[Any]) -> int | None:
    row = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return int(row[0]) if row else None


@pytest.fixture
def payer(admin: Admin) -> User:
    return admin.user("employer", plan="free")


@pytest.fixture(autouse=True)
def _provider_behaves(fake: FakePayTR) -> Iterator[None]:
    fake.mode = None
    yield
    fake.mode = None
    fake.release.set()


def test_a_retry_with_the_key_completes_the_checkout_and_opens_no_second(
    client: httpx.Client, fake: FakePayTR, admin: Admin, database: str, payer: User
) -> None:
    headers = {**payer.auth, "Idempotency-Key": "checkout-lost"}
    failed = lost_between_steps(client, fake, database, headers)
    assert failed.status_code == 503 and failed.headers["Retry-After"]
    message = failed.json()["error"]["message"]
    assert "Part of this call was stored" in message and "same Idempotency-Key" in message, message
    assert len(checkouts(admin, payer)) == 1, "the first step's pending payment"

    retried = client.post(CREATE, json={"plan": "pro"}, headers=headers)
    made = ok(retried)
    assert "Idempotent-Replayed" not in retried.headers and made["checkout"]["url"]
    assert [row["id"] for row in checkouts(admin, payer)] == [made["payment"]["id"]], "one checkout, never two"
    replayed = client.post(CREATE, json={"plan": "pro"}, headers=headers)
    assert replayed.content == retried.content and replayed.headers["Idempotent-Replayed"] == "true"
    listed = ok(client.post("/v1/billing.subscriptions.list", json={}, headers=payer.auth))
    assert [row["id"] for row in listed["data"]] == [made["subscription"]["id"]]


def test_without_a_key_the_503_says_what_was_stored(
    client: httpx.Client, fake: FakePayTR, admin: Admin, database: str, payer: User
) -> None:
    failed = lost_between_steps(client, fake, database, payer.auth)
    assert failed.status_code == 503
    message = failed.json()["error"]["message"]
    assert "Part of this call was stored" in message and "not completed" in message, message
    assert len(checkouts(admin, payer)) == 1


def test_a_failure_that_stored_nothing_leaves_the_key_free(
    client: httpx.Client, fake: FakePayTR, admin: Admin, payer: User
) -> None:
    """The provider refuses: its pending payment is taken back, the 503 is the provider's, the key is free."""
    headers = {**payer.auth, "Idempotency-Key": "checkout-refused"}
    fake.mode = "refuse"
    refused = client.post(CREATE, json={"plan": "pro"}, headers=headers)
    assert refused.status_code == 503 and "Part of this call" not in refused.text
    assert checkouts(admin, payer) == []
    fake.mode = None
    made = ok(client.post(CREATE, json={"plan": "pro"}, headers=headers))
    assert [row["id"] for row in checkouts(admin, payer)] == [made["payment"]["id"]]


def test_an_upload_whose_answer_was_lost_is_answered_by_its_retry(client: httpx.Client, admin: Admin) -> None:
    """The state a files.upload leaves when its File committed and its answer could not be kept (as above, a
    connection lost): the key's claim, its lease over, and the File recorded as its progress. The retry answers
    that File and keeps no second one."""
    person = admin.user("candidate")
    kept = ok(upload(client, person, PDF, "cv.pdf"))
    fingerprint = hashlib.sha256(
        json.dumps({"filename": "cv.pdf", "sha256": kept["sha256"]}, separators=(",", ":"), sort_keys=True).encode()
    ).digest()
    admin.sql(
        """
        INSERT INTO idempotency_keys (account_id, key, user_id, procedure, fingerprint, expires_at, lease_until,
                                      progress)
        VALUES (%(a)s, 'upload-lost', %(u)s, 'files.upload', %(f)s, now() + interval '1 day', now(), %(p)s)
        """,
        {"a": person.account_id, "u": person.user_id, "f": fingerprint, "p": Jsonb({"file_id": kept["id"]})},
    )
    retried = upload(client, {**person.auth, "Idempotency-Key": "upload-lost"}, PDF, "cv.pdf")
    assert ok(retried) == kept
    owned = admin.sql("SELECT count(*) AS n FROM files WHERE owner_id = %(u)s", {"u": person.user_id})
    assert owned[0]["n"] == 1
