"""Billing through HTTP (docs/decisions.md, docs/webhooks.md Money): plans, subscribing with the provider's checkout
(a local fake PayTR that checks our paytr_token), the full flow to a paid plan and its rate limit, renewal,
change of plan, cancellation, the provider failing, visibility and roles, gapless invoice numbers, and the
periodic expiry."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
import pytest

from procedures.assembly import business
from procedures.billing import provider, settlement
from rpc.ops import admin as ops
from tests.conftest import Databases
from tests.fake_paytr import FakePayTR, notification
from tests.support import (
    TIMESTAMP,
    Admin,
    Call,
    LiveServer,
    User,
    bearer,
    emitter_for,
    eventually,
    ok,
    refused,
    settings_for,
)

MERCHANT_ID = "123456"
KEY = "billing-test-key-a8Jd"
SALT = "billing-test-salt-Q2m"
PRICES = {"pro": 99_000, "enterprise": 499_000}
PERIOD = dt.timedelta(days=30)
SUBSCRIPTION_KEYS = {
    "id",
    "plan",
    "status",
    "current_period_start",
    "current_period_end",
    "cancelled_at",
    "created_at",
    "updated_at",
}
PAYMENT_KEYS = {
    "id",
    "subscription_id",
    "provider",
    "merchant_oid",
    "amount",
    "currency",
    "status",
    "failed_reason",
    "failed_reason_code",
    "created_at",
    "updated_at",
    "completed_at",
}
INVOICE_KEYS = {"id", "number", "payment_id", "amount", "currency", "line_items", "issued_at"}
PUBLIC_URL = "https://hire.example.test"  # the issuer of the test tokens, so every server here shares it
MERCHANT_OID = re.compile(r"^HIRE[A-Za-z0-9]{28}$")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakePayTR]:
    with FakePayTR(MERCHANT_ID, KEY, SALT) as provider:
        yield provider


@pytest.fixture(scope="module")
def settings(database: str, fake: FakePayTR, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
        PUBLIC_URL=PUBLIC_URL,
        PAYTR_TIMEOUT="1",
        **fake.settings(),
    )


@pytest.fixture
def payer(admin: Admin) -> User:
    """An employer of a new account on the free plan."""
    return admin.user("employer", plan="free")


@pytest.fixture(autouse=True)
def _provider_behaves(fake: FakePayTR) -> Iterator[None]:
    fake.mode = None
    yield
    fake.mode = None


def pay(client: httpx.Client, made: dict[str, Any], status: str = "success", total: int | None = None) -> None:
    """PayTR's notification for the payment of `made` (a `billing.subscriptions.create` result)."""
    payment = made["payment"]
    amount = str(payment["amount"] if total is None else total)
    fields = notification(KEY, SALT, payment["merchant_oid"], status, amount, failed_reason_msg="declined")
    response = client.post("/api/webhooks/paytr", data=fields)
    assert (response.status_code, response.text) == (200, "OK")


def plan_of(admin: Admin, user: User) -> str:
    return str(admin.sql("SELECT plan FROM accounts WHERE id = %(id)s", {"id": user.account_id})[0]["plan"])


BY_ADMIN, BY_PAYTR = ("operator", None), ("operator", "paytr")  # bin/admin set-plan, the provider
BY_EXPIRY = ("operator", "subscription-expiry")


def count(admin: Admin, table: str, user: User) -> int:
    return int(admin.sql(f"SELECT count(*) AS n FROM {table} WHERE account_id = %(a)s", {"a": user.account_id})[0]["n"])


def kinds(admin: Admin, user: User) -> list[str]:
    """The kinds of the events of the user's account, oldest first."""
    rows = admin.sql(
        "SELECT kind FROM events WHERE %(a)s = ANY(account_ids) ORDER BY created_at, kind", {"a": user.account_id}
    )
    return [row["kind"] for row in rows]


def event_data(admin: Admin, user: User, kind: str) -> list[dict[str, Any]]:
    rows = admin.sql(
        "SELECT convert_from(body, 'UTF8')::jsonb -> 'data' AS data FROM events"
        " WHERE %(a)s = ANY(account_ids) AND kind = %(k)s ORDER BY created_at",
        {"a": user.account_id, "k": kind},
    )
    return [row["data"] for row in rows]


