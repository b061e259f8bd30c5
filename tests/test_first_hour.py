"""What a newcomer meets in their first hour on a local install (no payment provider, development budgets):
each place they used to get lost now says the way on."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import httpx
import pytest

from procedures.vocabulary import SUGGESTED_EVENT_KINDS, SUGGESTED_KEY_SCOPES
from rpc.settings import Settings
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


def test_the_front_page_leads_to_sign_up_and_sign_in(client: httpx.Client) -> None:
    page = client.get("/")
    assert 'href="/web/signup"' in page.text and 'href="/web/signin"' in page.text


def test_check_your_email_names_the_local_mail_folder(client: httpx.Client, settings: Settings) -> None:
    """Without SMTP_URL, outside production, the mail is a file: the page says where (its link is in the log)."""
    browser = Browser(str(client.base_url))
    try:
        page = browser.get("/web/signup")
        fill = {"email": "eml@example.com", "password": "a long enough password", "role": "candidate"}
        answer = browser.submit(page, "/web/signup", fill=fill)
        assert answer.status_code == 200 and "Check your e-mail" in text(answer)
        assert f"written as an .eml file in {settings.data_path / 'mail'}" in text(answer)
    finally:
        browser.close()


def test_the_webhook_form_starts_ticked_and_an_empty_choice_gets_one_error(browser: Browser) -> None:
    page = browser.get("/panel/webhooks")
    ticked = re.findall(r'<input type="checkbox" name="event_kinds" value="([^"]+)" checked>', page.text)
    assert ticked == list(SUGGESTED_EVENT_KINDS)
    # (tests.browser's forms send no checkbox: every box unticked)
    answer = browser.submit(page, "/panel/webhooks", fill={"url": "https://hooks.example.com/x"})
    assert answer.status_code == 400
    assert "Choose at least one event kind: the endpoint receives only those." in text(answer)
    assert "choose among" not in text(answer), "not a list of every kind"


def test_the_key_form_starts_with_what_a_first_integration_needs(browser: Browser) -> None:
    page = browser.get("/panel/api-keys")
    ticked = re.findall(r'<input type="checkbox" name="scopes" value="([^"]+)" checked>', page.text)
    assert ticked == list(SUGGESTED_KEY_SCOPES), "jobs.create needs write:jobs"


def test_the_profile_page_shows_and_edits_location_and_bio(
    live: LiveServer, candidate: User, client: httpx.Client
) -> None:
    browser = Browser(live.url)
    try:
        browser.sign_in(candidate)
        page = browser.get("/panel/profile")
        fill = {"display_name": "Ada", "headline": "", "location": "İzmir", "bio": "Backend engineer.\nLikes SQL."}
        saved = browser.submit(page, "/panel/profile", fill=fill)
        assert saved.status_code == 303
        shown = browser.get("/panel/profile")
        assert (
            'name="location" value="İzmir"' in shown.text and ">Backend engineer.\nLikes SQL.</textarea>" in shown.text
        )
        me = client.get("/v1/profile.me", headers=candidate.auth).json()["result"]
        assert (me["location"], me["bio"]) == ("İzmir", "Backend engineer.\nLikes SQL.")
        refused = browser.submit(shown, "/panel/profile", fill={**fill, "bio": "x" * 5_001})
        assert refused.status_code == 400 and "Use at most 5,000 characters" in text(refused)
    finally:
        browser.close()


def test_a_hiring_member_turns_the_mail_of_new_applications_off_and_on(
    browser: Browser, employer: User, candidate: User, live: LiveServer, client: httpx.Client
) -> None:
    """The profile's check box is `profile.update`'s `notify_new_applications`, shown to employers and admins only
    (a candidate has no applications to be told of). An unticked box is not sent: the browser sends nothing."""
    page = browser.get("/panel/profile")
    assert 'name="notify_new_applications" value="on" checked' in page.text
    browser.submit(page, "/panel/profile")
    assert client.get("/v1/profile.me", headers=employer.auth).json()["result"]["notify_new_applications"] is False
    browser.submit(browser.get("/panel/profile"), "/panel/profile", fill={"notify_new_applications": "on"})
    assert client.get("/v1/profile.me", headers=employer.auth).json()["result"]["notify_new_applications"] is True
    seeker = Browser(live.url)
    try:
        seeker.sign_in(candidate)
        assert "notify_new_applications" not in seeker.get("/panel/profile").text
    finally:
        seeker.close()
