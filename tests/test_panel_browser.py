"""The panel in a real browser: Debian's headless Chromium driven by Playwright (never `playwright install`).

A person signs in, creates an API key, reads it off the page and calls the API with it, revokes it and sees
the call refused; adds a webhook endpoint that points at a receiver on the loopback, sends a test event and
watches it arrive in the delivery log with status 200; makes the receiver fail, redelivers from the page and
sees the new attempt; registers an OAuth application; and does it with the keyboard alone. Any console error
(a Content-Security-Policy violation included) fails the test. Screenshots of each Settings page are saved
under tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Response, expect, sync_playwright

from rpc.mail.outbox import Mail
from rpc.ops import admin as ops
from rpc.worker.disabling import disable_failing
from tests.chromium import off_loop
from tests.receiver import Receiver, Reply
from tests.support import Admin, LiveServer, User, bearer, emitter_for, settings_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).parent / "artifacts"
TIMEOUT_MS = 20_000
ATTEMPT_ROWS = "table.attempts tbody tr:not(.attempt-headers)"  # each attempt's row, without its headers' row
FAVICON = "/favicon.ico"  # browsers ask for it by themselves; the site has none (a 404 that is no page's fault)


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two delivery attempts 0.2 s apart, so that a failing receiver fails a delivery within the test."""
    return settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
        SIGNIN_LIMIT_PER_EMAIL="100000/minute",
        WEBHOOK_RETRY_WAITS="0,0.2",
        WEBHOOK_TIMEOUT="3",
    )


