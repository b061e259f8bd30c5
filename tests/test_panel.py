"""The management panel (`/panel`, docs/decisions.md, docs/security.md, docs/webhooks.md) through the live server,
the way a browser uses it:
pages fetched with the session cookie, forms parsed from the HTML (hidden fields, checked boxes and radios, text
areas, the pressed button) and posted form-encoded. Every action is covered, with CSRF refusal, errors next to
the field, another account's objects (404), secrets shown once and never in a URL, and the security headers."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import html
import logging
import re
import secrets
import socket
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest

from rpc.ops import admin as ops
from tests.browser import Browser
from tests.fake_paytr import FakePayTR
from tests.receiver import Receiver, Reply
from tests.support import Admin, LiveServer, User, bearer, eventually, settings_for

SETTINGS_PAGES = ("/panel", "/panel/api-keys", "/panel/webhooks", "/panel/oauth-apps")
EVERY_PAGE = (*SETTINGS_PAGES, "/panel/audit-log", "/panel/authorized-apps", "/panel/billing")
REDIRECT = "https://app.example/callback"


@pytest.fixture(scope="module")
def paytr() -> Iterator[FakePayTR]:
    with FakePayTR("123456", "panel-test-key-x7Qe", "panel-test-salt-P3w") as provider:
        yield provider


@pytest.fixture(scope="module")
def settings(database: str, paytr: FakePayTR, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Short retry waits (two attempts) so that failed deliveries fail within the test; sign-in unthrottled; a
    local fake payment provider behind Billing's Upgrade."""
    return settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
        SIGNIN_LIMIT_PER_EMAIL="100000/minute",
        WEBHOOK_RETRY_WAITS="0,0.2",
        WEBHOOK_TIMEOUT="3",
        PAYTR_TIMEOUT="2",
        **paytr.settings(),
    )


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


# --- reading pages like a browser ---------------------------------------------------------------------------


@dataclass
class Form:
    action: str
    method: str
    fields: list[tuple[str, str]] = field(default_factory=list)  # what the browser sends as the page stands
    options: dict[str, list[str]] = field(default_factory=dict)  # every checkbox/radio value offered, by name
    buttons: list[tuple[str, str]] = field(default_factory=list)

    def values(self, name: str) -> list[str]:
        return [value for field_name, value in self.fields if field_name == name]


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._form: Form | None = None
        self._textarea: tuple[str, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {name: value if value is not None else "" for name, value in attrs}
        if tag == "form":
            self._form = Form(a.get("action", ""), a.get("method", "get").lower())
            self.forms.append(self._form)
            return
        if self._form is None or "name" not in a or "disabled" in a:
            return
        name = a["name"]
        if tag == "input":
            kind = a.get("type", "text").lower()
            if kind in ("checkbox", "radio"):
                self._form.options.setdefault(name, []).append(a.get("value", "on"))
                if "checked" in a:
                    self._form.fields.append((name, a.get("value", "on")))
            elif kind == "submit":
                self._form.buttons.append((name, a.get("value", "")))
            elif kind not in ("button", "reset", "file", "image"):
                self._form.fields.append((name, a.get("value", "")))
        elif tag == "button" and a.get("type", "submit").lower() == "submit":
            self._form.buttons.append((name, a.get("value", "")))
        elif tag == "textarea":
            self._textarea = (name, [])

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._textarea is not None and self._form is not None:
            text = "".join(self._textarea[1])
            self._form.fields.append((self._textarea[0], text[1:] if text.startswith("\n") else text))
            self._textarea = None
        elif tag == "form":
            self._form = None


def forms_of(page: httpx.Response) -> list[Form]:
    parser = _Forms()
    parser.feed(page.text)
    return parser.forms


def form_of(page: httpx.Response, action: str) -> Form:
    found = [f for f in forms_of(page) if urllib.parse.urlsplit(f.action).path == action]
    assert len(found) == 1, (
        f"one form posting to {action} expected on {page.url}: {page.status_code} {page.text[:3000]}"
    )
    return found[0]


def submit(
    browser: Browser,
    page: httpx.Response,
    action: str,
    fill: Mapping[str, str | Sequence[str]] | None = None,
    *,
    button: tuple[str, str] | None = None,
    drop: Sequence[str] = (),
    forge: bool = False,
) -> httpx.Response:
    """Post the page's form for `action` as a browser would: its fields as they stand, `fill` replacing a field's
    values (a list ticks exactly those boxes, which must be on offer unless we `forge`), `drop` left out,
    `button` pressed."""
    chosen = form_of(page, action)
    assert chosen.method == "post"
    fill = dict(fill or {})
    data = [(name, value) for name, value in chosen.fields if name not in fill and name not in drop]
    for name, value in fill.items():
        values = [value] if isinstance(value, str) else list(value)
        if name in chosen.options and not forge:
            assert set(values) <= set(chosen.options[name]), (name, values, chosen.options[name])
        data.extend((name, v) for v in values)
    if button is not None:
        assert button in chosen.buttons, (button, chosen.buttons)
        data.append(button)
    return browser.http.post(
        urllib.parse.urljoin(str(page.url), chosen.action),
        content=urllib.parse.urlencode(data),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


def text(page: httpx.Response) -> str:
    """The page's visible text, tags dropped and entities resolved, whitespace collapsed."""
    without_tags = re.sub(r"<[^>]+>", " ", page.text)
    return " ".join(html.unescape(without_tags).split())


def element_value(page: httpx.Response, element_id: str) -> str:
    """The `value` of the input with that id (a shown secret)."""
    match = re.search(rf'<input[^>]*\bid="{re.escape(element_id)}"[^>]*\bvalue="([^"]*)"', page.text)
    assert match, f"no #{element_id} on {page.url}"
    return html.unescape(match.group(1))


def field_error(page: httpx.Response, name: str) -> str:
    """The error shown next to field `name`, which must point at it (aria-describedby) and be marked invalid."""
    match = re.search(rf'<p class="field-error" id="{re.escape(name)}-error">([^<]*)</p>', page.text)
    assert match, f"no error next to {name}: {page.text[:3000]}"
    described = re.findall(r'aria-describedby="([^"]*)"', page.text)
    assert any(f"{name}-error" in ids.split() for ids in described), f"nothing points at the error of {name}"
    return html.unescape(match.group(1))


def see_other(response: httpx.Response) -> str:
    assert response.status_code == 303, f"{response.status_code} {response.text[:2000]}"
    location = response.headers["Location"]
    assert "whsec_" not in location and "service_" not in location and "hsec_" not in location
    return location


def follow(browser: Browser, response: httpx.Response) -> httpx.Response:
    page = browser.get(see_other(response))
    assert page.status_code == 200, page.text
    return page


def open_page(browser: Browser, path: str, status: int = 200) -> httpx.Response:
    page = browser.get(path)
    assert page.status_code == status, f"{path}: {page.status_code} {page.headers.get('Location')} {page.text[:2000]}"
    return page


# --- people and their browsers ------------------------------------------------------------------------------


def signed_in(live: LiveServer, user: User) -> Browser:
    browser = Browser(live.url)
    answer = browser.sign_in(user, "/panel")
    assert see_other(answer) == "/panel"
    return browser


@pytest.fixture
def browser_of(live: LiveServer) -> Iterator[Any]:
    """`browser_of(user)`: a browser signed in as `user`, closed after the test."""
    made: list[Browser] = []

    def make(user: User) -> Browser:
        made.append(signed_in(live, user))
        return made[-1]

    yield make
    for browser in made:
        browser.close()


@pytest.fixture
def owner(admin: Admin) -> User:
    """An employer in a new account of their own."""
    return admin.user("employer")


@pytest.fixture
def stranger(admin: Admin) -> User:
    """An employer of another account."""
    return admin.user("employer")


def create_key(browser: Browser, name: str = "CI", scopes: Sequence[str] = ("read:jobs",), mode: str = "test") -> str:
    page = open_page(browser, "/panel/api-keys")
    shown = follow(
        browser, submit(browser, page, "/panel/api-keys", {"name": name, "scopes": list(scopes), "mode": mode})
    )
    return element_value(shown, "new-key")


def key_id(admin: Admin, key: str) -> str:
    rows = admin.sql(
        "SELECT id::text AS id FROM api_keys WHERE key_hash = %(h)s", {"h": hashlib.sha256(key.encode()).digest()}
    )
    assert len(rows) == 1
    return str(rows[0]["id"])


def create_endpoint(browser: Browser, url: str, kinds: Sequence[str] = ("job.published",)) -> tuple[str, str]:
    """Add an endpoint in the panel: its id and the secret the answer shows."""
    page = open_page(browser, "/panel/webhooks")
    shown = follow(browser, submit(browser, page, "/panel/webhooks", {"url": url, "event_kinds": list(kinds)}))
    endpoint_id = re.search(r'action="/panel/webhooks/([0-9a-f-]{36})/test"', shown.text)
    assert endpoint_id, shown.text
    return endpoint_id.group(1), element_value(shown, "signing-secret")


def deliveries(admin: Admin, endpoint_id: str) -> list[dict[str, Any]]:
    return admin.sql(
        "SELECT id::text AS id, status, attempts, last_status_code FROM webhook_deliveries"
        " WHERE endpoint_id = %(e)s ORDER BY created_at, id",
        {"e": endpoint_id},
    )


def wait_for(admin: Admin, endpoint_id: str, statuses: Sequence[str], timeout: float = 20) -> list[dict[str, Any]]:
    """The endpoint's deliveries, once there are exactly as many as `statuses` and they are in those states."""

    def matching() -> list[dict[str, Any]] | None:
        rows = deliveries(admin, endpoint_id)
        return rows if [row["status"] for row in rows] == list(statuses) else None

    found: list[dict[str, Any]] = eventually(
        matching, lambda: f"deliveries {deliveries(admin, endpoint_id)}, expected {statuses}", timeout
    )
    return found


def send_test(browser: Browser, endpoint_id: str) -> None:
    page = open_page(browser, f"/panel/webhooks/{endpoint_id}")
    assert see_other(submit(browser, page, f"/panel/webhooks/{endpoint_id}/test")).endswith("?notice=test_sent")


# --- signing in, headers, forms -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", [*EVERY_PAGE, "/panel/webhooks/00000000-0000-0000-0000-000000000000"])
def test_pages_need_a_sign_in_and_come_back(live: LiveServer, owner: User, path: str) -> None:
    browser = Browser(live.url)
    try:
        to_signin = see_other(browser.get(path))
        assert to_signin == "/web/signin?" + urllib.parse.urlencode({"next": path})
        back = see_other(browser.sign_in(owner, path))
        assert back == path
        page = browser.get(back)
        assert page.status_code in (200, 404)
        assert owner.email in page.text
    finally:
        browser.close()


def test_a_post_without_a_session_changes_nothing(live: LiveServer, admin: Admin, owner: User) -> None:
    with live.client() as anonymous:
        answer = anonymous.post("/panel/api-keys", data={"name": "x", "scopes": "read:jobs", "mode": "test"})
    assert see_other(answer) == "/web/signin?next=%2Fpanel"
    assert (
        admin.sql(
            "SELECT 1 FROM api_keys AS k JOIN users AS u ON u.id = k.user_id WHERE u.email = %(e)s", {"e": owner.email}
        )
        == []
    )


@pytest.mark.parametrize("path", [*EVERY_PAGE, "/panel/no-such-page", "/panel/webhooks/not-an-id"])
def test_every_panel_response_carries_the_security_headers(browser_of: Any, owner: User, path: str) -> None:
    browser = browser_of(owner)
    page = browser.get(path)
    assert page.status_code == (200 if path in EVERY_PAGE else 404)
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'", "scripts from this origin only, nothing inline"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert directives["frame-ancestors"] == "'none'" and directives["form-action"] == "'self'"
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["Referrer-Policy"] in ("no-referrer", "same-origin", "strict-origin")
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["X-Content-Type-Options"] == "nosniff"


def test_redirects_and_static_files_carry_them_too(browser_of: Any, owner: User, live: LiveServer) -> None:
    with live.client() as anonymous:
        redirect = anonymous.get("/panel")
    assert redirect.status_code == 303 and redirect.headers["X-Frame-Options"] == "DENY"
    assert "script-src 'self'" in redirect.headers["Content-Security-Policy"]
    page = open_page(browser_of(owner), "/panel")
    assets = re.findall(r'(?:href|src)="(/panel/static/[^"]+)"', page.text)
    assert {urllib.parse.urlsplit(asset).path for asset in assets} == {
        "/panel/static/panel.css",
        "/panel/static/panel.js",
    }
    with live.client() as anonymous:
        for asset in assets:
            answer = anonymous.get(asset)
            assert answer.status_code == 200 and answer.headers["X-Frame-Options"] == "DENY"
            assert answer.headers["X-Content-Type-Options"] == "nosniff"
            expected = "text/css" if ".css" in asset else "text/javascript"
            assert answer.headers["content-type"].startswith(expected)
        assert anonymous.get("/panel/static/other.js").status_code == 404


@pytest.mark.parametrize("path", EVERY_PAGE)
def test_pages_have_no_inline_script_no_cdn_and_labelled_fields(browser_of: Any, owner: User, path: str) -> None:
    page = open_page(browser_of(owner), path)
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page.text), "no inline script"
    assert not re.search(r"\son[a-z]+=", page.text), "no inline event handlers"
    assert " style=" not in page.text, "no inline styles"
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page.text), "every asset is served from here"
    ids = set(re.findall(r'\bid="([^"]+)"', page.text))
    labelled = set(re.findall(r'<label[^>]*\bfor="([^"]+)"', page.text))
    for tag in re.findall(r"<(?:input|textarea|select)\b[^>]*>", page.text):
        if re.search(r'type="(hidden|checkbox|radio)"', tag):
            continue  # hidden; boxes and radios sit inside their <label>
        element_id = re.search(r'\bid="([^"]+)"', tag)
        assert element_id and element_id.group(1) in labelled, f"unlabelled field {tag}"
    for described in re.findall(r'aria-describedby="([^"]+)"', page.text):
        assert set(described.split()) <= ids, described


