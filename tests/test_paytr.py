"""PayTR's notifications over real HTTP (docs/billing.md, docs/decisions.md Money): the hash against an independent
stdlib
implementation, refusals that change nothing, every outcome of a valid notification, the audit trail, and 50
concurrent copies of one notification."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from procedures.billing import provider as paytr
from tests.fake_paytr import FakePayTR, notification, notification_hash
from tests.support import Admin, Call, LiveServer, User, ok, settings_for

MERCHANT_ID = "123456"
KEY = "test-merchant-key-1fQz"
SALT = "test-merchant-salt-9Xk"
PRO_PRICE = 99_000
CONCURRENT = 50


@pytest.fixture(scope="module")
def fake() -> Iterator[FakePayTR]:
    with FakePayTR(MERCHANT_ID, KEY, SALT) as provider:
        yield provider


@pytest.fixture(scope="module")
def settings(database: str, fake: FakePayTR, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
        DB_POOL_MAX="20",
        **fake.settings(),
    )


@pytest.fixture
def subscribe(call: Call, admin: Admin) -> Any:
    """`subscribe(plan="pro")`: a new employer (on the free plan) and their pending payment."""

    def make(plan: str = "pro") -> tuple[User, dict[str, Any]]:
        user = admin.user("employer", plan="free")
        return user, ok(call("billing.subscriptions.create", user, plan=plan))

    return make


def notify(client: httpx.Client, fields: dict[str, str], *, as_json: bool = False) -> httpx.Response:
    if as_json:
        return client.post("/api/webhooks/paytr", json=fields)
    return client.post("/api/webhooks/paytr", data=fields)


def signed(oid: str, status: str = "success", total: str = str(PRO_PRICE), **extra: str) -> dict[str, str]:
    return notification(KEY, SALT, oid, status, total, **extra)


def state(admin: Admin, oid: str) -> dict[str, Any]:
    """Everything a notification could change, for one payment."""
    payment = admin.sql(
        "SELECT id::text AS id, status, failed_reason, failed_reason_code, flagged_for_review, completed_at,"
        " subscription_id, account_id FROM payments WHERE merchant_oid = %(oid)s",
        {"oid": oid},
    )[0]
    subscription = admin.sql(
        "SELECT status, current_period_start, current_period_end FROM subscriptions WHERE id = %(id)s",
        {"id": payment["subscription_id"]},
    )[0]
    plan = admin.sql("SELECT plan FROM accounts WHERE id = %(id)s", {"id": payment["account_id"]})[0]["plan"]
    invoices = admin.sql("SELECT number FROM invoices WHERE payment_id = %(id)s", {"id": payment["id"]})
    return {
        "payment": payment,
        "subscription": subscription,
        "plan": plan,
        "invoices": [row["number"] for row in invoices],
        "events": events(admin, payment["id"], str(payment["subscription_id"])),
    }


def events(admin: Admin, payment_id: str, subscription_id: str) -> dict[str, list[dict[str, Any]]]:
    """The data of the events about this payment or its subscription, by kind."""
    rows = admin.sql(
        "SELECT kind, convert_from(body, 'UTF8')::jsonb -> 'data' AS data FROM events"
        " WHERE convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'payment_id' = %(p)s"
        " OR convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'subscription_id' = %(s)s ORDER BY created_at",
        {"p": payment_id, "s": subscription_id},
    )
    found: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        found.setdefault(row["kind"], []).append(row["data"])
    return found


BY_PAYTR = ("operator", "paytr")


def audit(admin: Admin, oid: str) -> list[str]:
    rows = admin.sql("SELECT verdict FROM payment_notifications WHERE merchant_oid = %(oid)s ORDER BY id", {"oid": oid})
    return [row["verdict"] for row in rows]


# --- the hash -------------------------------------------------------------------------------------------------


def test_the_service_signs_as_an_independent_implementation_does() -> None:
    """Known answer, computed by hand with hmac/hashlib/base64, and the service's own function."""
    message = b"HIREabc123" + SALT.encode() + b"success" + b"99000"
    expected = base64.b64encode(hmac.new(KEY.encode(), message, hashlib.sha256).digest()).decode()
    assert notification_hash(KEY, SALT, "HIREabc123", "success", "99000") == expected
    assert paytr.sign(KEY, "HIREabc123" + SALT + "success" + "99000") == expected