def when(text: str) -> dt.datetime:
    assert TIMESTAMP.match(text), text
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- plans ----------------------------------------------------------------------------------------------------


def test_plans_are_listed_with_price_and_limits(call: Call, candidate: User) -> None:
    page = ok(call("billing.plans.list", candidate))
    assert page == {
        "data": [
            {"name": "free", "price": 0, "currency": "TRY", "per_minute": 60, "per_day": 1000},
            {"name": "pro", "price": 99_000, "currency": "TRY", "per_minute": 300, "per_day": 10_000},
            {"name": "enterprise", "price": 499_000, "currency": "TRY", "per_minute": 1000, "per_day": 100_000},
        ],
        "total": 3,
        "page": 1,
        "per_page": 20,
    }


# --- subscribing ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("plan", ["pro", "enterprise"])
def test_subscribing_creates_pending_objects_and_a_checkout(
    call: Call, fake: FakePayTR, payer: User, plan: str, settings: Any
) -> None:
    made = ok(call("billing.subscriptions.create", payer, plan=plan))
    assert set(made) == {"subscription", "payment", "checkout"}
    subscription, payment, checkout = made["subscription"], made["payment"], made["checkout"]
    assert set(subscription) == SUBSCRIPTION_KEYS and set(payment) == PAYMENT_KEYS
    assert subscription["plan"] == plan and subscription["status"] == "pending"
    assert subscription["current_period_start"] is None and subscription["current_period_end"] is None
    assert payment["status"] == "pending" and payment["subscription_id"] == subscription["id"]
    assert (payment["amount"], payment["currency"], payment["provider"]) == (PRICES[plan], "TRY", "paytr")
    assert MERCHANT_OID.match(payment["merchant_oid"])
    # The fake provider recomputed our paytr_token and issued this token.
    request = fake.requests[-1]
    assert request.verdict == "issued" and request.fields["merchant_oid"] == payment["merchant_oid"]
    assert checkout == {"token": request.token, "url": f"https://www.paytr.com/odeme/guvenli/{request.token}"}
    form = request.fields
    assert form["merchant_id"] == MERCHANT_ID and form["user_ip"] == "127.0.0.1"
    assert form["email"] == payer.email and form["payment_amount"] == str(PRICES[plan])
    assert form["currency"] == "TL" and form["test_mode"] == "1" and form["debug_on"] == "0"
    assert (form["no_installment"], form["max_installment"], form["timeout_limit"]) == ("1", "0", "30")
    basket = json.loads(base64.b64decode(form["user_basket"]))
    assert basket == [[f"Hire API {plan} plan, 30 days", f"{PRICES[plan] // 100}.00", 1]]
    assert form["merchant_ok_url"].startswith(f"{PUBLIC_URL}/")
    assert form["merchant_fail_url"].startswith(f"{PUBLIC_URL}/")
    assert all(form[name] for name in ("user_name", "user_address", "user_phone", "lang"))


def test_a_checkout_sent_again_with_its_idempotency_key_opens_no_second_one(
    client: httpx.Client, fake: FakePayTR, admin: Admin, payer: User
) -> None:
    """The provider is asked once; the replay answers the same subscription, payment and payment page."""
    headers = {**payer.auth, "Idempotency-Key": "checkout-1"}
    asked = len(fake.requests)
    first = client.post("/v1/billing.subscriptions.create", json={"plan": "pro"}, headers=headers)
    again = client.post("/v1/billing.subscriptions.create", json={"plan": "pro"}, headers=headers)
    assert first.status_code == 200 and again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(fake.requests) == asked + 1 and count(admin, "payments", payer) == 1


def test_a_failed_checkout_leaves_its_idempotency_key_free(
    client: httpx.Client, fake: FakePayTR, admin: Admin, payer: User
) -> None:
    headers = {**payer.auth, "Idempotency-Key": "checkout-2"}
    fake.mode = "error"
    assert client.post("/v1/billing.subscriptions.create", json={"plan": "pro"}, headers=headers).status_code == 503
    fake.mode = None
    retried = client.post("/v1/billing.subscriptions.create", json={"plan": "pro"}, headers=headers)
    assert retried.status_code == 200 and "Idempotent-Replayed" not in retried.headers