@pytest.fixture(scope="module")
def ada(admin: Admin) -> User:
    """An employer of Acme Recruiting, on the pro plan."""

    def make() -> User:
        password = "correct horse battery"
        ids = admin.run(
            ops.create_user,
            email="ada@acme.example",
            password=password,
            role="employer",
            account_name="Acme Recruiting",
        )
        user = User(ids["user_id"], ids["account_id"], "ada@acme.example", password, "employer", "")
        admin.set_plan(user, "pro")
        return user

    return off_loop(make)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (Debian's package; .ci/run installs it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Browser, live: LiveServer) -> Iterator[Page]:
    """A fresh browser profile on the live server; fails the test on any console error or page error."""
    context = chromium.new_context(base_url=live.url, viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    problems: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.location.get("url", "").endswith(FAVICON):
            problems.append(f"{message.text} ({message.location.get('url')})")

    def response(answer: Response) -> None:
        if answer.status >= 400 and not answer.url.endswith(FAVICON):
            problems.append(f"{answer.status} {answer.url}")

    opened.on("console", console)
    opened.on("pageerror", lambda error: problems.append(str(error)))
    opened.on("response", response)
    yield opened
    context.close()
    assert not problems, f"console errors (CSP violations?): {problems}"


@pytest.fixture
def api(live: LiveServer) -> Iterator[httpx.Client]:
    with live.client() as client:
        yield client


def sign_in(page: Page, user: User) -> None:
    page.goto("/panel")
    expect(page).to_have_url(re.compile(r"/web/signin\?next=%2Fpanel$"))
    page.get_by_label("E-mail", exact=True).fill(user.email)
    page.get_by_label("Password", exact=True).fill(user.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/panel$"))


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def first_delivery(page: Page, status: str, timeout_s: float = 20) -> Any:
    """The newest row of the delivery log once it shows `status` (reloading, as a person would)."""
    for _ in range(int(timeout_s / 0.25)):
        row = page.locator("table.log tbody tr").first
        if row.count() and status in row.inner_text():
            return row
        page.wait_for_timeout(250)
        page.get_by_role("link", name="Refresh").click()
    raise AssertionError(f"no {status} delivery on top of the log: {page.locator('table.log').inner_text()}")


def test_create_an_api_key_use_it_and_revoke_it(page: Page, ada: User, api: httpx.Client) -> None:
    sign_in(page, ada)
    expect(page.get_by_role("heading", level=1)).to_have_text("Acme Recruiting")
    expect(page.get_by_text("pro plan")).to_be_visible()

    page.get_by_role("navigation", name="Panel").get_by_role("link", name="API keys").click()
    expect(page).to_have_url(re.compile(r"/panel/api-keys$"))
    page.get_by_label("Name", exact=True).fill("CI pipeline")
    page.get_by_role("radio", name=re.compile("^Live")).check()
    page.get_by_role("checkbox", name=re.compile("^read:jobs")).check()
    page.get_by_role("checkbox", name=re.compile("^write:jobs")).check()
    page.get_by_role("button", name="Create key").click()

    expect(page.get_by_text("it will not be shown again")).to_be_visible()
    key = page.get_by_label("API key", exact=True).input_value()
    assert re.fullmatch(r"service_live_[A-Za-z0-9]{38}", key)
    copy = page.locator("button[data-copy='new-key']")
    expect(copy).to_have_accessible_name("Copy")
    expect(copy).to_be_visible()  # our script ran under the page's CSP
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == key
    screenshot(page, "panel-api-keys")

    assert api.get("/v1/jobs.list", headers=bearer(key)).status_code == 200
    page.get_by_role("link", name="Overview").click()
    expect(page.get_by_text("1 of 300 requests")).to_be_visible()  # the call counts against the plan
    screenshot(page, "panel-overview")

    page.goto("/panel/api-keys")
    assert key not in page.content(), "shown once"
    page.get_by_role("link", name="Revoke CI pipeline").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Revoke the key")
    page.get_by_role("button", name="Revoke key").click()
    expect(page.get_by_role("status").first).to_contain_text("The key was revoked")
    refused = api.get("/v1/jobs.list", headers=bearer(key))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"


def test_a_webhook_gets_a_test_event_and_a_failed_one_is_redelivered(page: Page, ada: User, receiver: Receiver) -> None:
    hook = receiver.hook(default=Reply(200, b"ok, got it"))
    sign_in(page, ada)
    page.get_by_role("link", name="Webhooks").click()
    page.get_by_label("URL", exact=True).fill(hook.url)
    page.get_by_role("checkbox", name="job.published").check()
    page.get_by_role("checkbox", name="application.status_changed").check()
    page.get_by_role("button", name="Add endpoint").click()

    secret = page.get_by_label("Secret", exact=True).input_value()
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret)
    hook.know(secret)  # the receiver checks X-Service-Signature like a customer's would

    page.get_by_role("button", name="Send a test event").click()
    expect(page.get_by_role("status").first).to_contain_text("webhook.test event is on its way")
    row = first_delivery(page, "succeeded")
    cells = row.inner_text()
    assert "webhook.test" in cells and "200" in cells
    received = hook.wait_for(1)
    assert received[0].valid and received[0].envelope["event"] == "webhook.test"
    endpoint_page = page.url.partition("?")[0]

    hook.answer(default=Reply(500, b"database is down"))  # the receiver breaks
    page.get_by_role("button", name="Send a test event").click()
    failed = first_delivery(page, "failed")
    expect(failed.locator("td").nth(3)).to_have_text("2")  # attempts
    expect(failed.locator("td").nth(4)).to_have_text("500")  # last status code
    failed.get_by_role("link", name="Details").click()
    attempts = page.locator(ATTEMPT_ROWS)
    expect(attempts).to_have_count(2)
    expect(attempts.nth(1)).to_contain_text("receiver answered 500")
    expect(attempts.nth(1)).to_contain_text("database is down")
    page.get_by_text("Headers sent in attempt 2").click()  # a <details>: no script needed
    expect(page.locator("#attempt-2-headers")).to_contain_text("webhook-signature: v1,")
    screenshot(page, "panel-webhook-delivery")

    hook.answer(default=Reply(200, b"back again"))  # fixed: redeliver from the page
    page.get_by_role("button", name="Redeliver", exact=True).click()
    expect(page.get_by_role("status").first).to_contain_text("queued again")
    newest = first_delivery(page, "succeeded")
    newest.get_by_role("link", name="Details").click()
    expect(page.locator(ATTEMPT_ROWS)).to_have_count(1)
    expect(page.locator(ATTEMPT_ROWS).first).to_contain_text("200")
    expect(page.locator(ATTEMPT_ROWS).first).to_contain_text("back again")
    bodies = [request.body for request in hook.wait_for(4)]
    assert bodies[1] == bodies[2] == bodies[3], "the redelivery sent the failed attempts' exact bytes"
    assert page.locator("#delivery-body").inner_text().encode() == bodies[3]

    page.goto(endpoint_page)
    expect(page.locator("table.log tbody tr")).to_have_count(3)
    expect(page.locator("table.log tbody tr").nth(1)).to_contain_text("redelivered")
    screenshot(page, "panel-webhooks")
    page.get_by_role("link", name="Webhooks").first.click()
    expect(page.locator("table tbody tr").first).to_contain_text("succeeded")
    screenshot(page, "panel-webhooks-list")


def test_register_an_oauth_app(page: Page, ada: User) -> None:
    sign_in(page, ada)
    page.get_by_role("link", name="OAuth apps").click()
    page.get_by_label("Name", exact=True).fill("Acme Sync")
    page.get_by_label("Redirect URIs", exact=True).fill("https://sync.acme.example/oauth/callback")
    page.get_by_role("radio", name=re.compile("^Confidential")).check()
    page.get_by_role("button", name="Register application").click()
    expect(page.get_by_text("Copy the client secret now")).to_be_visible()
    assert page.get_by_label("Client ID", exact=True).input_value().startswith("app_")
    assert page.get_by_label("Client secret", exact=True).input_value().startswith("hsec_")
    expect(page.get_by_role("row", name=re.compile("Acme Sync"))).to_be_visible()
    screenshot(page, "panel-oauth-apps")

    page.get_by_role("link", name="Authorized apps").first.click()
    expect(page.get_by_text("You have not authorized any application")).to_be_visible()


def test_download_my_data_then_find_it_in_the_audit_log(page: Page, ada: User) -> None:
    sign_in(page, ada)
    page.get_by_role("link", name="Profile").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download my data").click()
    assert re.fullmatch(r"hire-export-\d{4}-\d\d-\d\d\.json", download.value.suggested_filename)
    document = json.loads(Path(download.value.path()).read_text())
    assert document["profile"]["email"] == ada.email and document["audit"][0]["action"] == "profile.exported"
    page.get_by_role("link", name="Audit log").click()
    expect(page).to_have_url(re.compile(r"/panel/audit-log$"))
    newest = page.locator("table.log tbody tr").first
    expect(newest).to_contain_text("profile.exported")
    expect(newest).to_contain_text(ada.email)
    page.get_by_label("Action").select_option("signin.succeeded")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"/panel/audit-log\?action=signin\.succeeded&actor_id=&since=$"))
    assert set(page.locator("table.log tbody tr td:nth-child(3)").all_inner_texts()) == {"signin.succeeded"}
    screenshot(page, "panel-audit-log")


