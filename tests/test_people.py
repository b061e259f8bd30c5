"""People (docs/people.md): sign-up, e-mail verification, password reset and change, through a real SMTP
server (aiosmtpd) and by following the links of the messages it received."""

from __future__ import annotations

import hashlib
import statistics
import time
import uuid
from typing import Any

import httpx
import pytest

from rpc.ops import admin as ops
from tests.browser import Browser, form, location, text
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, LiveServer, User, bearer, follow_link, me, refused, settings_for

CHECK_EMAIL = {"status": "check_email"}
PASSWORD = "a long enough password"


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"), MAIL_FROM="Hire <hello@hire.test>")


def new_email() -> str:
    return f"person-{uuid.uuid4().hex[:10]}@example.test"


def sign_up(client: httpx.Client, email: str, password: str = PASSWORD, **extra: Any) -> None:
    answer = client.post("/auth/signup", json={"email": email, "password": password, "role": "employer", **extra})
    assert answer.status_code == 202, answer.text
    assert answer.json() == CHECK_EMAIL
    assert answer.headers["Cache-Control"] == "no-store"


def login(client: httpx.Client, email: str, password: str) -> httpx.Response:
    return client.post("/auth/login", json={"email": email, "password": password})


def token_of(link: str) -> str:
    return link.partition("token=")[2]


def users_with(admin: Admin, email: str) -> list[dict[str, Any]]:
    return admin.sql(
        "SELECT id::text AS id, account_id::text AS account_id, role, display_name FROM users WHERE email = %(e)s",
        {"e": email},
    )


# --- sign-up and verification --------------------------------------------------------------------------------


def test_sign_up_verify_then_sign_in(client: httpx.Client, smtp: SmtpServer, admin: Admin) -> None:
    email = new_email()
    sign_up(client, email, display_name="Ada", account_name="Analytical Engines Ltd")
    [user] = users_with(admin, email)
    assert user["role"] == "employer"
    account = admin.sql("SELECT name FROM accounts WHERE id = %(a)s", {"a": user["account_id"]})[0]
    assert account["name"] == "Analytical Engines Ltd"
    refused(login(client, email, "a long enough password"), 403, "email_not_verified")

    mail = smtp.inbox.wait_for(email)
    assert mail.message["From"] == "Hire <hello@hire.test>"
    assert mail.message["Subject"] == "Confirm your e-mail address"
    link = mail.link()
    assert link.startswith("/web/verify?token=")
    assert link in mail.html.replace("&amp;", "&"), "the HTML part carries the same link"
    assert "<img" not in mail.html and "src=" not in mail.html, "nothing loaded from elsewhere: no tracking"

    page = follow_link(client, link)
    assert page.status_code == 200 and "confirmed" in text(page)
    assert login(client, email, "a long enough password").status_code == 200
    again = follow_link(client, link)
    assert again.status_code == 400, "a verification link works once"
    assert "already used" in text(again)
    assert form(again, "/web/verify/resend"), "the page offers a new link"


def test_a_known_email_gets_the_same_answer_and_a_reset_link(
    client: httpx.Client, smtp: SmtpServer, admin: Admin, employer: User
) -> None:
    accounts_before = admin.sql("SELECT count(*) AS n FROM accounts")[0]["n"]
    sign_up(client, employer.email, password="an attacker's password")
    mail = smtp.inbox.wait_for(employer.email)
    assert mail.message["Subject"] == "You already have an account"
    assert mail.link().startswith("/web/reset?token=")
    assert admin.sql("SELECT count(*) AS n FROM accounts")[0]["n"] == accounts_before, "nothing was created"
    assert login(client, employer.email, employer.password).status_code == 200, "the password did not change"
    refused(login(client, employer.email, "an attacker's password"), 401, "invalid_credentials")


@pytest.mark.parametrize(
    ("password", "why"),
    [("short pw", "at least 10"), ("SAME@example.test", "e-mail"), ("password123", "most common")],
)
def test_password_rules(client: httpx.Client, admin: Admin, password: str, why: str) -> None:
    email = "same@example.test" if why == "e-mail" else new_email()
    answer = client.post("/auth/signup", json={"email": email, "password": password, "role": "candidate"})
    error = refused(answer, 422, "invalid_params")
    assert error["details"]["errors"][0]["field"] == "password" and why in error["details"]["errors"][0]["message"]
    assert users_with(admin, email) == [], "a refused sign-up changes nothing"