def test_merchant_oids_are_fresh(call: Call, payer: User) -> None:
    oids = {ok(call("billing.subscriptions.create", payer, plan="pro"))["payment"]["merchant_oid"] for _ in range(5)}
    assert len(oids) == 5


@pytest.mark.parametrize("plan", ["free", "gold", "", None, 1])
def test_only_paid_plans_can_be_subscribed_to(call: Call, payer: User, plan: Any) -> None:
    error = refused(call("billing.subscriptions.create", payer, plan=plan), 422, "invalid_params")
    assert error["details"]["errors"][0]["field"] == "plan"


@pytest.mark.parametrize("mode", ["refuse", "error", "garbage", "drop", "slow"])
def test_a_failing_provider_is_503_and_nothing_is_created(
    call: Call, fake: FakePayTR, admin: Admin, payer: User, mode: str
) -> None:
    fake.mode, fake.delay = mode, 1.5  # slower than the module's PAYTR_TIMEOUT of 1 s
    response = call("billing.subscriptions.create", payer, plan="pro")
    refused(response, 503, "unavailable")
    assert "Retry-After" in response.headers
    assert KEY not in response.text and SALT not in response.text
    assert count(admin, "subscriptions", payer) == 0 and count(admin, "payments", payer) == 0
    assert fake.requests[-1].verdict == mode