def test_the_keyboard_alone_is_enough(page: Page, ada: User) -> None:
    """Sign in and create a key without the mouse: every control is reachable with Tab and works with Enter
    or Space, in a sensible order."""
    page.goto("/panel/api-keys")
    expect(page.get_by_label("E-mail", exact=True)).to_be_focused()  # autofocus
    page.keyboard.type(ada.email)
    page.keyboard.press("Tab")
    page.keyboard.type(ada.password)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/panel/api-keys$"))

    def tab_to(predicate: str, limit: int = 80) -> None:
        for _ in range(limit):
            page.keyboard.press("Tab")
            if page.evaluate(f"(() => {{ const e = document.activeElement; return {predicate}; }})()"):
                return
        raise AssertionError(f"Tab never reached {predicate}")

    tab_to("e.id === 'key-name'")
    page.keyboard.type("Keyboard key")
    tab_to("e.name === 'scopes' && e.value === 'read:profile'")
    page.keyboard.press("Space")
    tab_to("e.tagName === 'BUTTON' && e.textContent.trim() === 'Create key'")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=re.compile("Your new key"))).to_be_visible()
    focused = page.evaluate("document.activeElement.getAttribute('aria-labelledby')")
    assert focused == "new-key-heading", "focus moves to the new key"
    page.keyboard.press("Tab")
    expect(page.get_by_label("API key", exact=True)).to_be_focused()
    assert page.evaluate("window.getSelection().toString() || document.activeElement.selectionEnd") != 0


