"""What a newcomer meets in their first hour on a local install (no payment provider, development budgets):
each place they used to get lost now says the way on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.browser import Browser, forms, text
from tests.support import Admin, LiveServer, User


@pytest.fixture
def browser(live: LiveServer, employer: User) -> Iterator[Browser]:
    made = Browser(live.url)
    assert made.sign_in(employer).status_code == 303
    yield made
    made.close()


def count(admin: Admin, table: str, user: User) -> int:
    return int(admin.sql(f"SELECT count(*) AS n FROM {table} WHERE account_id = %(a)s", {"a": user.account_id})[0]["n"])


def test_upgrade_without_a_provider_says_how_and_makes_nothing(browser: Browser, admin: Admin, employer: User) -> None:
    page = browser.get("/panel/billing")
    [pro] = [f for f in forms(page.text) if f.action == "/panel/billing/upgrade" and ("plan", "pro") in f.fields]
    for _ in range(2):
        answer = browser.http.post("/panel/billing/upgrade", data=dict(pro.fields))
        assert answer.status_code == 409
        shown = text(answer)
        assert "No payment provider is configured" in shown and "nothing was created" in shown
        assert "PAYTR_MERCHANT_ID" in shown and "bin/admin set-plan --email" in shown
    assert count(admin, "subscriptions", employer) == 0 and count(admin, "payments", employer) == 0


def test_signing_in_unconfirmed_says_where_to_get_a_new_link(client: httpx.Client) -> None:
    email = f"unconfirmed-{uuid.uuid4().hex[:8]}@example.com"
    signed_up = client.post(
        "/auth/signup", json={"email": email, "password": "a long enough password", "role": "employer"}
    )
    assert signed_up.status_code == 202
    answer = client.post("/auth/login", json={"email": email, "password": "a long enough password"})
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "email_not_verified"
    assert "ask for a new one by signing in at /web/signin" in answer.json()["error"]["message"]