class HangingProvider:
    """A socket that accepts every connection and never answers: the payment provider at its worst."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/odeme/api/get-token"
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self._socket.accept()[0])

    def __enter__(self) -> HangingProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._socket.close()
        for held in self.held:
            held.close()


def test_a_hanging_provider_cannot_starve_other_accounts(
    database: str, fake: FakePayTR, admin: Admin, tmp_path: Any
) -> None:
    """Eight checkouts from four accounts wait on a provider that never answers, with a pool of four
    connections: another account is served at once, a third checkout of one account is refused, and the waiting
    ones end as 503 with nothing left behind."""
    buyers = [admin.user("employer", plan="free") for _ in range(4)]
    other = admin.user("employer")
    with HangingProvider() as hanging:
        slow = settings_for(
            database,
            DATA_DIR=str(tmp_path),
            PUBLIC_URL=PUBLIC_URL,
            DB_POOL_MIN="1",
            DB_POOL_MAX="4",
            PAYTR_TIMEOUT="4",
            **{**fake.settings(), "PAYTR_API_URL": hanging.url},
        )
        with LiveServer(slow) as live, live.client() as client, ThreadPoolExecutor(8) as pool:

            def checkout(user: User) -> httpx.Response:
                return client.post("/v1/billing.subscriptions.create", json={"plan": "pro"}, headers=user.auth)

            waiting = [pool.submit(checkout, user) for user in buyers for _ in range(2)]
            eventually(lambda: len(hanging.held) >= 8, "eight checkouts waiting on the provider", timeout=10)
            assert len(hanging.held) == 8, "every checkout is waiting on the provider"
            started = time.monotonic()
            assert client.get("/v1/jobs.list", headers=other.auth).status_code == 200
            assert time.monotonic() - started < 2
            third = refused(checkout(buyers[0]), 409, "conflict")
            assert "waiting" in third["message"]
            for response in waiting:
                refused(response.result(), 503, "unavailable")
    for user in buyers:
        assert count(admin, "payments", user) == 0 and count(admin, "subscriptions", user) == 0


def test_the_panels_upgrade_holds_no_connection_while_the_provider_hangs(
    database: str, fake: FakePayTR, admin: Admin, tmp_path: Any
) -> None:
    """Four upgrades from the panel wait on a provider that never answers, with a pool of two connections: all
    four reach the provider, another account's calls are served meanwhile, and each ends as the page's 503."""
    from tests.test_panel import forms_of, signed_in

    buyers = [admin.user("employer", plan="free") for _ in range(2)]
    other = bearer(admin.api_key(admin.user("employer"), "read:jobs")["key"])  # whatever PUBLIC_URL issues
    with HangingProvider() as hanging:
        slow = settings_for(
            database,
            DATA_DIR=str(tmp_path),
            PUBLIC_URL="http://hire.example.test",  # the panel's cookies over plain HTTP
            DB_POOL_MIN="1",
            DB_POOL_MAX="2",
            DB_POOL_TIMEOUT="1",
            PAYTR_TIMEOUT="3",
            **{**fake.settings(), "PAYTR_API_URL": hanging.url},
        )
        with LiveServer(slow) as live, live.client() as client, ThreadPoolExecutor(4) as pool:

            def upgrade(buyer: User) -> httpx.Response:
                browser = signed_in(live, buyer)
                page = browser.get("/panel/billing")
                form = next(f for f in forms_of(page) if f.action == "/panel/billing/upgrade")
                fields = [(name, "pro" if name == "plan" else value) for name, value in form.fields]
                body = urllib.parse.urlencode(fields)
                form_type = {"Content-Type": "application/x-www-form-urlencoded"}
                return browser.http.post("/panel/billing/upgrade", content=body, headers=form_type)

            waiting = [pool.submit(upgrade, buyer) for buyer in buyers for _ in range(2)]
            eventually(lambda: len(hanging.held) >= 4, "four upgrades waiting on the provider", timeout=10)
            assert client.get("/v1/jobs.list", headers=other).status_code == 200
            answers = [future.result() for future in waiting]
    assert [answer.status_code for answer in answers] == [503] * 4
    assert all("did not answer" in answer.text for answer in answers)
    for user in buyers:
        assert count(admin, "payments", user) == 0


def test_a_wrong_merchant_key_is_refused_by_the_provider(
    database: str, fake: FakePayTR, admin: Admin, tmp_path: Any
) -> None:
    wrong = settings_for(
        database,
        DATA_DIR=str(tmp_path),
        PUBLIC_URL=PUBLIC_URL,
        **{**fake.settings(), "PAYTR_MERCHANT_KEY": "not-the-key"},
    )
    user = admin.user("employer", plan="free")
    with LiveServer(wrong) as live, live.client() as client:
        response = client.post("/v1/billing.subscriptions.create", json={"plan": "pro"}, headers=user.auth)
    refused(response, 503, "unavailable")
    assert fake.requests[-1].verdict == "bad_token"
    assert count(admin, "subscriptions", user) == 0


def test_without_a_provider_the_checkout_is_null(database: str, admin: Admin, tmp_path: Any) -> None:
    user = admin.user("employer", plan="free")
    bare = settings_for(database, DATA_DIR=str(tmp_path), PUBLIC_URL=PUBLIC_URL)
    with LiveServer(bare) as live, live.client() as client:
        response = client.post("/v1/billing.subscriptions.create", json={"plan": "pro"}, headers=user.auth)
    made = ok(response)
    assert made["checkout"] is None
    assert made["subscription"]["status"] == "pending" and made["payment"]["status"] == "pending"


# --- the full flow ----------------------------------------------------------------------------------------------


def test_subscribe_pay_use_and_cancel(client: httpx.Client, call: Call, admin: Admin, payer: User) -> None:
    before = client.get("/v1/profile.me", headers=payer.auth)
    assert before.headers["X-RateLimit-Limit"] == "60"
    made = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, made)
    assert plan_of(admin, payer) == "pro"
    assert client.get("/v1/profile.me", headers=payer.auth).headers["X-RateLimit-Limit"] == "300"

    subscription = ok(call("billing.subscriptions.get", payer, id=made["subscription"]["id"]))
    assert subscription["status"] == "active"
    start, end = when(subscription["current_period_start"]), when(subscription["current_period_end"])
    assert end - start == PERIOD and abs(dt.datetime.now(dt.UTC) - start) < dt.timedelta(minutes=1)
    payment = ok(call("billing.payments.get", payer, id=made["payment"]["id"]))
    assert payment["status"] == "completed" and when(payment["completed_at"])
    invoices = ok(call("billing.invoices.list", payer))
    assert invoices["total"] == 1
    invoice = invoices["data"][0]
    assert set(invoice) == INVOICE_KEYS
    assert re.match(rf"^INV-{dt.datetime.now(dt.UTC).year}-\d{{6}}$", invoice["number"])
    assert (invoice["payment_id"], invoice["amount"], invoice["currency"]) == (payment["id"], 99_000, "TRY")
    assert invoice["line_items"] == [
        {
            "description": "Hire API pro plan, 30 days",
            "plan": "pro",
            "quantity": 1,
            "unit_amount": 99_000,
            "amount": 99_000,
            "period_start": subscription["current_period_start"],
            "period_end": subscription["current_period_end"],
        }
    ]
    assert ok(call("billing.invoices.get", payer, id=invoice["id"])) == invoice
    assert event_data(admin, payer, "billing.invoice.generated") == [
        {
            "invoice_id": invoice["id"],
            "number": invoice["number"],
            "payment_id": payment["id"],
            "amount": 99_000,
            "currency": "TRY",
        }
    ]

    cancelled = ok(call("billing.subscriptions.cancel", payer, id=subscription["id"]))
    assert cancelled["status"] == "cancelled" and when(cancelled["cancelled_at"])
    assert plan_of(admin, payer) == "free"
    assert client.get("/v1/profile.me", headers=payer.auth).headers["X-RateLimit-Limit"] == "60"
    assert event_data(admin, payer, "billing.subscription.cancelled") == [
        {"subscription_id": subscription["id"], "plan": "pro", "status": "cancelled"}
    ]
    assert sorted(kinds(admin, payer)) == [
        "billing.invoice.generated",
        "billing.payment.completed",
        "billing.subscription.cancelled",
        "billing.subscription.created",
    ]
    again = refused(call("billing.subscriptions.cancel", payer, id=subscription["id"]), 409, "invalid_transition")
    assert again["details"] == {"from": "cancelled", "to": "cancelled"}
    assert admin.plan_changes(payer.account_id) == [BY_PAYTR, ("user", payer.user_id)]


def test_renewal_extends_the_active_period(client: httpx.Client, call: Call, admin: Admin, payer: User) -> None:
    first = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, first)
    active = ok(call("billing.subscriptions.get", payer, id=first["subscription"]["id"]))
    renewal = ok(call("billing.subscriptions.create", payer, plan="pro"))
    assert renewal["subscription"]["id"] == active["id"] and renewal["subscription"]["status"] == "active"
    assert renewal["payment"]["id"] != first["payment"]["id"] and renewal["payment"]["status"] == "pending"
    assert renewal["checkout"] is not None
    pay(client, renewal)
    renewed = ok(call("billing.subscriptions.get", payer, id=active["id"]))
    assert renewed["status"] == "active"
    assert renewed["current_period_start"] == active["current_period_start"]
    assert when(renewed["current_period_end"]) == when(active["current_period_end"]) + PERIOD
    assert ok(call("billing.subscriptions.list", payer))["total"] == 1
    assert plan_of(admin, payer) == "pro"
    invoices = ok(call("billing.invoices.list", payer))["data"]
    assert len(invoices) == 2
    newest = invoices[0]["line_items"][0]
    assert (newest["period_start"], newest["period_end"]) == (
        active["current_period_end"],
        renewed["current_period_end"],
    )
    # A renewal is no new subscription: one `created`, two payments and two invoices; and no change of plan.
    assert sorted(kinds(admin, payer)) == sorted(
        ["billing.subscription.created"] + ["billing.payment.completed", "billing.invoice.generated"] * 2
    )
    assert admin.plan_changes(payer.account_id) == [BY_PAYTR]


def test_a_failed_renewal_keeps_the_subscription_running(
    client: httpx.Client, call: Call, admin: Admin, payer: User
) -> None:
    first = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, first)
    renewal = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, renewal, status="failed")
    assert ok(call("billing.payments.get", payer, id=renewal["payment"]["id"]))["status"] == "failed"
    assert ok(call("billing.subscriptions.get", payer, id=first["subscription"]["id"]))["status"] == "active"
    assert plan_of(admin, payer) == "pro"


def test_a_new_plan_replaces_the_active_one(client: httpx.Client, call: Call, admin: Admin, payer: User) -> None:
    pro = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, pro)
    enterprise = ok(call("billing.subscriptions.create", payer, plan="enterprise"))
    assert enterprise["subscription"]["id"] != pro["subscription"]["id"]
    assert enterprise["subscription"]["status"] == "pending"
    assert plan_of(admin, payer) == "pro", "nothing changes before the payment completes"
    pay(client, enterprise)
    assert plan_of(admin, payer) == "enterprise"
    assert ok(call("billing.subscriptions.get", payer, id=pro["subscription"]["id"]))["status"] == "cancelled"
    assert ok(call("billing.subscriptions.get", payer, id=enterprise["subscription"]["id"]))["status"] == "active"
    assert event_data(admin, payer, "billing.subscription.cancelled") == [
        {"subscription_id": pro["subscription"]["id"], "plan": "pro", "status": "cancelled"}
    ]
    assert admin.plan_changes(payer.account_id) == [BY_PAYTR, BY_PAYTR]


def test_failed_and_underpaid_payments(client: httpx.Client, call: Call, admin: Admin, payer: User) -> None:
    failed = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, failed, status="failed")
    payment = ok(call("billing.payments.get", payer, id=failed["payment"]["id"]))
    assert (payment["status"], payment["failed_reason"]) == ("failed", "declined")
    assert ok(call("billing.subscriptions.get", payer, id=failed["subscription"]["id"]))["status"] == "failed"

    short = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, short, total=99_000 - 100)
    payment = ok(call("billing.payments.get", payer, id=short["payment"]["id"]))
    assert (payment["status"], payment["failed_reason"]) == ("failed", "amount_mismatch")
    assert ok(call("billing.subscriptions.get", payer, id=short["subscription"]["id"]))["status"] == "failed"
    assert plan_of(admin, payer) == "free"
    assert ok(call("billing.invoices.list", payer))["total"] == 0
    reasons = [data["failed_reason"] for data in event_data(admin, payer, "billing.payment.failed")]
    assert sorted(reasons) == ["amount_mismatch", "declined"]
    # Neither a failed nor a cancelled-after-failure subscription can be cancelled.
    refused(call("billing.subscriptions.cancel", payer, id=failed["subscription"]["id"]), 409, "invalid_transition")


def test_a_pending_subscription_can_be_cancelled(client: httpx.Client, call: Call, admin: Admin, payer: User) -> None:
    pro = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, pro)
    pending = ok(call("billing.subscriptions.create", payer, plan="enterprise"))
    cancelled = ok(call("billing.subscriptions.cancel", payer, id=pending["subscription"]["id"]))
    assert cancelled["status"] == "cancelled"
    assert plan_of(admin, payer) == "pro", "cancelling a pending subscription leaves the active one alone"
    # Paid anyway (the buyer was already on the payment page): completed, invoiced, flagged; nothing revived.
    pay(client, pending)
    assert ok(call("billing.payments.get", payer, id=pending["payment"]["id"]))["status"] == "completed"
    flagged = admin.sql("SELECT flagged_for_review FROM payments WHERE id = %(id)s", {"id": pending["payment"]["id"]})
    assert flagged == [{"flagged_for_review": True}]
    assert ok(call("billing.subscriptions.get", payer, id=pending["subscription"]["id"]))["status"] == "cancelled"
    assert plan_of(admin, payer) == "pro"
    assert ok(call("billing.invoices.list", payer))["total"] == 2


# --- invoice numbers ---------------------------------------------------------------------------------------------


def test_invoice_numbers_run_without_gaps(client: httpx.Client, call: Call, admin: Admin) -> None:
    buyers = [admin.user("employer", plan="free") for _ in range(5)]
    orders = [ok(call("billing.subscriptions.create", buyer, plan="pro")) for buyer in buyers]
    with ThreadPoolExecutor(5) as pool:
        list(pool.map(lambda made: pay(client, made), orders))
    numbers = []
    for buyer in buyers:
        (invoice,) = ok(call("billing.invoices.list", buyer))["data"]
        numbers.append(int(invoice["number"].rsplit("-", 1)[1]))
    assert sorted(numbers) == list(range(min(numbers), min(numbers) + 5))
    every = sorted(int(row["number"].rsplit("-", 1)[1]) for row in admin.sql("SELECT number FROM invoices"))
    assert every == list(range(1, len(every) + 1)), "no gap in the whole year's numbering"


# --- who sees what ----------------------------------------------------------------------------------------------------


def test_other_accounts_objects_are_not_found(client: httpx.Client, call: Call, admin: Admin, payer: User) -> None:
    made = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, made)
    invoice = ok(call("billing.invoices.list", payer))["data"][0]
    stranger = admin.user("employer")
    targets = {
        "billing.subscriptions.get": made["subscription"]["id"],
        "billing.subscriptions.cancel": made["subscription"]["id"],
        "billing.payments.get": made["payment"]["id"],
        "billing.invoices.get": invoice["id"],
    }
    for name, object_id in targets.items():
        refused(call(name, stranger, id=object_id), 404, "not_found")
        refused(call(name, payer, id="not-an-id"), 404, "not_found")
        refused(call(name, payer, id=12), 404, "not_found")
    for name in ("billing.subscriptions.list", "billing.payments.list", "billing.invoices.list"):
        assert ok(call(name, stranger)) == {"data": [], "total": 0, "page": 1, "per_page": 20}
    assert ok(call("billing.subscriptions.get", payer, id=made["subscription"]["id"]))["status"] == "active"


def test_a_colleague_and_the_accounts_admin_share_its_billing(call: Call, admin: Admin, payer: User) -> None:
    made = ok(call("billing.subscriptions.create", payer, plan="pro"))
    colleague = admin.user("employer", account_id=payer.account_id)
    assert ok(call("billing.payments.get", colleague, id=made["payment"]["id"]))["id"] == made["payment"]["id"]
    operator = admin.user("admin")
    refused(call("billing.payments.get", operator, id=made["payment"]["id"]), 404, "not_found")


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("billing.subscriptions.create", {"plan": "pro"}),
        ("billing.subscriptions.cancel", {"id": "00000000-0000-0000-0000-000000000000"}),
        ("billing.subscriptions.list", {}),
        ("billing.subscriptions.get", {"id": "00000000-0000-0000-0000-000000000000"}),
        ("billing.payments.list", {}),
        ("billing.payments.get", {"id": "00000000-0000-0000-0000-000000000000"}),
        ("billing.invoices.list", {}),
        ("billing.invoices.get", {"id": "00000000-0000-0000-0000-000000000000"}),
    ],
)
def test_candidates_may_not_touch_billing(call: Call, candidate: User, name: str, params: dict[str, Any]) -> None:
    refused(call(name, candidate, **params), 403, "forbidden")


def test_scopes_of_api_keys(client: httpx.Client, admin: Admin, payer: User) -> None:
    reader = admin.api_key(payer, scopes="read:billing")["key"]
    headers = {"Authorization": f"Bearer {reader}"}
    assert client.post("/v1/billing.payments.list", json={}, headers=headers).status_code == 200
    refused(
        client.post("/v1/billing.subscriptions.create", json={"plan": "pro"}, headers=headers),
        403,
        "insufficient_scope",
    )


def test_lists_page_newest_first(call: Call, payer: User) -> None:
    made = [ok(call("billing.subscriptions.create", payer, plan="pro")) for _ in range(3)]
    first = ok(call("billing.payments.list", payer, per_page=2))
    second = ok(call("billing.payments.list", payer, per_page=2, page=2))
    assert (first["total"], second["total"], first["per_page"], second["page"]) == (3, 3, 2, 2)
    ids = [payment["id"] for payment in first["data"] + second["data"]]
    assert sorted(ids) == sorted(order["payment"]["id"] for order in made)
    assert len(set(ids)) == 3


# --- expiry --------------------------------------------------------------------------------------------------------


def _expire(database: str, settings: Any) -> None:
    """One run of the periodic expiry, in one transaction, as the framework runs it."""

    async def go() -> None:
        emitter = emitter_for(settings)
        async with await ops.connect(database) as conn, conn.transaction():
            await settlement.EXPIRY.run(conn, emitter)

    asyncio.run(go())


def _end_period(admin: Admin, subscription_id: str) -> None:
    admin.sql(
        "UPDATE subscriptions SET current_period_start = now() - interval '31 days',"
        " current_period_end = now() - interval '1 second' WHERE id = %(id)s",
        {"id": subscription_id},
    )


def test_an_unpaid_period_expires(
    client: httpx.Client, call: Call, admin: Admin, payer: User, database: str, settings: Any
) -> None:
    made = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, made)
    bystander = admin.user("employer", plan="free")
    running = ok(call("billing.subscriptions.create", bystander, plan="pro"))
    pay(client, running)
    _end_period(admin, made["subscription"]["id"])
    _expire(database, settings)
    assert ok(call("billing.subscriptions.get", payer, id=made["subscription"]["id"]))["status"] == "expired"
    assert plan_of(admin, payer) == "free"
    assert client.get("/v1/profile.me", headers=payer.auth).headers["X-RateLimit-Limit"] == "60"
    assert event_data(admin, payer, "billing.subscription.cancelled") == [
        {"subscription_id": made["subscription"]["id"], "plan": "pro", "status": "expired"}
    ]
    assert ok(call("billing.subscriptions.get", bystander, id=running["subscription"]["id"]))["status"] == "active"
    assert plan_of(admin, bystander) == "pro"
    _expire(database, settings)
    assert len(event_data(admin, payer, "billing.subscription.cancelled")) == 1, "expired once"
    assert admin.plan_changes(payer.account_id) == [BY_PAYTR, BY_EXPIRY]
    refused(call("billing.subscriptions.cancel", payer, id=made["subscription"]["id"]), 409, "invalid_transition")


def test_expiry_skips_a_subscription_in_use_and_takes_it_next_time(
    client: httpx.Client, call: Call, admin: Admin, payer: User, database: str, settings: Any
) -> None:
    made = ok(call("billing.subscriptions.create", payer, plan="pro"))
    pay(client, made)
    _end_period(admin, made["subscription"]["id"])
    with psycopg.connect(database) as holder:  # a notification renewing it right now, say
        holder.execute("SELECT 1 FROM subscriptions WHERE id = %s FOR UPDATE", (made["subscription"]["id"],))
        _expire(database, settings)
        assert plan_of(admin, payer) == "pro"
    _expire(database, settings)
    assert ok(call("billing.subscriptions.get", payer, id=made["subscription"]["id"]))["status"] == "expired"
    assert plan_of(admin, payer) == "free"


def test_expiry_works_in_batches(admin: Admin, database: str, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settlement, "EXPIRY_BATCH", 2)
    users = [admin.user("employer", plan="pro") for _ in range(5)]
    for user in users:
        admin.sql(
            "INSERT INTO subscriptions (account_id, plan, status, current_period_start, current_period_end)"
            " VALUES (%(a)s, 'pro', 'active', now() - interval '31 days', now() - interval '1 day')",
            {"a": user.account_id},
        )
    _expire(database, settings)
    assert [plan_of(admin, user) for user in users] == ["free"] * 5
    assert all(event_data(admin, user, "billing.subscription.cancelled") for user in users)
    assert [admin.plan_changes(user.account_id) for user in users] == [[BY_ADMIN, BY_EXPIRY]] * 5


def test_an_operators_set_plan_is_audited_only_when_the_plan_changes(admin: Admin) -> None:
    """`bin/admin set-plan` goes through the same change as payments and expiry: the plan it already has, or
    the same command twice, records nothing."""
    user = admin.user("employer", plan="free")
    for plan in ("free", "pro", "pro", "enterprise"):
        admin.set_plan(user, plan)
    assert plan_of(admin, user) == "enterprise"
    assert admin.plan_changes(user.account_id) == [BY_ADMIN, BY_ADMIN]


def test_the_expiry_is_scheduled(settings: Any) -> None:
    handed_over = business(settings)
    periodic = handed_over.periodic["expire_subscriptions"]
    assert periodic.cron == "* * * * *" and periodic.run is settlement.expire_subscriptions
    assert isinstance(handed_over.providers["paytr"], provider.PayTR)


def test_the_workers_run_the_expiry(databases: Databases, tmp_path: Any) -> None:
    """Through the queue's periodic hook: a worker starting on a database defers the current minute's tick."""
    url = databases.copy()
    settings = settings_for(url, DATA_DIR=str(tmp_path))
    admin = Admin(url, settings)
    user = admin.user("employer", plan="pro")
    admin.sql(
        "INSERT INTO subscriptions (account_id, plan, status, current_period_start, current_period_end)"
        " VALUES (%(a)s, 'pro', 'active', now() - interval '31 days', now() - interval '1 day')",
        {"a": user.account_id},
    )
    with LiveServer(settings):
        eventually(lambda: plan_of(admin, user) == "free", "the subscription's expiry", timeout=30)
    assert plan_of(admin, user) == "free"
    assert admin.sql("SELECT status FROM subscriptions WHERE account_id = %(a)s", {"a": user.account_id}) == [
        {"status": "expired"}
    ]
    assert [data["status"] for data in event_data(admin, user, "billing.subscription.cancelled")] == ["expired"]