def test_signing_up_again_never_changes_who_can_sign_in(client: httpx.Client, smtp: SmtpServer, admin: Admin) -> None:
    """The takeover: a second sign-up for an unverified address, then the first person follows their own link."""
    email = new_email()
    sign_up(client, email, password="the owner's own password")
    owners_link = smtp.inbox.wait_for(email).link()
    sign_up(client, email, password="an intruder's password")
    intruders_link = smtp.inbox.wait_for(email, count=2).link()
    assert intruders_link != owners_link
    assert follow_link(client, owners_link).status_code == 200
    refused(login(client, email, "an intruder's password"), 401, "invalid_credentials")
    assert login(client, email, "the owner's own password").status_code == 200
    assert follow_link(client, intruders_link).status_code == 400, "the owner's verification voided the other link"
    refused(login(client, email, "an intruder's password"), 401, "invalid_credentials")
    # the other way round: whoever follows the second sign-up's link gets in with the second password only
    other = new_email()
    sign_up(client, other, password="the first password here")
    sign_up(client, other, password="the second password here")
    assert follow_link(client, smtp.inbox.wait_for(other, count=2).link()).status_code == 200
    refused(login(client, other, "the first password here"), 401, "invalid_credentials")
    assert login(client, other, "the second password here").status_code == 200


def test_an_earlier_sign_up_decides_neither_the_role_nor_the_account_of_whoever_follows_a_later_link(
    client: httpx.Client, smtp: SmtpServer, admin: Admin
) -> None:
    """Someone signs up first with another's address as an employer of "Evil Corp"; the address's owner signs up
    as a candidate and follows their own link: they are the candidate they asked to be, in an account of theirs."""
    email = new_email()
    sign_up(client, email, password="an intruder's password", role="employer", account_name="Evil Corp",
            display_name="CEO")  # fmt: skip
    sign_up(client, email, password="the owner's own password", role="candidate", display_name="Grace")
    assert follow_link(client, smtp.inbox.wait_for(email, count=2).link()).status_code == 200
    [user] = users_with(admin, email)
    assert (user["role"], user["display_name"]) == ("candidate", "Grace")
    account = admin.sql("SELECT name FROM accounts WHERE id = %(a)s", {"a": user["account_id"]})[0]
    assert account["name"] == email, "a candidate's account is named by the address, never by the first sign-up"


def test_a_link_sent_again_confirms_and_asks_for_a_password(
    browser: Browser, client: httpx.Client, smtp: SmtpServer
) -> None:
    """A link asked for again carries no sign-up's password: its follower chooses one, and no earlier one works."""
    email = new_email()
    sign_up(client, email, password="someone else's password")
    page = browser.get("/web/signin")
    answer = browser.submit(page, "/web/signin", fill={"email": email, "password": "someone else's password"})
    assert browser.submit(answer, "/web/verify/resend").status_code == 200
    form_page = browser.open_link(smtp.inbox.wait_for(email, count=2).link())
    assert form_page.status_code == 200 and str(form_page.url).endswith("/web/reset")
    refused(login(client, email, "someone else's password"), 401, "invalid_credentials")
    done = browser.submit(form_page, "/web/reset", fill={"password": "the mailbox owner's password"})
    assert done.status_code == 200
    assert login(client, email, "the mailbox owner's password").status_code == 200


@pytest.mark.parametrize(
    "address",
    [
        "x<attacker@evil.test>",
        "Boss <boss@example.test>",
        "a,b@evil.test",
        "ceo(attacker@evil.test)",
        "ceo@example.test (attacker@evil.test)",
        "a\r\nBcc: attacker@evil.test",
        "new\nline@example.test",
        '"quoted"@example.test',
        "trailing@example.test\n",
        "\tleading@example.test",
        "unit@example.test\x1f",
    ],
)
def test_only_plain_addresses_are_accepted(client: httpx.Client, admin: Admin, address: str) -> None:
    answer = client.post("/auth/signup", json={"email": address, "password": "x" * 12, "role": "candidate"})
    refused(answer, 422, "invalid_params")
    assert "plain e-mail address" in answer.json()["error"]["details"]["errors"][0]["message"]
    refused(client.post("/auth/password-reset", json={"email": address}), 422, "invalid_params")
    with pytest.raises(ops.AdminError, match="--email"):
        admin.run(ops.create_user, email=address, password="x" * 12, role="candidate")