@pytest.mark.parametrize("path", EVERY_PAGE)
def test_every_form_posts_with_the_csrf_token(browser_of: Any, owner: User, path: str) -> None:
    """Every form that changes something posts with the token; the only other forms are the audit log's filters
    (a GET, which changes nothing) and they carry no token, which would end up in addresses and histories."""
    browser = browser_of(owner)
    page = open_page(browser, path)
    for found in forms_of(page):
        if found.method == "get":
            assert path == "/panel/audit-log" and found.values("csrf_token") == [], found
            continue
        assert found.method == "post", found
        assert len(found.values("csrf_token")) == 1 and found.values("csrf_token")[0], found


def test_a_form_without_or_with_a_wrong_csrf_token_is_refused(
    browser_of: Any, admin: Admin, owner: User, stranger: User
) -> None:
    browser, other = browser_of(owner), browser_of(stranger)
    page = open_page(browser, "/panel/api-keys")
    fill = {"name": "forged", "scopes": ["read:jobs"], "mode": "test"}
    missing = submit(browser, page, "/panel/api-keys", fill, drop=["csrf_token"])
    foreign_token = form_of(open_page(other, "/panel/api-keys"), "/panel/api-keys").values("csrf_token")[0]
    wrong = submit(browser, page, "/panel/api-keys", {**fill, "csrf_token": foreign_token})
    for answer in (missing, wrong):
        assert answer.status_code == 403 and "expired" in text(answer)
        assert answer.headers["X-Frame-Options"] == "DENY"
    assert admin.sql("SELECT 1 FROM api_keys WHERE name = 'forged'") == []


def test_unknown_panel_addresses_are_the_panel_404_page(browser_of: Any, owner: User) -> None:
    browser = browser_of(owner)
    page = browser.get("/panel/nothing/here")
    assert page.status_code == 404 and "Not found" in text(page)
    posted = browser.http.post("/panel/nothing/here", data={"x": "1"})
    assert posted.status_code == 404 and posted.headers["X-Frame-Options"] == "DENY"


# --- overview and billing -----------------------------------------------------------------------------------


