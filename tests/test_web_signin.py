"""The web sign-in (docs/oauth.md, docs/decisions.md): the form, server-side sessions and their cookie, CSRF on every
form,
sign-out, local-only `?next=`, brute-force throttling, and the authorized-apps page behind it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from http.cookies import SimpleCookie
from typing import Any

import httpx
import pytest

from tests.browser import Browser, form, forms, location, text
from tests.support import Admin, LiveServer, User, settings_for


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Large per-e-mail budgets: this module signs the same people in many times (the throttle has its own
    servers below)."""
    return settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("data")), SIGNIN_LIMIT_PER_EMAIL="100000/minute")


def set_cookies(response: httpx.Response) -> dict[str, Any]:
    """The Set-Cookie headers of a response, by cookie name."""
    jar: dict[str, Any] = {}
    for header in response.headers.get_list("set-cookie"):
        parsed = SimpleCookie()
        parsed.load(header)
        jar.update(parsed)
    return jar


def stored(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def sessions_of(admin: Admin, user: User) -> int:
    return int(admin.sql("SELECT count(*) AS n FROM web_sessions WHERE user_id = %(u)s", {"u": user.user_id})[0]["n"])


# --- the form -----------------------------------------------------------------------------------------------


def test_sign_in_page_has_the_stable_form(browser: Browser) -> None:
    page = browser.get("/web/signin")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    signin = form(page, "/web/signin")
    assert {"email", "password", "csrf_token", "next"} <= signin.names()
    assert signin.value("csrf_token")
    assert signin.value("next") == "/web", "without next: the landing that knows who you are"


def test_pages_carry_security_headers(browser: Browser) -> None:
    page = browser.get("/web/signin")
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "script-src" not in policy
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert page.headers["Cache-Control"] == "no-store"
    assert "https://" not in page.text, "no CDN: every asset is served locally"
    sheet = browser.get("/web/static/style.css")
    assert sheet.status_code == 200 and sheet.headers["content-type"].startswith("text/css")


# --- signing in ---------------------------------------------------------------------------------------------


def test_sign_in_starts_a_server_side_session(browser: Browser, admin: Admin, candidate: User) -> None:
    answer = browser.sign_in(candidate, "/web/apps?tab=1")
    assert location(answer) == "/web/apps?tab=1"
    cookie = set_cookies(answer)["hire_session"]
    assert cookie["httponly"] is True
    assert cookie["samesite"].lower() == "lax"
    assert cookie["path"] == "/"
    assert int(cookie["max-age"]) == 12 * 3600
    assert not cookie["secure"], "plain HTTP outside production"
    rows = admin.sql(
        "SELECT user_id::text AS user_id FROM web_sessions WHERE token_hash = %(h)s", {"h": stored(cookie.value)}
    )
    assert rows == [{"user_id": candidate.user_id}], "only the hash of the session id is stored"

    page = browser.get("/web/apps")
    assert page.status_code == 200 and candidate.email in text(page)


def test_each_sign_in_gets_a_new_session_id(live: LiveServer, employer: User) -> None:
    """Never the id a browser already carried (session fixation), never the id of another sign-in."""
    planted = "planted-by-an-attacker"
    ids = []
    for _ in range(2):
        fresh = Browser(live.url)
        try:
            fresh.http.cookies.set("hire_session", planted)
            ids.append(set_cookies(fresh.sign_in(employer))["hire_session"].value)
        finally:
            fresh.close()
    assert len({planted, *ids}) == 3


def test_signing_in_again_ends_the_replaced_session(
    browser: Browser, admin: Admin, candidate: User, employer: User
) -> None:
    """Two sign-in tabs of one browser: the second sign-in (here as someone else) ends the first session."""
    first_tab, second_tab = browser.get("/web/signin"), browser.get("/web/signin")
    fill = {"email": candidate.email, "password": candidate.password}
    first = set_cookies(browser.submit(first_tab, "/web/signin", fill=fill))["hire_session"].value
    fill = {"email": employer.email, "password": employer.password}
    answer = browser.submit(second_tab, "/web/signin", fill=fill)
    assert location(answer) == "/web"
    assert admin.sql("SELECT 1 FROM web_sessions WHERE token_hash = %(h)s", {"h": stored(first)}) == []
    assert employer.email in text(browser.get("/web/apps"))


@pytest.mark.parametrize(
    ("who", "landing", "shown"), [("employer", "/panel", "Overview"), ("candidate", "/me", "Hello")]
)
def test_sign_in_without_next_lands_on_a_page_of_ones_own(
    browser: Browser, request: pytest.FixtureRequest, who: str, landing: str, shown: str
) -> None:
    """No dead end: an employer lands on the panel, a candidate on their profile, from the form or from `/web`
    (where the "e-mail confirmed" page's sign-in leads too)."""
    user: User = request.getfixturevalue(who)
    assert location(browser.get("/web")) == "/web/signin?next=%2Fweb", "signed out: the form first"
    assert location(browser.sign_in(user)) == "/web"
    assert location(browser.get("/web")) == landing
    assert location(browser.get("/web/signin")) == "/web", "signed in: straight on"
    page = browser.get(landing)
    assert page.status_code == 200 and shown in text(page)


def test_signed_in_browser_skips_the_form(browser: Browser, employer: User) -> None:
    browser.sign_in(employer)
    assert location(browser.get("/web/signin", params={"next": "/web/apps?x=1"})) == "/web/apps?x=1"


@pytest.mark.parametrize("which", ["wrong password", "unknown e-mail"])
def test_wrong_credentials_show_the_form_again(browser: Browser, candidate: User, which: str) -> None:
    page = browser.get("/web/signin")
    email = candidate.email if which == "wrong password" else "nobody@example.test"
    answer = browser.submit(page, "/web/signin", fill={"email": email, "password": "wrong"})
    assert answer.status_code == 400
    assert "The e-mail or password is wrong." in text(answer)
    assert "hire_session" not in set_cookies(answer)
    assert form(answer, "/web/signin").value("email") == email


def test_email_is_matched_case_insensitively(browser: Browser, candidate: User) -> None:
    page = browser.get("/web/signin")
    answer = browser.submit(
        page, "/web/signin", fill={"email": candidate.email.upper(), "password": candidate.password}
    )
    assert location(answer) == "/web"


@pytest.mark.parametrize(
    "target",
    ["https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)", "evil", "/%0a/x\n"],
)
def test_next_returns_only_to_local_paths(browser: Browser, candidate: User, target: str) -> None:
    assert location(browser.sign_in(candidate, target)) == "/web"


def test_next_keeps_a_local_path_with_its_query(browser: Browser, candidate: User) -> None:
    target = "/oauth/authorize?client_id=x&state=a%20b"
    assert location(browser.sign_in(candidate, target)) == target


# --- CSRF ---------------------------------------------------------------------------------------------------


def test_sign_in_without_csrf_token_is_refused(browser: Browser, candidate: User) -> None:
    page = browser.get("/web/signin")
    answer = browser.submit(
        page, "/web/signin", fill={"email": candidate.email, "password": candidate.password}, drop=["csrf_token"]
    )
    assert answer.status_code == 403
    assert "hire_session" not in set_cookies(answer)


def test_sign_in_with_a_wrong_csrf_token_is_refused(browser: Browser, candidate: User) -> None:
    page = browser.get("/web/signin")
    fill = {"email": candidate.email, "password": candidate.password, "csrf_token": "x" * 43}
    assert browser.submit(page, "/web/signin", fill=fill).status_code == 403


def test_another_browsers_csrf_token_is_refused(live: LiveServer, browser: Browser, candidate: User) -> None:
    """Login CSRF: an attacker's own page token, planted in the victim's browser, does not fit its cookie."""
    attacker = Browser(live.url)
    try:
        planted = form(attacker.get("/web/signin"), "/web/signin").value("csrf_token")
    finally:
        attacker.close()
    page = browser.get("/web/signin")
    fill = {"email": candidate.email, "password": candidate.password, "csrf_token": planted}
    assert browser.submit(page, "/web/signin", fill=fill).status_code == 403


def test_sign_in_without_the_pre_session_cookie_is_refused(live: LiveServer, candidate: User) -> None:
    page_browser = Browser(live.url)
    try:
        page = page_browser.get("/web/signin")
        page_browser.http.cookies.clear()
        fill = {"email": candidate.email, "password": candidate.password}
        assert page_browser.submit(page, "/web/signin", fill=fill).status_code == 403
    finally:
        page_browser.close()


# --- signing out, expiry ------------------------------------------------------------------------------------


def test_sign_out_ends_the_session(browser: Browser, admin: Admin, employer: User) -> None:
    cookie = set_cookies(browser.sign_in(employer))["hire_session"].value
    page = browser.get("/web/apps")
    answer = browser.submit(page, "/web/signout")
    assert location(answer) == "/web/signin"
    cleared = set_cookies(answer)["hire_session"]
    assert cleared.value == "" or int(cleared["max-age"]) <= 0
    assert admin.sql("SELECT 1 FROM web_sessions WHERE token_hash = %(h)s", {"h": stored(cookie)}) == []
    browser.http.cookies.set("hire_session", cookie)  # a copy of the old cookie is worth nothing now
    assert location(browser.get("/web/apps")).startswith("/web/signin")


def test_sign_out_without_csrf_token_is_refused(browser: Browser, employer: User) -> None:
    browser.sign_in(employer)
    page = browser.get("/web/apps")
    assert browser.submit(page, "/web/signout", drop=["csrf_token"]).status_code == 403
    assert browser.get("/web/apps").status_code == 200, "still signed in"


def test_expired_session_is_signed_out(browser: Browser, admin: Admin, candidate: User) -> None:
    cookie = set_cookies(browser.sign_in(candidate))["hire_session"].value
    admin.sql(
        "UPDATE web_sessions SET expires_at = now() - interval '1 second' WHERE token_hash = %(h)s",
        {"h": stored(cookie)},
    )
    assert location(browser.get("/web/apps")) == "/web/signin?next=%2Fweb%2Fapps"


def test_every_form_of_a_signed_in_page_has_a_csrf_token(browser: Browser, candidate: User) -> None:
    browser.sign_in(candidate)
    page = browser.get("/web/apps")
    assert forms(page.text)
    for each in forms(page.text):
        assert each.value("csrf_token"), each


# --- throttling ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def throttled(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings = settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("throttled")),
        SIGNIN_LIMIT_PER_EMAIL="3/minute",
        SIGNIN_LIMIT_PER_ADDRESS="3/minute",
    )
    with LiveServer(settings) as server:
        yield server