def test_a_valid_notification_completes_the_payment(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    response = notify(client, signed(oid))
    assert (response.status_code, response.text) == (200, "OK")
    assert response.headers["content-type"].startswith("text/plain")
    after = state(admin, oid)
    assert after["payment"]["status"] == "completed" and not after["payment"]["flagged_for_review"]
    assert after["subscription"]["status"] == "active" and after["plan"] == "pro"
    assert len(after["invoices"]) == 1
    assert {kind: len(data) for kind, data in after["events"].items()} == {
        "billing.payment.completed": 1,
        "billing.subscription.created": 1,
        "billing.invoice.generated": 1,
    }
    assert after["events"]["billing.payment.completed"][0] == {
        "payment_id": made["payment"]["id"],
        "merchant_oid": oid,
        "amount": PRO_PRICE,
        "currency": "TRY",
        "status": "completed",
    }
    assert after["events"]["billing.subscription.created"][0] == {
        "subscription_id": made["subscription"]["id"],
        "plan": "pro",
        "status": "active",
    }
    assert audit(admin, oid) == ["applied"]
    assert admin.plan_changes(after["payment"]["account_id"]) == [BY_PAYTR]
    origin = admin.sql(
        "SELECT client_address::text AS address, user_agent FROM audit_entries WHERE action = 'plan.changed' "
        "AND target_id = %(account)s::text",
        {"account": after["payment"]["account_id"]},
    )
    assert origin == [{"address": "127.0.0.1", "user_agent": client.headers["user-agent"]}], "the notification's"


def _wrong_key(oid: str) -> dict[str, str]:
    return notification("another-key", SALT, oid, "success", str(PRO_PRICE))


def _wrong_salt(oid: str) -> dict[str, str]:
    return notification(KEY, "another-salt", oid, "success", str(PRO_PRICE))


def _altered(name: str, value: str) -> Any:
    def make(oid: str) -> dict[str, str]:
        fields = signed(oid, "failed", "1") if name == "status" else signed(oid)
        return {**fields, name: value}

    return make


def _without(name: str) -> Any:
    def make(oid: str) -> dict[str, str]:
        fields = signed(oid)
        del fields[name]
        return fields

    return make


@pytest.mark.parametrize(
    ("forge", "verdict"),
    [
        pytest.param(_wrong_key, "invalid_hash", id="wrong-key"),
        pytest.param(_wrong_salt, "invalid_hash", id="wrong-salt"),
        pytest.param(_altered("total_amount", str(PRO_PRICE * 10)), "invalid_hash", id="amount-altered"),
        pytest.param(_altered("status", "success"), "invalid_hash", id="status-altered"),
        pytest.param(_altered("hash", "AAAA"), "invalid_hash", id="garbage-hash"),
        pytest.param(_altered("hash", "ümlaut"), "invalid_hash", id="non-ascii-hash"),
        pytest.param(_without("hash"), "malformed", id="no-hash"),
        pytest.param(_without("total_amount"), "malformed", id="no-amount"),
        pytest.param(_without("status"), "malformed", id="no-status"),
    ],
)
def test_a_forged_or_incomplete_notification_changes_nothing(
    client: httpx.Client, admin: Admin, subscribe: Any, forge: Any, verdict: str
) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    before = state(admin, oid)
    response = notify(client, forge(oid))
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain") and response.text and response.text != "OK"
    assert state(admin, oid) == before
    assert before["payment"]["status"] == "pending" and before["events"] == {}
    assert audit(admin, oid) == [verdict]


def test_the_merchant_oid_altered_after_signing_is_refused(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, first = subscribe()
    _, second = subscribe()
    fields = {**signed(first["payment"]["merchant_oid"]), "merchant_oid": second["payment"]["merchant_oid"]}
    response = notify(client, fields)
    assert response.status_code == 400
    for made in (first, second):
        assert state(admin, made["payment"]["merchant_oid"])["payment"]["status"] == "pending"
    assert audit(admin, second["payment"]["merchant_oid"]) == ["invalid_hash"]


def test_unsigned_fields_decide_nothing(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    fields = signed(oid, payment_amount="1", failed_reason_msg="ignored", currency="USD", test_mode="1")
    assert notify(client, fields).text == "OK"
    after = state(admin, oid)
    assert after["payment"]["status"] == "completed" and after["payment"]["failed_reason"] is None


def test_a_signed_but_unknown_status_or_amount_is_refused(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    for status, total in (("maybe", str(PRO_PRICE)), ("success", "990.00"), ("success", "-1"), ("success", "1\n")):
        response = notify(client, signed(oid, status, total))
        assert response.status_code == 400, (status, total)
    assert state(admin, oid)["payment"]["status"] == "pending"
    assert audit(admin, oid) == ["malformed"] * 4


# --- valid notifications ---------------------------------------------------------------------------------------


def test_a_failed_payment(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    fields = signed(oid, "failed", str(PRO_PRICE), failed_reason_code="6", failed_reason_msg="Kart limiti yetersiz")
    assert notify(client, fields).text == "OK"
    after = state(admin, oid)
    assert after["payment"]["status"] == "failed"
    assert after["payment"]["failed_reason"] == "Kart limiti yetersiz"
    assert after["payment"]["failed_reason_code"] == "6"
    assert not after["payment"]["flagged_for_review"]
    assert after["subscription"]["status"] == "failed" and after["plan"] == "free"
    assert after["invoices"] == []
    assert after["events"] == {
        "billing.payment.failed": [
            {
                "payment_id": made["payment"]["id"],
                "merchant_oid": oid,
                "amount": PRO_PRICE,
                "currency": "TRY",
                "status": "failed",
                "failed_reason": "Kart limiti yetersiz",
            }
        ]
    }
    # A later success for the same order is a duplicate: it changes nothing.
    assert notify(client, signed(oid)).text == "OK"
    assert state(admin, oid) == after
    assert audit(admin, oid) == ["failed", "duplicate"]
    assert admin.plan_changes(after["payment"]["account_id"]) == [], "no change, no entry"


def test_an_underpaid_success_fails_and_is_flagged(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    assert notify(client, signed(oid, "success", str(PRO_PRICE - 1))).text == "OK"
    after = state(admin, oid)
    assert after["payment"]["status"] == "failed"
    assert after["payment"]["failed_reason"] == "amount_mismatch" and after["payment"]["flagged_for_review"]
    assert after["subscription"]["status"] == "failed" and after["plan"] == "free" and after["invoices"] == []
    assert [data["failed_reason"] for data in after["events"]["billing.payment.failed"]] == ["amount_mismatch"]
    assert set(after["events"]) == {"billing.payment.failed"}
    assert audit(admin, oid) == ["amount_mismatch"]


def test_an_overpaid_success_completes_and_is_flagged(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    assert notify(client, signed(oid, "success", str(PRO_PRICE + 500))).text == "OK"
    after = state(admin, oid)
    assert after["payment"]["status"] == "completed" and after["payment"]["flagged_for_review"]
    assert after["plan"] == "pro"
    invoice = admin.sql("SELECT amount FROM invoices WHERE payment_id = %(id)s", {"id": made["payment"]["id"]})
    assert invoice == [{"amount": PRO_PRICE}], "the invoice is for the plan's price"


def test_an_unknown_order_with_a_valid_hash_is_recorded_and_acknowledged(client: httpx.Client, admin: Admin) -> None:
    oid = "HIREnosuchorder0000000000000000"
    response = notify(client, signed(oid))
    assert (response.status_code, response.text) == (200, "OK")
    assert audit(admin, oid) == ["unknown_order"]
    recorded = admin.sql("SELECT fields FROM payment_notifications WHERE merchant_oid = %(oid)s", {"oid": oid})
    assert recorded[0]["fields"]["total_amount"] == str(PRO_PRICE)


def test_an_order_id_we_never_issue_is_unknown(client: httpx.Client, admin: Admin) -> None:
    for oid in ("HIRE-with-dash", "HIRE\x00nul", "x" * 65):
        response = notify(client, signed(oid), as_json=True)
        assert (response.status_code, response.text) == (200, "OK"), oid
    assert audit(admin, "HIRE-with-dash") == ["unknown_order"]
    assert audit(admin, "HIRE\ufffdnul") == ["unknown_order"], "a NUL is stored as U+FFFD, the row is kept"


def test_informational_fields_are_stored_as_they_can_be(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    fields = signed(oid, "failed", "0", failed_reason_msg="no\x00nul " + "x" * 600, failed_reason_code="")
    assert notify(client, fields).text == "OK"
    payment = state(admin, oid)["payment"]
    assert payment["status"] == "failed" and payment["failed_reason"] == ("nonul " + "x" * 600)[:500]
    assert audit(admin, oid) == ["failed"], "the audit row survives the NUL"


def test_two_paid_checkouts_of_one_plan_are_flagged(
    client: httpx.Client, call: Call, admin: Admin, subscribe: Any
) -> None:
    user, first = subscribe()
    second = ok(call("billing.subscriptions.create", user, plan="pro"))
    assert second["subscription"]["id"] != first["subscription"]["id"], "the first is still pending"
    for made in (first, second):
        assert notify(client, signed(made["payment"]["merchant_oid"])).text == "OK"
    assert state(admin, first["payment"]["merchant_oid"])["subscription"]["status"] == "cancelled"
    after = state(admin, second["payment"]["merchant_oid"])
    assert after["subscription"]["status"] == "active" and after["payment"]["flagged_for_review"]


def test_a_json_body_is_accepted(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    response = notify(client, signed(oid), as_json=True)
    assert (response.status_code, response.text) == (200, "OK")
    assert state(admin, oid)["payment"]["status"] == "completed"
    assert audit(admin, oid) == ["applied"]


def test_an_unknown_provider_is_404(client: httpx.Client) -> None:
    assert client.post("/api/webhooks/iyzico", data={"merchant_oid": "x"}).status_code == 404


def test_50_concurrent_copies_complete_the_payment_once(client: httpx.Client, admin: Admin, subscribe: Any) -> None:
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    fields = signed(oid)
    start = threading.Barrier(CONCURRENT)
    limits = httpx.Limits(max_connections=CONCURRENT)

    with httpx.Client(base_url=str(client.base_url), timeout=60, limits=limits) as pooled:

        def send(_: int) -> tuple[int, str]:
            start.wait()
            response = pooled.post("/api/webhooks/paytr", data=fields)
            return response.status_code, response.text

        with ThreadPoolExecutor(CONCURRENT) as pool:
            began = time.perf_counter()
            answers = list(pool.map(send, range(CONCURRENT)))
            elapsed = time.perf_counter() - began

    print(f"\n{CONCURRENT} concurrent copies of one notification: {elapsed:.3f} s, {CONCURRENT / elapsed:.0f}/s")
    assert answers == [(200, "OK")] * CONCURRENT
    after = state(admin, oid)
    assert after["payment"]["status"] == "completed" and after["plan"] == "pro"
    assert len(after["invoices"]) == 1
    assert {kind: len(data) for kind, data in after["events"].items()} == {
        "billing.payment.completed": 1,
        "billing.subscription.created": 1,
        "billing.invoice.generated": 1,
    }
    verdicts = audit(admin, oid)
    assert len(verdicts) == CONCURRENT
    assert sorted(verdicts) == ["applied"] + ["duplicate"] * (CONCURRENT - 1)
    assert admin.plan_changes(after["payment"]["account_id"]) == [BY_PAYTR], "one plan change, audited once"


def test_an_unconfigured_provider_asks_to_be_retried(
    database: str, admin: Admin, subscribe: Any, tmp_path: Any
) -> None:
    """Without the merchant key and salt nothing can be checked: not `OK`, so PayTR repeats it later."""
    _, made = subscribe()
    oid = made["payment"]["merchant_oid"]
    with LiveServer(settings_for(database, DATA_DIR=str(tmp_path))) as bare, bare.client() as client:
        response = notify(client, signed(oid))
    assert response.status_code == 503 and response.text != "OK"
    assert state(admin, oid)["payment"]["status"] == "pending"
    assert audit(admin, oid) == ["not_configured"]


# --- what anyone could send (docs/security.md) -------------------------------------------------------------------


def test_junk_of_an_invalid_notification_is_not_stored_whole(client: httpx.Client, admin: Admin) -> None:
    """Sixty kilobytes of junk beside a wrong hash: the signed fields and at most 1 KiB of the rest are kept."""
    oid = f"JUNK{uuid.uuid4().hex}"
    fields = {**signed(oid), "hash": "not-the-hash", **{f"junk{n}": "x" * 1000 for n in range(60)}}
    assert notify(client, fields).status_code == 400
    [row] = admin.sql(
        "SELECT fields, octet_length(fields::text) AS size FROM payment_notifications WHERE merchant_oid = %(oid)s",
        {"oid": oid},
    )
    kept = row["fields"]
    assert {name: kept[name] for name in ("merchant_oid", "status", "total_amount", "hash")} == {
        "merchant_oid": oid,
        "status": "success",
        "total_amount": str(PRO_PRICE),
        "hash": "not-the-hash",
    }
    assert kept["_truncated"] == "true" and row["size"] < 2048


def test_deeply_nested_json_is_a_malformed_notification(client: httpx.Client, admin: Admin) -> None:
    before = admin.sql("SELECT max(id) AS id FROM payment_notifications")[0]["id"] or 0
    response = client.post("/api/webhooks/paytr", content=b"[" * 100_000, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.headers["content-type"].startswith("text/plain")
    rows = admin.sql("SELECT verdict, fields FROM payment_notifications WHERE id > %(id)s", {"id": before})
    assert [(row["verdict"], row["fields"]) for row in rows] == [("malformed", {})]


def test_the_receiver_is_limited_per_client_address(database: str, fake: FakePayTR, tmp_path: Any) -> None:
    limited = settings_for(
        database, DATA_DIR=str(tmp_path), PAYMENT_NOTIFICATION_LIMIT_PER_ADDRESS="3/minute", **fake.settings()
    )
    with LiveServer(limited) as live, live.client() as client:
        for _ in range(3):
            response = client.post("/api/webhooks/paytr", data={"x": "y"}, headers={"X-Forwarded-For": "192.0.2.5"})
            assert response.status_code == 400
        refused = client.post("/api/webhooks/paytr", data={"x": "y"}, headers={"X-Forwarded-For": "192.0.2.5"})
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        other = client.post("/api/webhooks/paytr", data={"x": "y"}, headers={"X-Forwarded-For": "192.0.2.6"})
        assert other.status_code == 400