# Every visible item of the header, with its box: one row means every item's vertical middle is within a few
# pixels of the others'; nothing may stick out of the 375 px viewport either.
HEADER_ITEMS = """
() => [...document.querySelectorAll('header.bar > *, header.bar nav > *')]
    .filter((e) => e.tagName !== 'NAV' && e.getClientRects().length && e.getBoundingClientRect().width > 1)
    .map((e) => {
        const r = e.getBoundingClientRect();
        return {text: e.textContent.trim(), mid: (r.top + r.bottom) / 2, right: r.right};
    })
"""


def test_the_header_links_the_api_reference_and_stays_one_row_on_a_phone(page: Page, ada: User) -> None:
    page.set_viewport_size({"width": 375, "height": 740})
    sign_in(page, ada)
    pages = ("/panel", "/panel/api-keys", "/panel/webhooks", "/panel/oauth-apps", "/panel/audit-log", "/panel/billing")
    for path in pages:
        page.goto(path)
        items = page.evaluate(HEADER_ITEMS)
        texts = [item["text"] for item in items]
        assert "API reference" in texts and "Sign out" in texts, texts
        middles = [item["mid"] for item in items]
        assert max(middles) - min(middles) < 4, f"{path}: the header wraps at 375 px: {items}"
        assert max(item["right"] for item in items) <= 375, f"{path}: the header is wider than the phone: {items}"
    screenshot(page, "panel-phone-header")
    page.get_by_role("link", name="API reference").click()
    expect(page).to_have_url(re.compile(r"/docs$"))


def test_a_receiver_that_failed_then_recovered_gets_every_event_again(
    page: Page, ada: User, admin: Admin, receiver: Receiver
) -> None:
    """An endpoint fails for long enough to be disabled; the person enables it and recovers from the page, twice:
    each failed event arrives once more, with its webhook-id."""
    hook = receiver.hook(default=Reply(503, b"maintenance"))
    sign_in(page, ada)
    page.get_by_role("link", name="Webhooks").click()
    page.get_by_label("URL", exact=True).fill(hook.url)
    page.get_by_role("checkbox", name="job.published").check()
    page.get_by_role("button", name="Add endpoint").click()
    hook.know(page.get_by_label("Secret", exact=True).input_value())
    endpoint_page = page.url.partition("?")[0]
    for _ in range(2):
        page.get_by_role("button", name="Send a test event").click()
        first_delivery(page, "failed")
    failed = {request.envelope["idempotency_key"] for request in hook.received()}
    assert len(failed) == 2

    shrunk = settings_for(admin.database_url, WEBHOOK_DISABLE_AFTER_DAYS="0.000001")
    endpoint_id = endpoint_page.rsplit("/", 1)[1]
    assert endpoint_id in off_loop(admin.run, _disable_failing, shrunk)
    page.goto(endpoint_page)
    expect(page.locator("#disabled-for-failing")).to_contain_text("every attempt to it had failed")
    page.get_by_role("button", name="Enable").click()
    expect(page.get_by_role("status").first).to_contain_text("The endpoint is enabled")

    hook.answer(default=Reply(200, b"back"))
    an_hour_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    page.get_by_label("Every delivery that failed since (UTC)").fill(an_hour_ago)  # events are kept 30 days
    page.get_by_role("button", name="Redeliver failed").click()
    expect(page.get_by_role("status").first).to_contain_text("2 failed deliveries since that time were queued again")
    page.get_by_role("button", name="Redeliver failed").click()
    expect(page.get_by_role("status").first).to_contain_text("No failed delivery since that time")
    recovered = [request for request in hook.wait_for(6) if request.status == 200]
    assert sorted(r.envelope["idempotency_key"] for r in recovered) == sorted(failed), "each event once more"
    assert all(r.headers["webhook-id"] == r.envelope["idempotency_key"] for r in recovered)
    screenshot(page, "panel-webhook-recovered")


async def _disable_failing(conn: Any, settings: Any) -> list[str]:
    """The workers' periodic disabling, run now with `settings`' period."""
    async with conn.transaction():
        return await disable_failing(conn, settings, Mail(settings, emitter_for(settings).queue))