@pytest.mark.parametrize("field", ["display_name", "account_name"])
def test_names_with_control_characters_are_refused(client: httpx.Client, admin: Admin, field: str) -> None:
    email = new_email()
    body = {"email": email, "password": "x" * 12, "role": "employer", field: "Acme\nSubject: pay now"}
    answer = client.post("/auth/signup", json=body)
    refused(answer, 422, "invalid_params")
    assert answer.json()["error"]["details"]["errors"][0]["field"] == field
    assert users_with(admin, email) == []
    person = admin.user("candidate")
    update = client.post("/v1/profile.update", json={"display_name": "Ada\r\nBcc: x"}, headers=bearer(person.token))
    refused(update, 422, "invalid_params")


def test_bad_sign_ups_are_refused_clearly(client: httpx.Client) -> None:
    refused(
        client.post("/auth/signup", json={"email": new_email(), "password": "x" * 12, "role": "admin"}),
        422,
        "invalid_params",
    )
    refused(
        client.post("/auth/signup", json={"email": "not-an-address", "password": "x" * 12, "role": "candidate"}),
        422,
        "invalid_params",
    )
    refused(
        client.post("/auth/signup", content=b"[" * 10_000, headers={"Content-Type": "application/json"}),
        400,
        "invalid_json",
    )


def test_an_unverified_sign_in_offers_a_new_link(browser: Browser, client: httpx.Client, smtp: SmtpServer) -> None:
    email = new_email()
    sign_up(client, email)
    first = smtp.inbox.wait_for(email)
    page = browser.get("/web/signin")
    answer = browser.submit(page, "/web/signin", fill={"email": email, "password": "a long enough password"})
    assert answer.status_code == 403 and "Confirm your e-mail address" in text(answer)
    assert browser.submit(answer, "/web/verify/resend").status_code == 200
    second = smtp.inbox.wait_for(email, count=2)
    assert second.link() != first.link()
    assert browser.open_link(second.link()).status_code == 200


def test_links_are_random_hashed_and_not_kept_in_mail(client: httpx.Client, smtp: SmtpServer, admin: Admin) -> None:
    email = new_email()
    sign_up(client, email)
    token = token_of(smtp.inbox.wait_for(email).link())
    assert len(token) >= 43, "at least 256 bits, base64url"
    rows = admin.sql("SELECT token_hash FROM email_links WHERE email = %(e)s", {"e": email})
    assert [bytes(row["token_hash"]) for row in rows] == [hashlib.sha256(token.encode()).digest()]
    [message] = admin.sql("SELECT status, message_sealed FROM mail_messages WHERE recipient = %(e)s", {"e": email})
    assert message == {"status": "sent", "message_sealed": None}, "a sent message (with its live link) is dropped"