def attempt(server: LiveServer, email: str, password: str, address: str) -> httpx.Response:
    """One sign-in from `address` (the loopback proxy is trusted with X-Forwarded-For)."""
    browser = Browser(server.url, **{"X-Forwarded-For": address})
    try:
        page = browser.get("/web/signin")
        return browser.submit(page, "/web/signin", fill={"email": email, "password": password})
    finally:
        browser.close()


def assert_rate_limited_page(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert "hire_session" not in set_cookies(response)


def test_fourth_web_sign_in_for_one_email_is_rate_limited(throttled: LiveServer, admin: Admin) -> None:
    person = admin.user("candidate")
    for n in range(3):
        assert attempt(throttled, person.email, "wrong", f"198.51.100.{n + 20}").status_code == 400
    assert_rate_limited_page(attempt(throttled, person.email, person.password, "198.51.100.30"))


def test_fourth_web_sign_in_from_one_address_is_rate_limited(throttled: LiveServer, admin: Admin) -> None:
    person = admin.user("employer")
    for n in range(3):
        assert attempt(throttled, f"nobody-{n}@example.test", "wrong", "203.0.113.70").status_code == 400
    assert_rate_limited_page(attempt(throttled, person.email, person.password, "203.0.113.70"))
    assert attempt(throttled, person.email, person.password, "203.0.113.71").status_code == 303


# --- production cookies -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def production(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings = settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("production")),
        SERVICE_ENV="production",
        PUBLIC_URL="https://hire.example",
    )
    with LiveServer(settings) as server:
        yield server


def test_production_cookies_are_secure_and_host_bound(production: LiveServer, admin: Admin) -> None:
    person = admin.user("candidate")
    with httpx.Client(base_url=production.url, headers={"X-Forwarded-Proto": "https"}) as http:
        page = http.get("/web/signin")
        presession = set_cookies(page)["__Host-hire_signin"]
        assert presession["secure"] is True and presession["httponly"] is True
        csrf = form(page, "/web/signin").value("csrf_token")
        answer = http.post(
            "/web/signin",
            data={"email": person.email, "password": person.password, "csrf_token": csrf},
            headers={"Cookie": f"__Host-hire_signin={presession.value}"},
        )
    cookie = set_cookies(answer)["__Host-hire_session"]
    assert answer.status_code == 303
    assert cookie["secure"] is True and cookie["httponly"] is True and cookie["samesite"].lower() == "lax"
    assert cookie["path"] == "/" and not cookie["domain"]