def test_overview_shows_account_plan_and_this_minutes_usage(
    browser_of: Any, admin: Admin, client: httpx.Client
) -> None:
    ids = admin.run(
        ops.create_user,
        email=f"boss-{secrets.token_hex(4)}@acme.test",
        password="pw-1234567",
        role="employer",
        account_name="Acme Recruiting",
    )
    rows = admin.sql("SELECT email FROM users WHERE id = %(u)s", {"u": ids["user_id"]})
    user = User(
        ids["user_id"], ids["account_id"], rows[0]["email"], "pw-1234567", "employer", admin.token(rows[0]["email"])
    )
    admin.set_plan(user, "pro")
    browser = browser_of(user)
    page = open_page(browser, "/panel")
    assert "Acme Recruiting" in text(page) and "pro plan" in text(page)
    assert "0 of 300 requests" in text(page) and "0 of 10,000 requests" in text(page)
    assert 'href="/panel/billing"' in page.text
    for _ in range(3):
        assert client.get("/v1/jobs.list", headers=user.auth).status_code == 200
    page = open_page(browser, "/panel")
    assert "3 of 300 requests" in text(page) and "3 of 10,000 requests" in text(page)
    assert "297 left" in text(page)


def test_billing_lists_the_accounts_records_and_the_providers_return(
    browser_of: Any, admin: Admin, owner: User, stranger: User
) -> None:
    subscription = admin.sql(
        "INSERT INTO subscriptions (account_id, plan, status) VALUES (%(a)s, 'pro', 'pending') RETURNING id",
        {"a": owner.account_id},
    )[0]["id"]
    admin.sql(
        "INSERT INTO payments (account_id, subscription_id, provider, merchant_oid, amount, currency, status)"
        " VALUES (%(a)s, %(s)s, 'paytr', %(oid)s, 99000, 'TRY', 'pending')",
        {"a": owner.account_id, "s": subscription, "oid": "HIREpanel" + secrets.token_hex(4)},
    )
    browser = browser_of(owner)
    page = open_page(browser, "/panel/billing")
    assert "990.00 TRY" in text(page) and "pending" in text(page)
    assert "HIREpanel" in text(page)
    assert "HIREpanel" not in text(open_page(browser_of(stranger), "/panel/billing"))
    assert "accepted your payment" in text(open_page(browser, "/panel/billing?payment=ok"))
    assert "did not go through" in text(open_page(browser, "/panel/billing?payment=failed"))
    assert "did not go through" not in text(open_page(browser, "/panel/billing?payment=<script>"))