def test_an_expired_verification_link_does_nothing(
    database: str, smtp: SmtpServer, admin: Admin, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = mailing_settings(database, smtp, tmp_path_factory.mktemp("data"), VERIFY_LINK_LIFETIME="0")
    email = new_email()
    with LiveServer(settings) as server, server.client() as http:
        sign_up(http, email)
        link = smtp.inbox.wait_for(email).link()
        assert follow_link(http, link).status_code == 400
        refused(login(http, email, "a long enough password"), 403, "email_not_verified")


# --- password reset ------------------------------------------------------------------------------------------


def test_reset_ends_every_session_but_keeps_api_keys(
    client: httpx.Client, browser: Browser, smtp: SmtpServer, admin: Admin
) -> None:
    user = admin.user("employer")
    session = login(client, user.email, user.password).json()
    key = admin.api_key(user, scopes="read:profile")["key"]
    assert location(browser.sign_in(user)) and browser.get("/panel").status_code == 200
    assert me(client, session["access_token"]).status_code == 200

    answer = client.post("/auth/password-reset", json={"email": user.email})
    assert answer.status_code == 202 and answer.json() == CHECK_EMAIL
    link = smtp.inbox.wait_for(user.email).link()
    assert link.startswith("/web/reset?token=")
    confirm = client.post(
        "/auth/password-reset/confirm", json={"token": token_of(link), "password": "a brand new password"}
    )
    assert confirm.status_code == 200, confirm.text
    assert admin.sql(
        "SELECT account_id::text AS account_id, actor_id, client_address, user_agent IS NOT NULL AS agent "
        "FROM audit_entries WHERE action = 'password.reset' AND target_id = %(u)s",
        {"u": user.user_id},
    ) == [{"account_id": user.account_id, "actor_id": user.user_id, "client_address": "127.0.0.1", "agent": True}]

    refused(me(client, session["access_token"]), 401, "invalid_token")
    refused(me(client, user.token), 401, "invalid_token")
    refused(client.post("/auth/refresh", json={"refresh_token": session["refresh_token"]}), 401, "invalid_token")
    assert location(browser.get("/panel")).startswith("/web/signin"), "the web session ended"
    assert client.post("/v1/profile.me", headers=bearer(key)).status_code == 200, "API keys stay"
    refused(login(client, user.email, user.password), 401, "invalid_credentials")
    assert login(client, user.email, "a brand new password").status_code == 200

    again = client.post(
        "/auth/password-reset/confirm", json={"token": token_of(link), "password": "another new password"}
    )
    refused(again, 400, "invalid_token")


def test_reset_for_an_unknown_email_answers_the_same_and_sends_nothing(client: httpx.Client, smtp: SmtpServer) -> None:
    email = new_email()
    answer = client.post("/auth/password-reset", json={"email": email})
    assert answer.status_code == 202 and answer.json() == CHECK_EMAIL
    known = client.post("/auth/password-reset", json={"email": "nobody-else@example.test"})
    assert known.content == answer.content
    refused(
        client.post("/auth/password-reset/confirm", json={"token": "x" * 43, "password": "whatever password"}),
        400,
        "invalid_token",
    )
    assert smtp.inbox.to(email) == []


def test_a_refused_new_password_keeps_the_link(client: httpx.Client, smtp: SmtpServer, admin: Admin) -> None:
    user = admin.user("candidate")
    client.post("/auth/password-reset", json={"email": user.email})
    token = token_of(smtp.inbox.wait_for(user.email).link())
    refused(
        client.post("/auth/password-reset/confirm", json={"token": token, "password": "short"}), 422, "invalid_params"
    )
    answer = client.post("/auth/password-reset/confirm", json={"token": token, "password": user.email.upper()})
    refused(answer, 422, "invalid_params")
    assert (
        client.post("/auth/password-reset/confirm", json={"token": token, "password": "good new password"}).status_code
        == 200
    )


def test_a_reset_link_for_a_changed_email_does_nothing(client: httpx.Client, smtp: SmtpServer, admin: Admin) -> None:
    user = admin.user("candidate")
    client.post("/auth/password-reset", json={"email": user.email})
    token = token_of(smtp.inbox.wait_for(user.email).link())
    admin.sql("UPDATE users SET email = %(e)s WHERE id = %(u)s", {"e": new_email(), "u": user.user_id})
    refused(
        client.post("/auth/password-reset/confirm", json={"token": token, "password": "taken over pw"}),
        400,
        "invalid_token",
    )


def test_the_web_reset_pages(browser: Browser, smtp: SmtpServer, admin: Admin, client: httpx.Client) -> None:
    user = admin.user("candidate")
    start = browser.get("/web/password-reset")
    assert browser.submit(start, "/web/password-reset", fill={"email": user.email}).status_code == 200
    link = smtp.inbox.wait_for(user.email).link()
    page = browser.open_link(link)
    assert page.status_code == 200
    assert page.headers["Referrer-Policy"] == "no-referrer", "the token never leaks to another site"
    assert "https://" not in page.text and "http://" not in page.text.replace(browser.http.base_url.host, "")
    assert browser.submit(page, "/web/reset", drop=["csrf_token"]).status_code == 403, "CSRF"
    done = browser.submit(page, "/web/reset", fill={"password": "the web's new password"})
    assert done.status_code == 200 and "signed out everywhere" in text(done)
    assert login(client, user.email, "the web's new password").status_code == 200
    used = browser.open_link(link)
    assert used.status_code == 400 and "/web/password-reset" in used.text


def test_forms_without_their_csrf_token_change_nothing(browser: Browser, admin: Admin) -> None:
    email = new_email()
    page = browser.get("/web/signup")
    fill = {"email": email, "password": "a long enough password", "role": "employer"}
    assert browser.submit(page, "/web/signup", fill=fill, drop=["csrf_token"]).status_code == 403
    assert browser.submit(page, "/web/signup", fill={**fill, "csrf_token": "forged"}).status_code == 403
    assert users_with(admin, email) == []


# --- limits --------------------------------------------------------------------------------------------------


def test_sign_up_and_reset_are_limited_per_email(
    database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = mailing_settings(database, smtp, tmp_path_factory.mktemp("data"), SIGNIN_LIMIT_PER_EMAIL="2/minute")
    email = new_email()
    with LiveServer(settings) as server, server.client() as http:
        sign_up(http, email)
        assert http.post("/auth/password-reset", json={"email": email}).status_code == 202
        limited = http.post("/auth/password-reset", json={"email": email.upper()})
        refused(limited, 429, "rate_limited")
        assert int(limited.headers["Retry-After"]) >= 1
        assert http.post("/auth/password-reset", json={"email": new_email()}).status_code == 202, "per e-mail"


# --- no probing by the clock ---------------------------------------------------------------------------------


def answer_ms(client: httpx.Client, path: str, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    assert client.post(path, json=body).status_code == 202
    return (time.perf_counter() - started) * 1000


def test_known_and_unknown_emails_take_the_same_time(client: httpx.Client, admin: Admin) -> None:
    """Interleaved, so that the machine's load weighs on both alike. Sign-up hashes the password either way;
    a reset does the work that differs (a link and its mail, or nothing) after answering."""
    known = [admin.user("employer").email for _ in range(3)]
    rounds = 15
    reset: dict[bool, list[float]] = {True: [], False: []}
    signup: dict[bool, list[float]] = {True: [], False: []}
    for i in range(rounds):
        for is_known in (True, False):
            email = known[i % 3] if is_known else new_email()
            reset[is_known].append(answer_ms(client, "/auth/password-reset", {"email": email}))
            body = {"email": email, "password": PASSWORD, "role": "employer"}
            signup[is_known].append(answer_ms(client, "/auth/signup", body))
    reset_gap = statistics.median(reset[True]) - statistics.median(reset[False])
    assert reset_gap < 5, (reset, "a known e-mail's reset answers no later than an unknown one's")
    signup_known, signup_unknown = statistics.median(signup[True]), statistics.median(signup[False])
    assert abs(signup_known - signup_unknown) < 0.25 * max(signup_known, signup_unknown), signup


def test_the_json_endpoints_follow_cors_and_the_pages_do_not(
    database: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    app = "https://app.example.test"
    settings = settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("data")), CORS_ALLOWED_ORIGINS=app)
    preflight = {
        "Origin": app,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    with LiveServer(settings) as server, server.client() as http:
        for path in ("/auth/signup", "/auth/password-reset", "/auth/password-reset/confirm"):
            answer = http.options(path, headers=preflight)
            assert answer.status_code == 204 and answer.headers["Access-Control-Allow-Origin"] == app, path
        answer = http.post("/auth/password-reset", json={"email": new_email()}, headers={"Origin": app})
        assert answer.status_code == 202 and answer.headers["Access-Control-Allow-Origin"] == app
        for page in ("/web/signup", "/web/password-reset"):
            assert "access-control-allow-origin" not in http.get(page, headers={"Origin": app}).headers


@pytest.mark.parametrize("path", ["/web/verify", "/web/reset", "/web/invite"])
def test_a_link_token_is_exchanged_for_a_cookie_and_a_clean_address(live: LiveServer, path: str) -> None:
    """Access logs and proxies see a token-carrying address once, answered by a redirect; the page has none."""
    with live.client() as http:
        answer = http.get(f"{path}?token=some-live-token")
        assert answer.status_code == 303 and answer.headers["Location"] == path
        cookie = answer.headers["Set-Cookie"].lower()
        assert cookie.startswith("hire_link=some-live-token;")
        for attribute in ("httponly", f"path={path}", "samesite=lax", "max-age=900"):
            assert attribute in cookie, (attribute, cookie)
        assert "secure" not in cookie, "Secure when the service is served over https"
        assert answer.headers["Referrer-Policy"] == "no-referrer" and answer.headers["Cache-Control"] == "no-store"
        page = http.get(path)
        assert page.status_code == 400, "an unknown token: the page says so"
        assert 'hire_link=""' in page.headers["Set-Cookie"] or "max-age=0" in page.headers["Set-Cookie"].lower()