def test_upgrade_opens_the_apis_checkout_and_shows_its_page_once(
    browser_of: Any, admin: Admin, owner: User, paytr: FakePayTR
) -> None:
    browser = browser_of(owner)
    page = open_page(browser, "/panel/billing")
    [pro] = [f for f in forms_of(page) if f.action == "/panel/billing/upgrade" and f.values("plan") == ["pro"]]

    def upgrade(plan: str) -> httpx.Response:
        fields = [(name, plan if name == "plan" else value) for name, value in pro.fields]
        return browser.http.post(
            "/panel/billing/upgrade",
            content=urllib.parse.urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    bad = upgrade("free")
    assert bad.status_code == 400 and "paid plans" in text(bad)
    answer = upgrade("pro")
    location = see_other(answer)
    assert location.startswith("/panel/billing?reveal=")
    shown = open_page(browser, location)
    token = paytr.requests[-1].token
    assert f'href="https://www.paytr.com/odeme/guvenli/{token}"' in shown.text, "a link to the provider's page"
    assert "Continue to payment" in text(shown) and "pending" in text(shown)

    again = open_page(browser, location)
    assert token not in again.text and "shown once" in text(again), "a reload opens no second checkout"
    rows = admin.sql(
        "SELECT s.plan, s.status, p.status AS paid"
        " FROM subscriptions AS s JOIN payments AS p ON p.subscription_id = s.id WHERE s.account_id = %(a)s",
        {"a": owner.account_id},
    )
    assert rows == [{"plan": "pro", "status": "pending", "paid": "pending"}]


# --- Settings > API keys ------------------------------------------------------------------------------------


def test_a_new_key_is_shown_once_and_calls_the_api(
    browser_of: Any, admin: Admin, owner: User, client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    browser = browser_of(owner)
    page = open_page(browser, "/panel/api-keys")
    assert "No keys yet" in text(page)
    fill = {"name": "CI pipeline", "scopes": ["read:jobs", "write:jobs"], "mode": "live"}
    shown = follow(browser, submit(browser, page, "/panel/api-keys", fill))
    assert shown.headers["Cache-Control"] == "no-store"
    key = element_value(shown, "new-key")
    assert key.startswith("service_live_") and "will not be shown again" in text(shown)
    assert re.search(r'data-copy="new-key"', shown.text), "a copy button"

    assert client.get("/v1/jobs.list", headers=bearer(key)).status_code == 200
    row = admin.sql(
        "SELECT mode, scopes, prefix, key_hash FROM api_keys WHERE name = 'CI pipeline' AND user_id = %(u)s",
        {"u": owner.user_id},
    )[0]
    assert row["key_hash"] == hashlib.sha256(key.encode()).digest() and key.startswith(row["prefix"])
    assert (row["mode"], row["scopes"]) == ("live", ["read:jobs", "write:jobs"])

    listed = open_page(browser, "/panel/api-keys")
    assert key not in listed.text, "never shown again"
    listing = text(listed)
    assert "CI pipeline" in listing and row["prefix"] + "…" in listing and "live" in listing and "write:jobs" in listing
    assert "never" not in listing.split("CI pipeline")[1].split("Revoke")[0], "last used is shown"
    assert key not in caplog.text


def test_reloading_the_page_of_a_new_key_makes_no_second_key_and_hides_it(
    browser_of: Any, admin: Admin, owner: User, live: LiveServer
) -> None:
    browser = browser_of(owner)
    page = open_page(browser, "/panel/api-keys")
    answer = submit(browser, page, "/panel/api-keys", {"name": "Once", "scopes": ["read:jobs"], "mode": "test"})
    location = see_other(answer)
    assert location.startswith("/panel/api-keys?reveal=") and answer.text == ""

    other_tab = signed_in(live, owner)  # the same person in another browser session: the reveal is not theirs
    assert 'id="new-key"' not in open_page(other_tab, location).text
    other_tab.close()

    key = element_value(open_page(browser, location), "new-key")
    reloaded = open_page(browser, location)
    assert key not in reloaded.text and 'id="new-key"' not in reloaded.text
    assert "shown once and cannot be shown again" in text(reloaded)
    assert admin.sql(
        "SELECT count(*) AS n FROM api_keys WHERE name = 'Once' AND user_id = %(u)s", {"u": owner.user_id}
    ) == [{"n": 1}]
    shown = """
        SELECT count(*) AS n FROM panel_reveals AS r JOIN api_keys AS k ON k.id::text = r.object_id
        WHERE k.name = 'Once'
    """
    assert admin.sql(shown) == [{"n": 0}], "deleted when shown"


def test_a_reveal_is_sealed_and_ends_with_the_session(browser_of: Any, admin: Admin, owner: User) -> None:
    browser = browser_of(owner)
    page = open_page(browser, "/panel/api-keys")
    see_other(submit(browser, page, "/panel/api-keys", {"name": "Unseen", "scopes": ["read:jobs"], "mode": "test"}))
    kept = """
        SELECT r.secret_sealed FROM panel_reveals AS r JOIN api_keys AS k ON k.id::text = r.object_id
        WHERE k.name = 'Unseen' AND k.user_id = %(u)s
    """
    [row] = admin.sql(kept, {"u": owner.user_id})
    assert b"service_test_" not in bytes(row["secret_sealed"]), "sealed at rest"
    see_other(submit(browser, open_page(browser, "/panel"), "/web/signout"))
    assert admin.sql(kept, {"u": owner.user_id}) == [], "signing out forgets it"


def test_key_form_errors_are_shown_next_to_the_fields(browser_of: Any, admin: Admin, owner: User) -> None:
    browser = browser_of(owner)
    page = open_page(browser, "/panel/api-keys")
    answer = submit(browser, page, "/panel/api-keys", {"name": "  ", "scopes": [], "mode": "test"})
    assert answer.status_code == 400
    assert "name" in field_error(answer, "name").lower()
    assert "scope" in field_error(answer, "scopes").lower()
    assert 'aria-invalid="true"' in answer.text
    answer = submit(browser, page, "/panel/api-keys", {"name": "kept", "scopes": [], "mode": "test"})
    assert form_of(answer, "/panel/api-keys").values("name") == ["kept"], "what was typed stays"
    answer = submit(
        browser, page, "/panel/api-keys", {"name": "x", "scopes": ["read:jobs"], "mode": "staging"}, forge=True
    )
    assert field_error(answer, "mode")
    assert admin.sql("SELECT 1 FROM api_keys AS k WHERE k.user_id = %(u)s", {"u": owner.user_id}) == []


def test_revoking_a_key_asks_first_and_then_the_api_refuses_it(
    browser_of: Any, admin: Admin, owner: User, client: httpx.Client
) -> None:
    browser = browser_of(owner)
    key = create_key(browser)
    ident = key_id(admin, key)
    listed = open_page(browser, "/panel/api-keys")
    assert f'href="/panel/api-keys/{ident}/revoke"' in listed.text, "revoking starts with a link to a confirmation"
    confirm = open_page(browser, f"/panel/api-keys/{ident}/revoke")
    assert "cannot be undone" in text(confirm)
    assert client.get("/v1/jobs.list", headers=bearer(key)).status_code == 200
    done = follow(browser, submit(browser, confirm, f"/panel/api-keys/{ident}/revoke"))
    assert "was revoked" in text(done) and "revoked" in text(done)
    refused = client.get("/v1/jobs.list", headers=bearer(key))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    assert see_other(browser.get(f"/panel/api-keys/{ident}/revoke")) == "/panel/api-keys"


def test_keys_belong_to_the_account(browser_of: Any, admin: Admin, owner: User, stranger: User) -> None:
    colleague = admin.user("employer", account_id=owner.account_id)
    key = create_key(browser_of(owner), name="shared key")
    ident = key_id(admin, key)
    mine = browser_of(colleague)
    assert "shared key" in text(open_page(mine, "/panel/api-keys")), "an account's employers see its keys"

    theirs = browser_of(stranger)
    assert "shared key" not in text(open_page(theirs, "/panel/api-keys"))
    assert theirs.get(f"/panel/api-keys/{ident}/revoke").status_code == 404
    stranger_page = open_page(theirs, "/panel/api-keys")
    token = form_of(stranger_page, "/panel/api-keys").values("csrf_token")[0]
    forged = theirs.http.post(f"/panel/api-keys/{ident}/revoke", data={"csrf_token": token})
    assert forged.status_code == 404
    assert theirs.http.post("/panel/api-keys/not-a-uuid/revoke", data={"csrf_token": token}).status_code == 404
    assert admin.sql("SELECT revoked_at FROM api_keys WHERE id = %(i)s", {"i": ident}) == [{"revoked_at": None}]

    confirm = open_page(mine, f"/panel/api-keys/{ident}/revoke")
    assert see_other(submit(mine, confirm, f"/panel/api-keys/{ident}/revoke")).startswith("/panel/api-keys")


def test_candidates_are_told_keys_are_for_employers(browser_of: Any, admin: Admin, live: LiveServer) -> None:
    candidate = admin.user("candidate")
    browser = browser_of(candidate)
    page = open_page(browser, "/panel/api-keys")
    assert "API keys are for employer accounts" in text(page)
    assert forms_of(page) == [form for form in forms_of(page) if form.action == "/web/signout"]
    token = form_of(page, "/web/signout").values("csrf_token")[0]
    answer = browser.http.post(
        "/panel/api-keys", data={"csrf_token": token, "name": "x", "scopes": "read:jobs", "mode": "test"}
    )
    assert answer.status_code == 403
    assert admin.sql("SELECT 1 FROM api_keys WHERE user_id = %(u)s", {"u": candidate.user_id}) == []


# --- Settings > Webhooks ------------------------------------------------------------------------------------


def test_event_kinds_are_checkboxes_grouped_by_area(browser_of: Any, admin: Admin, owner: User) -> None:
    page = open_page(browser_of(owner), "/panel/webhooks")
    offered = form_of(page, "/panel/webhooks").options["event_kinds"]
    assert offered == list(admin.vocabulary.event_kinds)
    legends = re.findall(r'<fieldset class="kind-group">\s*<legend>([^<]+)</legend>', page.text)
    assert legends == [
        "Job events",
        "Application events",
        "Interview events",
        "Scorecard events",
        "Offer events",
        "Billing events",
        "User events",
    ]


def test_adding_an_endpoint_shows_its_secret_and_lists_it(
    browser_of: Any, admin: Admin, owner: User, receiver: Receiver
) -> None:
    browser = browser_of(owner)
    hook = receiver.hook()
    endpoint_id, secret = create_endpoint(browser, hook.url, ["job.published", "application.created"])
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret)
    assert admin.run(admin.webhooks.reveal_secret, owner.account_id, endpoint_id) == secret
    listed = text(open_page(browser, "/panel/webhooks"))
    assert hook.url in listed and "application.created" in listed and "enabled" in listed and "none yet" in listed
    assert secret not in open_page(browser, f"/panel/webhooks/{endpoint_id}").text, "shown on request only"
    created = [("webhook.created", "user", owner.user_id)]
    assert admin.audit_trail(endpoint_id) == created, "showing the secret once on creation is no reveal"


def test_adding_an_endpoint_redirects_to_it_and_a_reload_adds_nothing(
    browser_of: Any, admin: Admin, owner: User, receiver: Receiver
) -> None:
    browser = browser_of(owner)
    page = open_page(browser, "/panel/webhooks")
    answer = submit(browser, page, "/panel/webhooks", {"url": receiver.hook().url, "event_kinds": ["job.published"]})
    location = see_other(answer)
    assert re.fullmatch(r"/panel/webhooks/[0-9a-f-]{36}\?reveal=[\w-]+", location), "not answered at the list URL"
    secret = element_value(open_page(browser, location), "signing-secret")
    reloaded = open_page(browser, location)
    assert secret not in reloaded.text and "shown once" in text(reloaded)
    count = "SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = %(a)s"
    assert admin.sql(count, {"a": owner.account_id}) == [{"n": 1}]


@pytest.mark.parametrize(
    ("fill", "field", "message"),
    [
        ({"url": "ftp://example.com/x", "event_kinds": ["job.published"]}, "url", "http"),
        ({"url": "not a url", "event_kinds": ["job.published"]}, "url", ""),
        ({"url": "https://user:pw@example.com/", "event_kinds": ["job.published"]}, "url", "credentials"),
        ({"url": "https://example.com/hook", "event_kinds": []}, "event_kinds", "choose"),
    ],
)
def test_endpoint_errors_are_shown_next_to_the_field(
    browser_of: Any, admin: Admin, owner: User, fill: dict[str, Any], field: str, message: str
) -> None:
    browser = browser_of(owner)
    page = open_page(browser, "/panel/webhooks")
    answer = submit(browser, page, "/panel/webhooks", fill)
    assert answer.status_code == 400
    assert message in field_error(answer, field).lower()
    assert form_of(answer, "/panel/webhooks").values("url") == [fill["url"]]
    assert admin.sql("SELECT 1 FROM webhook_endpoints WHERE account_id = %(a)s", {"a": owner.account_id}) == []


def test_production_refuses_endpoints_on_private_addresses(
    databases: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The SSRF rules of production (docs/webhooks.md), shown next to the URL field. Behind a TLS-terminating proxy
    the cookies are `Secure` and `__Host-`, so this client carries them by hand over the loopback."""
    database = databases.copy()
    settings = settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
        SERVICE_ENV="production",
        PUBLIC_URL="https://hire.example",
        SIGNIN_LIMIT_PER_EMAIL="100000/minute",
    )
    operator = Admin(database, settings_for(database))  # mint-token, which Admin.user uses, is refused in production
    user = operator.user("employer")
    with LiveServer(settings) as live, httpx.Client(base_url=live.url, headers={"X-Forwarded-Proto": "https"}) as http:
        signin = http.get("/web/signin")
        binding = signin.cookies["__Host-hire_signin"]
        csrf = form_of(signin, "/web/signin").values("csrf_token")[0]
        answer = http.post(
            "/web/signin",
            data={"csrf_token": csrf, "email": user.email, "password": user.password, "next": "/panel"},
            headers={"Cookie": f"__Host-hire_signin={binding}"},
        )
        session = {"Cookie": f"__Host-hire_session={answer.cookies['__Host-hire_session']}"}
        page = http.get("/panel/webhooks", headers=session)
        assert page.status_code == 200, page.text
        token = form_of(page, "/panel/webhooks").values("csrf_token")[0]
        for url in (
            "https://127.0.0.1/hook",
            "https://10.0.0.8/hook",
            "https://[::ffff:192.168.1.1]/",
            "http://8.8.8.8/",
        ):
            refused = http.post(
                "/panel/webhooks",
                data={"csrf_token": token, "url": url, "event_kinds": "job.published"},
                headers=session,
            )
            assert refused.status_code == 400 and field_error(refused, "url"), url
        assert operator.sql("SELECT 1 FROM webhook_endpoints") == []


def test_a_test_event_is_delivered_and_logged_with_every_attempt(
    browser_of: Any, admin: Admin, owner: User, receiver: Receiver
) -> None:
    browser = browser_of(owner)
    hook = receiver.hook(default=Reply(200, b"thanks"))
    endpoint_id, secret = create_endpoint(browser, hook.url)
    hook.know(secret)
    send_test(browser, endpoint_id)
    got = hook.wait_for(1)[0]
    assert (
        got.valid and got.envelope["event"] == "webhook.test" and got.envelope["data"] == {"endpoint_id": endpoint_id}
    )
    [delivery] = wait_for(admin, endpoint_id, ["succeeded"])

    log = open_page(browser, f"/panel/webhooks/{endpoint_id}")
    row = re.search(
        r"<tr>\s*<td><a href=\"/panel/webhooks/[^\"]+/deliveries/" + delivery["id"] + r"\".*?</tr>", log.text, re.S
    )
    assert row, log.text
    cells = text(httpx.Response(200, text=row.group(0)))
    assert "webhook.test" in cells and "succeeded" in cells and "200" in cells and " 1 " in f" {cells} "
    assert "succeeded" in text(open_page(browser, "/panel/webhooks")), "the list shows the last delivery"

    detail = open_page(browser, f"/panel/webhooks/{endpoint_id}/deliveries/{delivery['id']}")
    attempts = text(detail)
    assert "Attempts" in attempts and "200" in attempts and " ms" in attempts and "thanks" in attempts
    body = re.search(r'<pre class="body" id="delivery-body"[^>]*>(.*?)</pre>', detail.text, re.S)
    assert body and html.unescape(body.group(1)).encode() == got.body, "the exact bytes sent"
    sent = headers_shown(detail, 1)
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature", "X-Service-Signature", "X-Service-Event"):
        assert sent[name] == got.headers[name.lower()], name
    assert secret not in detail.text, "a signature is shown, never the secret"


def headers_shown(detail: httpx.Response, attempt: int) -> dict[str, str]:
    """The headers the delivery page says attempt number `attempt` sent."""
    block = re.search(rf'<pre class="headers" id="attempt-{attempt}-headers">(.*?)</pre>', detail.text, re.S)
    assert block, detail.text
    lines = html.unescape(block.group(1)).strip().splitlines()
    return dict(line.split(": ", 1) for line in lines)


def test_failed_attempts_say_what_went_wrong_in_words(
    browser_of: Any, admin: Admin, owner: User, receiver: Receiver
) -> None:
    browser = browser_of(owner)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    closed, _ = create_endpoint(browser, f"http://127.0.0.1:{port}/hook")
    failing, _ = create_endpoint(browser, receiver.hook(default=Reply(500, b"boom")).url)
    plain = receiver.hook().url.replace("http://", "https://")  # TLS spoken to a server that speaks plain HTTP
    tls, _ = create_endpoint(browser, plain)
    expected = {
        closed: f"could not connect to 127.0.0.1:{port}",
        failing: "receiver answered 500",
        tls: "TLS handshake failed",
    }
    for endpoint_id, words in expected.items():
        send_test(browser, endpoint_id)
        [delivery] = wait_for(admin, endpoint_id, ["failed"])
        detail = open_page(browser, f"/panel/webhooks/{endpoint_id}/deliveries/{delivery['id']}")
        assert text(detail).count(words) == 3, "both attempts and the last error, in words"
        assert "Error:" not in text(detail) and "ssl:" not in text(detail), "no exception class names"
        assert headers_shown(detail, 2)["webhook-signature"].startswith("v1,"), "headers even when nothing answered"


def test_deleting_an_endpoint_asks_first_and_sends_it_nothing_more(
    browser_of: Any, admin: Admin, owner: User, stranger: User, receiver: Receiver
) -> None:
    browser = browser_of(owner)
    endpoint_id, _ = create_endpoint(browser, receiver.hook().url)
    page = open_page(browser, f"/panel/webhooks/{endpoint_id}")
    assert f'href="/panel/webhooks/{endpoint_id}/delete"' in page.text
    theirs = browser_of(stranger)
    assert theirs.get(f"/panel/webhooks/{endpoint_id}/delete").status_code == 404
    token = form_of(open_page(theirs, "/panel/webhooks"), "/web/signout").values("csrf_token")[0]
    assert theirs.http.post(f"/panel/webhooks/{endpoint_id}/delete", data={"csrf_token": token}).status_code == 404

    confirm = open_page(browser, f"/panel/webhooks/{endpoint_id}/delete")
    assert "cannot be undone" in text(confirm)
    assert admin.sql("SELECT count(*) AS n FROM webhook_endpoints WHERE id = %(e)s", {"e": endpoint_id}) == [{"n": 1}]
    done = follow(browser, submit(browser, confirm, f"/panel/webhooks/{endpoint_id}/delete"))
    assert "The endpoint was deleted" in text(done) and endpoint_id not in done.text
    assert admin.sql("SELECT count(*) AS n FROM webhook_endpoints WHERE id = %(e)s", {"e": endpoint_id}) == [{"n": 0}]
    assert browser.get(f"/panel/webhooks/{endpoint_id}").status_code == 404
    assert [action for action, *_ in admin.audit_trail(endpoint_id)] == ["webhook.created", "webhook.deleted"]


def test_a_failed_delivery_can_be_redelivered_once(
    browser_of: Any, admin: Admin, owner: User, receiver: Receiver
) -> None:
    browser = browser_of(owner)
    hook = receiver.hook(default=Reply(500, b"receiver down"))
    endpoint_id, _ = create_endpoint(browser, hook.url)
    send_test(browser, endpoint_id)
    [failed] = wait_for(admin, endpoint_id, ["failed"])
    assert failed["attempts"] == 2 and failed["last_status_code"] == 500

    detail = open_page(browser, f"/panel/webhooks/{endpoint_id}/deliveries/{failed['id']}")
    numbers = re.findall(r'<th scope="row">(\d+)</th>', detail.text)
    assert numbers == ["1", "2"] and "receiver down" in text(detail)

    hook.answer(default=Reply(200, b"back"))
    log = open_page(browser, f"/panel/webhooks/{endpoint_id}")
    action = f"/panel/webhooks/{endpoint_id}/deliveries/{failed['id']}/redeliver"
    assert see_other(submit(browser, log, action)).endswith("?notice=redelivered")
    old, new = wait_for(admin, endpoint_id, ["failed", "succeeded"])
    assert old["id"] == failed["id"] and new["attempts"] == 1
    bodies = [request.body for request in hook.wait_for(3)]
    assert bodies[0] == bodies[1] == bodies[2], "a redelivery sends the same bytes"

    log = open_page(browser, f"/panel/webhooks/{endpoint_id}")
    assert "redelivered" in text(log)
    assert action not in log.text, "no second redeliver button"
    token = form_of(log, f"/panel/webhooks/{endpoint_id}/test").values("csrf_token")[0]
    browser.http.post(action, data={"csrf_token": token})
    assert len(deliveries(admin, endpoint_id)) == 2, "a second click sends nothing"


def test_redeliver_every_failed_delivery_since_a_time(
    browser_of: Any, admin: Admin, owner: User, receiver: Receiver
) -> None:
    browser = browser_of(owner)
    hook = receiver.hook(default=Reply(503))
    endpoint_id, _ = create_endpoint(browser, hook.url)
    send_test(browser, endpoint_id)
    send_test(browser, endpoint_id)
    wait_for(admin, endpoint_id, ["failed", "failed"])
    page = open_page(browser, f"/panel/webhooks/{endpoint_id}")
    action = f"/panel/webhooks/{endpoint_id}/redeliver"
    answer = submit(browser, page, action, {"since": "yesterday"})
    assert answer.status_code == 400 and field_error(answer, "since")
    hook.answer(default=Reply(200))
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert see_other(submit(browser, page, action, {"since": since})).endswith("notice=redelivered_many&queued=2")
    wait_for(admin, endpoint_id, ["failed", "failed", "succeeded", "succeeded"])
    assert see_other(submit(browser, page, action, {"since": since})).endswith("notice=nothing_to_redeliver")


def test_the_delivery_log_is_paged_newest_first(browser_of: Any, admin: Admin, owner: User, receiver: Receiver) -> None:
    browser = browser_of(owner)
    hook = receiver.hook()
    endpoint_id, _ = create_endpoint(browser, hook.url)

    async def emit_many(conn: Any) -> None:
        async with conn.transaction():
            for _ in range(23):
                await admin.webhooks.send_test_event(conn, owner.account_id, endpoint_id)

    admin.run(emit_many)
    admin.sql(  # distinct creation times, so that "newest first" is visible
        "UPDATE webhook_deliveries SET created_at = created_at - (interval '1 second' * n) FROM ("
        " SELECT id, row_number() OVER (ORDER BY id) AS n FROM webhook_deliveries WHERE endpoint_id = %(e)s) AS o"
        " WHERE webhook_deliveries.id = o.id",
        {"e": endpoint_id},
    )
    first = open_page(browser, f"/panel/webhooks/{endpoint_id}")
    second = open_page(browser, f"/panel/webhooks/{endpoint_id}?page=2")
    rows = [re.findall(r"/deliveries/([0-9a-f-]{36})\" aria-label", page.text) for page in (first, second)]
    assert [len(r) for r in rows] == [20, 3]
    newest = [
        row["id"]
        for row in admin.sql(
            "SELECT id::text AS id FROM webhook_deliveries WHERE endpoint_id = %(e)s ORDER BY created_at DESC, id DESC",
            {"e": endpoint_id},
        )
    ]
    assert rows[0] + rows[1] == newest
    assert "Page 1 of 2" in text(first) and 'rel="next"' in first.text and 'rel="prev"' in second.text
    assert open_page(browser, f"/panel/webhooks/{endpoint_id}?page=99").status_code == 200


def test_reveal_and_rotate_the_secret(browser_of: Any, admin: Admin, owner: User, receiver: Receiver) -> None:
    browser = browser_of(owner)
    endpoint_id, secret = create_endpoint(browser, receiver.hook().url)
    page = open_page(browser, f"/panel/webhooks/{endpoint_id}")
    explained = " ".join(text(page).split())
    assert "The Standard Webhooks headers" in explained and "X-Service-Signature is the hex" in explained
    assert "You can reveal the secret again here" in explained, "as the README says"
    revealed = submit(browser, page, f"/panel/webhooks/{endpoint_id}/secret")
    assert revealed.status_code == 200 and revealed.headers["Cache-Control"] == "no-store"
    assert element_value(revealed, "signing-secret") == secret

    overlap = follow(
        browser, submit(browser, page, f"/panel/webhooks/{endpoint_id}/rotate", button=("rotation", "overlap"))
    )
    second = element_value(overlap, "signing-secret")
    assert second != secret and "X-Service-Signature-Next" in text(overlap) and "24 hours" in text(overlap)
    assert admin.sql(
        "SELECT overlap_until IS NOT NULL AS o FROM webhook_endpoints WHERE id = %(e)s", {"e": endpoint_id}
    ) == [{"o": True}]
    assert "rotation is in progress" in text(open_page(browser, f"/panel/webhooks/{endpoint_id}"))

    now = follow(browser, submit(browser, page, f"/panel/webhooks/{endpoint_id}/rotate", button=("rotation", "now")))
    third = element_value(now, "signing-secret")
    assert third not in (secret, second) and "only this secret signs" in text(now)
    assert admin.run(admin.webhooks.reveal_secret, owner.account_id, endpoint_id) == third
    assert admin.sql("SELECT overlap_until FROM webhook_endpoints WHERE id = %(e)s", {"e": endpoint_id}) == [
        {"overlap_until": None}
    ]
    assert submit(browser, page, f"/panel/webhooks/{endpoint_id}/rotate").status_code == 400
    assert admin.audit_trail(endpoint_id) == [
        ("webhook.created", "user", owner.user_id),
        ("webhook.secret_revealed", "user", owner.user_id),
        ("webhook.secret_rotated", "user", owner.user_id),
        ("webhook.secret_rotated", "user", owner.user_id),
    ], "the refused rotation records nothing"


def test_edit_disable_and_enable_an_endpoint(browser_of: Any, admin: Admin, owner: User, receiver: Receiver) -> None:
    browser = browser_of(owner)
    endpoint_id, _ = create_endpoint(browser, receiver.hook().url)
    edit = open_page(browser, f"/panel/webhooks/{endpoint_id}/edit")
    assert form_of(edit, f"/panel/webhooks/{endpoint_id}/edit").values("event_kinds") == ["job.published"]
    bad = submit(browser, edit, f"/panel/webhooks/{endpoint_id}/edit", {"url": "gopher://x"})
    assert bad.status_code == 400 and field_error(bad, "url")
    new_url = receiver.hook().url
    saved = submit(
        browser,
        edit,
        f"/panel/webhooks/{endpoint_id}/edit",
        {"url": new_url, "event_kinds": ["job.closed", "billing.invoice.generated"]},
    )
    page = follow(browser, saved)
    assert "saved" in text(page) and new_url in text(page)
    stored = admin.run(admin.webhooks.get, owner.account_id, endpoint_id)
    assert (stored.url, stored.event_kinds) == (new_url, ["billing.invoice.generated", "job.closed"])

    page = follow(browser, submit(browser, page, f"/panel/webhooks/{endpoint_id}/enabled"))
    assert "disabled" in text(page) and not admin.run(admin.webhooks.get, owner.account_id, endpoint_id).enabled
    page = follow(browser, submit(browser, page, f"/panel/webhooks/{endpoint_id}/enabled"))
    assert "is enabled" in text(page) and admin.run(admin.webhooks.get, owner.account_id, endpoint_id).enabled
    updates = [action for action, *_ in admin.audit_trail(endpoint_id)]
    assert updates == ["webhook.created", "webhook.updated", "webhook.disabled", "webhook.enabled"], (
        "the refused edit records nothing; disabling and enabling are recorded as such"
    )


def test_another_accounts_endpoints_and_deliveries_are_404(
    browser_of: Any, admin: Admin, owner: User, stranger: User, receiver: Receiver
) -> None:
    mine = browser_of(owner)
    hook = receiver.hook()
    endpoint_id, secret = create_endpoint(mine, hook.url)
    send_test(mine, endpoint_id)
    [delivery] = wait_for(admin, endpoint_id, ["succeeded"])
    theirs = browser_of(stranger)
    token = form_of(open_page(theirs, "/panel/webhooks"), "/panel/webhooks").values("csrf_token")[0]
    base = f"/panel/webhooks/{endpoint_id}"
    for path in (base, f"{base}/edit", f"{base}/deliveries/{delivery['id']}"):
        assert theirs.get(path).status_code == 404, path
    for path in (
        f"{base}/edit",
        f"{base}/secret",
        f"{base}/rotate",
        f"{base}/enabled",
        f"{base}/test",
        f"{base}/redeliver",
        f"{base}/deliveries/{delivery['id']}/redeliver",
    ):
        answer = theirs.http.post(
            path,
            data={
                "csrf_token": token,
                "rotation": "now",
                "url": "https://x.example",
                "event_kinds": "job.closed",
                "since": "2020-01-01T00:00",
            },
        )
        assert answer.status_code == 404, path
        assert secret not in answer.text
    # their own endpoint, with my delivery's id
    their_endpoint, _ = create_endpoint(theirs, receiver.hook().url)
    assert theirs.get(f"/panel/webhooks/{their_endpoint}/deliveries/{delivery['id']}").status_code == 404
    assert theirs.get("/panel/webhooks/not-a-uuid/deliveries/also-not").status_code == 404
    assert admin.run(admin.webhooks.reveal_secret, owner.account_id, endpoint_id) == secret
    assert len(deliveries(admin, endpoint_id)) == 1


# --- Settings > OAuth apps, Authorized apps ---------------------------------------------------------------


def register(browser: Browser, **fill: Any) -> httpx.Response:
    page = open_page(browser, "/panel/oauth-apps")
    values = {"name": "Acme Sync", "redirect_uris": REDIRECT, "client_type": "confidential", **fill}
    answer = submit(browser, page, "/panel/oauth-apps", values, forge=True)
    return follow(browser, answer) if answer.status_code == 303 else answer


def test_registering_a_confidential_app_shows_its_secret_once(browser_of: Any, admin: Admin, owner: User) -> None:
    browser = browser_of(owner)
    shown = register(
        browser, redirect_uris=f"{REDIRECT}\n\nhttp://127.0.0.1/cb\n", scopes=["read:jobs", "read:profile"]
    )
    assert shown.headers["Cache-Control"] == "no-store"
    client_id, secret = element_value(shown, "client-id"), element_value(shown, "client-secret")
    assert client_id.startswith("app_") and secret.startswith("hsec_") and "will not be shown again" in text(shown)
    row = admin.sql(
        "SELECT secret_hash, redirect_uris, scopes, account_id::text AS a FROM oauth_clients WHERE id = %(i)s",
        {"i": client_id},
    )[0]
    assert row["secret_hash"] == hashlib.sha256(secret.encode()).digest()
    assert (row["redirect_uris"], row["scopes"], row["a"]) == (
        [REDIRECT, "http://127.0.0.1/cb"],
        ["read:jobs", "read:profile"],
        owner.account_id,
    )
    listed = open_page(browser, "/panel/oauth-apps")
    assert secret not in listed.text and client_id in text(listed) and "confidential" in text(listed)
    assert admin.audit_trail(client_id) == [("oauth_client.created", "user", owner.user_id)]


def test_a_public_app_gets_no_secret(browser_of: Any, owner: User) -> None:
    shown = register(browser_of(owner), client_type="public", name="Mobile")
    assert shown.status_code == 200 and element_value(shown, "client-id").startswith("app_")
    assert 'id="client-secret"' not in shown.text and "PKCE" in text(shown)


@pytest.mark.parametrize(
    ("fill", "field"),
    [
        ({"name": ""}, "name"),
        ({"redirect_uris": "javascript:alert(1)"}, "redirect_uris"),
        ({"redirect_uris": "https://app.example/cb#fragment"}, "redirect_uris"),
        ({"redirect_uris": ""}, "redirect_uris"),
        ({"scopes": []}, "scopes"),
        ({"client_type": "hybrid"}, "client_type"),
    ],
)
def test_registration_errors_are_shown_next_to_the_field(
    browser_of: Any, admin: Admin, owner: User, fill: dict[str, Any], field: str
) -> None:
    answer = register(browser_of(owner), **fill)
    assert answer.status_code == 400
    assert field_error(answer, field)
    assert admin.sql("SELECT 1 FROM oauth_clients WHERE account_id = %(a)s", {"a": owner.account_id}) == []


def test_edit_redirect_uris_then_delete_the_app(browser_of: Any, admin: Admin, owner: User) -> None:
    browser = browser_of(owner)
    client_id = element_value(register(browser), "client-id")
    page = open_page(browser, f"/panel/oauth-apps/{client_id}")
    assert form_of(page, f"/panel/oauth-apps/{client_id}/redirect-uris").values("redirect_uris") == [REDIRECT]
    action = f"/panel/oauth-apps/{client_id}/redirect-uris"
    bad = submit(browser, page, action, {"redirect_uris": "data:text/html,hi"})
    assert bad.status_code == 400 and field_error(bad, "redirect_uris")
    saved = follow(
        browser, submit(browser, page, action, {"redirect_uris": "https://a.example/cb\r\nhttps://b.example/cb"})
    )
    assert "saved" in text(saved)
    assert admin.sql("SELECT redirect_uris FROM oauth_clients WHERE id = %(i)s", {"i": client_id}) == [
        {"redirect_uris": ["https://a.example/cb", "https://b.example/cb"]}
    ]
    confirm = open_page(browser, f"/panel/oauth-apps/{client_id}/delete")
    assert "cannot be undone" in text(confirm)
    done = follow(browser, submit(browser, confirm, f"/panel/oauth-apps/{client_id}/delete"))
    assert "was deleted" in text(done)
    assert admin.sql("SELECT 1 FROM oauth_clients WHERE id = %(i)s", {"i": client_id}) == []
    assert browser.get(f"/panel/oauth-apps/{client_id}").status_code == 404
    assert [action for action, *_ in admin.audit_trail(client_id)] == ["oauth_client.created", "oauth_client.deleted"]


def test_another_accounts_apps_are_404(browser_of: Any, admin: Admin, owner: User, stranger: User) -> None:
    client_id = element_value(register(browser_of(owner)), "client-id")
    theirs = browser_of(stranger)
    token = form_of(open_page(theirs, "/panel/oauth-apps"), "/panel/oauth-apps").values("csrf_token")[0]
    assert client_id not in open_page(theirs, "/panel/oauth-apps").text
    for path in (
        f"/panel/oauth-apps/{client_id}",
        f"/panel/oauth-apps/{client_id}/delete",
        "/panel/oauth-apps/app_nope",
    ):
        assert theirs.get(path).status_code == 404, path
    for path in (f"/panel/oauth-apps/{client_id}/redirect-uris", f"/panel/oauth-apps/{client_id}/delete"):
        answer = theirs.http.post(path, data={"csrf_token": token, "redirect_uris": "https://evil.example/cb"})
        assert answer.status_code == 404, path
    assert admin.sql("SELECT redirect_uris FROM oauth_clients WHERE id = %(i)s", {"i": client_id}) == [
        {"redirect_uris": [REDIRECT]}
    ]


def _authorize(
    browser: Browser, client: httpx.Client, client_id: str, scope: str = "read:profile", secret: str | None = None
) -> str:
    """Consent to a client on the OAuth server's own pages; its access token."""
    return _tokens(browser, client, client_id, scope, secret)["access_token"]


def _tokens(
    browser: Browser, client: httpx.Client, client_id: str, scope: str, secret: str | None = None
) -> dict[str, str]:
    """Consent to a client (PKCE, and its secret when confidential); the token endpoint's answer."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    params = {
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "scope": scope,
        "state": "s1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    consent = browser.get("/oauth/authorize", params=params)
    assert consent.status_code == 200, consent.text
    answer = submit(browser, consent, "/oauth/authorize", button=("decision", "approve"))
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(see_other(answer)).query)["code"][0]
    tokens = client.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
            **({"client_secret": secret} if secret else {}),
        },
    )
    assert tokens.status_code == 200, tokens.text
    answer: dict[str, str] = tokens.json()
    return answer


def test_authorized_apps_and_revoke_access(
    browser_of: Any, admin: Admin, owner: User, stranger: User, client: httpx.Client
) -> None:
    developer = browser_of(stranger)
    client_id = element_value(register(developer, name="Calendar Sync", client_type="public"), "client-id")
    person = browser_of(owner)
    assert "not authorized any application" in text(open_page(person, "/panel/authorized-apps"))
    access = _authorize(person, client, client_id)
    assert client.get("/v1/profile.me", headers=bearer(access)).status_code == 200
    assert client.get("/v1/profile.export", headers=bearer(access)).status_code == 200
    exported = [entry for entry in admin.audit_trail(owner.user_id) if entry[0] == "profile.exported"]
    assert exported == [("profile.exported", "oauth_client", client_id)], "a token acts as its application"

    page = open_page(person, "/panel/authorized-apps")
    assert "Calendar Sync" in text(page) and "read:profile" in text(page)
    assert "Calendar Sync" not in text(open_page(developer, "/panel/authorized-apps")), "per person"
    done = follow(person, submit(person, page, "/panel/authorized-apps/revoke"))
    assert "Access was revoked" in text(done) and "Calendar Sync" not in text(done)
    assert client.get("/v1/profile.me", headers=bearer(access)).status_code == 401
    grants = [entry for entry in admin.audit_trail(client_id) if entry[0].startswith("oauth_grant.")]
    assert grants == [("oauth_grant.approved", "user", owner.user_id), ("oauth_grant.revoked", "user", owner.user_id)]


def test_rotating_a_client_secret_shows_it_once_and_keeps_every_authorization(
    browser_of: Any, admin: Admin, owner: User, stranger: User, client: httpx.Client
) -> None:
    developer = browser_of(stranger)
    registered = register(developer, name="Payroll Bridge", scopes=["read:profile"])
    client_id, old = element_value(registered, "client-id"), element_value(registered, "client-secret")
    tokens = _tokens(browser_of(owner), client, client_id, "read:profile", old)

    page = open_page(developer, f"/panel/oauth-apps/{client_id}")
    location = see_other(submit(developer, page, f"/panel/oauth-apps/{client_id}/secret"))
    new = element_value(open_page(developer, location), "client-secret")
    assert new.startswith("hsec_") and new != old
    assert new not in open_page(developer, location).text, "shown once"

    def refresh(refresh_token: str, secret: str) -> httpx.Response:
        data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
        return client.post("/oauth/token", data={**data, "client_secret": secret})

    assert refresh(tokens["refresh_token"], old).status_code == 401, "the old secret stops at once"
    assert client.get("/v1/profile.me", headers=bearer(tokens["access_token"])).status_code == 200, "tokens stay"
    refreshed = refresh(tokens["refresh_token"], new)
    assert refreshed.status_code == 200, "the person's authorization stays: no new consent"

    theirs = browser_of(owner)
    token = form_of(open_page(theirs, "/panel"), "/web/signout").values("csrf_token")[0]
    answer = theirs.http.post(f"/panel/oauth-apps/{client_id}/secret", data={"csrf_token": token})
    assert answer.status_code == 404, "another account's application"
    public_id = element_value(register(developer, client_type="public"), "client-id")
    page = open_page(developer, f"/panel/oauth-apps/{public_id}")
    assert f"/panel/oauth-apps/{public_id}/secret" not in page.text


def test_renaming_an_app_and_narrowing_its_scopes_reach_existing_tokens(
    browser_of: Any, admin: Admin, owner: User, stranger: User, client: httpx.Client
) -> None:
    developer = browser_of(stranger)
    client_id = element_value(register(developer, name="Sync", client_type="public"), "client-id")
    person = browser_of(owner)
    access = _authorize(person, client, client_id, scope="read:profile read:jobs")
    assert client.get("/v1/profile.me", headers=bearer(access)).status_code == 200

    page = open_page(developer, f"/panel/oauth-apps/{client_id}")
    action = f"/panel/oauth-apps/{client_id}/edit"
    bad = submit(developer, page, action, {"name": "", "scopes": ["read:jobs"]})
    assert bad.status_code == 400 and field_error(bad, "name")
    assert submit(developer, page, action, {"scopes": []}).status_code == 400
    done = follow(developer, submit(developer, page, action, {"name": "Calendar Sync", "scopes": ["read:jobs"]}))
    assert "Calendar Sync" in text(done) and "Scopes taken away" in text(done)

    assert client.get("/v1/profile.me", headers=bearer(access)).status_code == 403, "narrowed at the next request"
    assert client.get("/v1/jobs.list", headers=bearer(access)).status_code == 200
    authorized = text(open_page(person, "/panel/authorized-apps"))
    assert "Calendar Sync" in authorized and "read:profile" not in authorized

    follow(developer, submit(developer, page, action, {"name": "Calendar Sync", "scopes": ["read:profile"]}))
    assert client.get("/v1/jobs.list", headers=bearer(access)).status_code == 401, "a grant left with no scope ends"
    assert client.get("/v1/profile.me", headers=bearer(access)).status_code == 401, "and widening brings nothing back"


# --- caps on what an account may create (docs/security.md) -------------------------------------------------------


def form_error(page: httpx.Response) -> str:
    """The error shown above a form, about the form as a whole."""
    match = re.search(r'<p class="field-error" id="form-error" role="alert">([^<]*)</p>', page.text)
    assert match, f"no error above the form: {page.text[:3000]}"
    return html.unescape(match.group(1))


def test_an_account_has_at_most_50_active_keys(browser_of: Any, admin: Admin, owner: User) -> None:
    made = [admin.api_key(owner, scopes="read:jobs") for _ in range(50)]
    with pytest.raises(ops.AdminError, match="50 active keys"):
        admin.api_key(owner, scopes="read:jobs")
    browser = browser_of(owner)
    fill = {"name": "one too many", "scopes": ["read:jobs"], "mode": "test"}
    answer = submit(browser, open_page(browser, "/panel/api-keys"), "/panel/api-keys", fill)
    assert answer.status_code == 400 and "revoke one first" in form_error(answer)
    admin.revoke(made[0]["id"])
    assert see_other(submit(browser, open_page(browser, "/panel/api-keys"), "/panel/api-keys", fill))


def test_an_account_has_at_most_20_webhook_endpoints(browser_of: Any, admin: Admin, owner: User) -> None:
    """Each event goes to every endpoint: unbounded, one account could multiply its events against any URL."""
    for n in range(20):
        admin.webhook(owner, f"https://receiver.example/{n}", ["job.published"])
    with pytest.raises(ops.AdminError, match="20 endpoints"):
        admin.webhook(owner, "https://receiver.example/21", ["job.published"])
    browser = browser_of(owner)
    fill = {"url": "https://receiver.example/21", "event_kinds": ["job.published"]}
    answer = submit(browser, open_page(browser, "/panel/webhooks"), "/panel/webhooks", fill)
    assert answer.status_code == 400 and "delete one first" in form_error(answer)
    assert len(admin.sql("SELECT 1 FROM webhook_endpoints WHERE account_id = %(a)s", {"a": owner.account_id})) == 20


def test_an_account_has_at_most_20_oauth_clients(browser_of: Any, admin: Admin, owner: User) -> None:
    for n in range(20):
        admin.run(
            ops.create_oauth_client,
            admin.settings,
            admin.vocabulary,
            email=owner.email,
            name=f"app {n}",
            redirect_uris=[REDIRECT],
            public=True,
        )
    with pytest.raises(ops.AdminError, match="20 applications"):
        admin.run(
            ops.create_oauth_client,
            admin.settings,
            admin.vocabulary,
            email=owner.email,
            name="one too many",
            redirect_uris=[REDIRECT],
            public=True,
        )
    browser = browser_of(owner)
    fill = {"name": "one too many", "redirect_uris": REDIRECT, "client_type": "public", "scopes": ["read:jobs"]}
    answer = submit(browser, open_page(browser, "/panel/oauth-apps"), "/panel/oauth-apps", fill)
    assert answer.status_code == 400 and "delete one first" in form_error(answer)


def test_concurrent_creations_cannot_pass_the_cap_together(admin: Admin, owner: User) -> None:
    for n in range(18):
        admin.webhook(owner, f"https://receiver.example/{n}", ["job.published"])

    async def race() -> list[BaseException | None]:
        async def one(n: int) -> None:
            async with await ops.connect(admin.database_url) as conn:
                await ops.create_webhook(
                    conn, admin.webhooks, email=owner.email, url=f"https://r.example/{n}", events=["job.published"]
                )

        return await asyncio.gather(*(one(n) for n in range(6)), return_exceptions=True)

    outcomes = asyncio.run(race())
    assert sum(outcome is None for outcome in outcomes) == 2
    assert len(admin.sql("SELECT 1 FROM webhook_endpoints WHERE account_id = %(a)s", {"a": owner.account_id})) == 20


def test_the_panels_changes_are_limited_per_person(database: str, admin: Admin, tmp_path: Any) -> None:
    limited = settings_for(database, DATA_DIR=str(tmp_path), PANEL_WRITE_LIMIT_PER_USER="3/minute")
    person = admin.user("employer")
    with LiveServer(limited) as live:
        browser = signed_in(live, person)
        page = open_page(browser, "/panel/webhooks")
        answers = [
            submit(browser, page, "/panel/webhooks", {"url": "nope", "event_kinds": ["job.published"]}).status_code
            for _ in range(4)
        ]
        browser.close()
    assert answers == [400, 400, 400, 429]


def test_billing_follows_the_apis_roles(browser_of: Any, admin: Admin) -> None:
    """A candidate may not read an account's billing through the API, nor through the panel."""
    candidate = admin.user("candidate")
    browser = browser_of(candidate)
    page = browser.get("/panel/billing")
    assert page.status_code == 403 and "belongs to hiring accounts" in text(page)
    assert 'href="/panel/billing"' not in open_page(browser, "/panel").text
