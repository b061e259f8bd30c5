"""The panel's share of docs/privacy.md through the live server: Settings > Audit log (the account's entries
newest first, filters, "Older" pages, the roles of `audit.list`, one account only) and the profile page's
"Download my data" (`profile.export`'s document as a file, audited, behind CSRF)."""

from __future__ import annotations

import datetime as dt
import html
import re
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from rpc.audit import log as audit_log
from rpc.ops import admin as ops
from rpc.panel import audit_log as audit_page
from rpc.panel.audit_labels import short_agent
from tests.browser import Browser
from tests.support import Admin, LiveServer, User, ok
from tests.test_panel import open_page, signed_in, submit, text
from tests.test_privacy import next_ids_cross_a_power_of_ten

Call = Callable[..., httpx.Response]
ENTRY_COLUMNS = ["Time", "Actor", "Action", "Target", "Client address", "User agent"]


@pytest.fixture
def browser_of(live: LiveServer) -> Iterator[Callable[[User], Browser]]:
    made: list[Browser] = []

    def make(user: User) -> Browser:
        made.append(signed_in(live, user))
        return made[-1]

    yield make
    for browser in made:
        browser.close()


def rows(page: httpx.Response) -> list[list[str]]:
    """The audit table's rows, each cell's text."""
    assert re.findall(r'<th scope="col">([^<]*)</th>', page.text) == ENTRY_COLUMNS
    body = page.text.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    found = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        found.append([" ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split()) for cell in cells])
    return found


def log_of(browser: Browser, **filters: str) -> httpx.Response:
    return open_page(browser, "/panel/audit-log?" + urllib.parse.urlencode(filters))


def older(page: httpx.Response) -> str | None:
    link = re.search(r'<a href="([^"]+)" rel="next">Older', page.text)
    return html.unescape(link.group(1)) if link else None


def target_ids(page: httpx.Response) -> list[str]:
    """The ids of the targets shown by what they are (each in its label's title)."""
    return re.findall(r'<span class="target" title="([^"]+)"', page.text)


def actions(page: httpx.Response) -> list[str]:
    return [row[2] for row in rows(page)]


# --- Settings > Audit log ---------------------------------------------------------------------------------------


def test_the_log_shows_the_accounts_entries_newest_first(browser_of: Any, admin: Admin) -> None:
    owner, stranger = admin.user("employer"), admin.user("employer")
    colleague = admin.user("employer", account_id=owner.account_id)
    browser = browser_of(owner)
    key = admin.api_key(colleague)
    admin.revoke(key["id"])
    foreign = admin.api_key(stranger)["id"]
    page = log_of(browser)
    assert 'href="/panel/audit-log" aria-current="page"' in page.text
    shown = rows(page)
    assert [row[2] for row in shown] == ["api_key.revoked", "api_key.created", "signin.succeeded", "plan.changed"]
    assert foreign not in page.text, "another account's entries stay there"
    revoked, _, signin, plan = shown
    assert revoked[1] == "operator" and revoked[3] == "key “test key”", "a target is shown as what it is"
    assert f'title="{key["id"]}">key “test key”' in page.text.replace("&#34;", '"'), "its id in the title"
    assert signin[1] == f"user {owner.email}", "a member's e-mail"
    assert f'<span title="{owner.user_id}">{owner.email}</span>' in page.text, "with their id in the title"
    assert signin[3] == owner.email and signin[4] == "127.0.0.1" and signin[5].startswith("python-httpx/")
    account = admin.sql("SELECT name FROM accounts WHERE id = %(a)s", {"a": owner.account_id})[0]["name"]
    assert plan[3] == f"account “{account}”"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", signin[0])
    options = re.findall(r'<option value="([^"]*)"', page.text)
    assert options == ["", *sorted(audit_log.ACTIONS)], "the action filter offers every action the log records"


def test_endpoints_and_invitations_are_shown_by_their_url_and_e_mail(browser_of: Any, admin: Admin) -> None:
    owner = admin.user("employer")
    endpoint = admin.webhook(owner, "https://hooks.example.com/hire", ["job.published"])
    admin.run(ops.invite, admin.settings, inviter_email=owner.email, invitee="new.colleague@example.com")
    page = log_of(browser_of(owner))
    targets = {row[2]: row[3] for row in rows(page)}
    assert targets["webhook.created"] == "https://hooks.example.com/hire", endpoint["id"]
    assert targets["member.invited"] == "invitation of new.colleague@example.com"


@pytest.mark.parametrize(
    ("agent", "shown"),
    [
        (
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
            "Chrome 120 on Linux",
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 "
            "Safari/537.36 Edg/120.0.2210.91",
            "Edge 120 on Windows",
        ),
        ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14.2; rv:121.0) Gecko/20100101 Firefox/121.0", "Firefox 121 on macOS"),
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            "Version/17.2 Mobile/15E148 Safari/604.1",
            "Safari 17 on iOS",
        ),
        ("curl/8.5.0", "curl/8.5.0"),
        ("python-httpx/0.27.0", "python-httpx/0.27.0"),
        (None, "—"),
    ],
)
def test_user_agents_are_shortened(agent: str | None, shown: str) -> None:
    assert short_agent(agent) == shown


def test_filters_narrow_the_log_and_older_pages_walk_it_once(
    browser_of: Any, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = admin.user("employer")
    browser = browser_of(owner)
    next_ids_cross_a_power_of_ten(admin)
    keys = [admin.api_key(owner)["id"] for _ in range(5)]
    monkeypatch.setattr(audit_page, "PER_PAGE", 2)  # the live server runs in this process
    seen, page = [], log_of(browser, action="api_key.created")
    while True:
        assert set(actions(page)) == {"api_key.created"}
        seen += target_ids(page)
        link = older(page)
        if link is None:
            break
        assert urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["action"] == ["api_key.created"]
        page = open_page(browser, link)
        assert "← Newest" in text(page)
    assert seen == keys[::-1], "every entry once, newest first"
    assert actions(log_of(browser, actor_id=owner.user_id)) == ["signin.succeeded"]
    assert "No entries match" in text(log_of(browser, since="2999-01-01"))
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert len(rows(log_of(browser, since=today, action="api_key.created"))) == 2


def test_a_bad_filter_is_shown_next_to_its_field(browser_of: Any, admin: Admin) -> None:
    browser = browser_of(admin.user("employer"))
    for filters, field in (
        ({"action": "api_key.stolen"}, "action"),
        ({"since": "31/12/2026"}, "since"),
        ({"actor_id": "x" * 101}, "actor_id"),
    ):
        page = browser.get("/panel/audit-log?" + urllib.parse.urlencode(filters))
        assert page.status_code == 400
        assert f'id="{field}-error"' in page.text and "<tbody>" not in page.text
    for cursor in ("garbage", "WzEsImFiYyJd"):  # malformed; well formed but of another query
        page = browser.get("/panel/audit-log", params={"cursor": cursor})
        assert page.status_code == 400 and "start again from the newest" in text(page)


def test_a_cursor_is_bound_to_its_filters(browser_of: Any, admin: Admin, monkeypatch: pytest.MonkeyPatch) -> None:
    owner = admin.user("employer")
    browser = browser_of(owner)
    for _ in range(3):
        admin.api_key(owner)
    monkeypatch.setattr(audit_page, "PER_PAGE", 1)
    link = older(log_of(browser))
    assert link is not None
    cursor = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["cursor"][0]
    assert browser.get("/panel/audit-log", params={"cursor": cursor, "action": "api_key.created"}).status_code == 400


def test_candidates_get_no_audit_log(browser_of: Any, admin: Admin) -> None:
    browser = browser_of(admin.user("candidate"))
    page = browser.get("/panel/audit-log")
    assert page.status_code == 403 and "belongs to hiring accounts" in text(page)
    assert 'href="/panel/audit-log"' not in open_page(browser, "/panel").text


def test_a_platform_admin_sees_only_their_own_account_here(browser_of: Any, admin: Admin) -> None:
    operator, other = admin.user("admin"), admin.user("employer")
    foreign = admin.api_key(other)["id"]
    own = admin.api_key(operator)["id"]
    page = log_of(browser_of(operator), action="api_key.created")
    assert target_ids(page) == [own]
    assert foreign not in page.text


# --- Download my data -------------------------------------------------------------------------------------------


def _applied(call: Call, admin: Admin, person: User) -> str:
    boss = admin.user("employer")
    job = ok(call("jobs.create", boss, title=f"job-{uuid.uuid4().hex[:8]}", company="Acme", location="Izmir"))
    ok(call("jobs.publish", boss, id=job["id"]))
    letter = f"letter-{uuid.uuid4().hex}"
    ok(call("applications.create", person, job_id=job["id"], cover_letter=letter))
    return letter


def _exports(admin: Admin, person: User) -> list[dict[str, Any]]:
    return admin.sql(
        "SELECT actor_kind, actor_id, client_address FROM audit_entries"
        " WHERE action = 'profile.exported' AND target_id = %(u)s",
        {"u": person.user_id},
    )


def test_download_my_data_is_the_exports_document_as_a_file(browser_of: Any, admin: Admin, call: Call) -> None:
    person = admin.user("candidate")
    letter = _applied(call, admin, person)
    browser = browser_of(person)
    answer = submit(browser, open_page(browser, "/panel/profile"), "/panel/profile/export")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert answer.headers["Content-Disposition"] == f'attachment; filename="hire-export-{today}.json"'
    assert answer.headers["Cache-Control"] == "no-store"
    downloaded = answer.json()
    assert _exports(admin, person) == [
        {"actor_kind": "user", "actor_id": person.user_id, "client_address": "127.0.0.1"}
    ], "recorded once, as the person, from their browser"
    entry = downloaded["audit"][0]
    assert (entry["action"], entry["actor_id"], entry["target_id"]) == ("profile.exported", *[person.user_id] * 2)
    from_api = ok(call("profile.export", person))
    assert set(downloaded) == set(from_api)
    for section in ("profile", "applications", "api_keys", "oauth_grants"):
        assert downloaded[section] == from_api[section], section
    assert downloaded["applications"][0]["cover_letter"] == letter
    assert [s["kind"] for s in downloaded["sessions"]] == ["web"], "this browser's own session"
    assert from_api["audit"][1:] == downloaded["audit"], "the API's export adds its own entry, and nothing else"
    assert admin.run(audit_log.verify)["ok"] is True


def test_download_needs_the_csrf_token_and_records_nothing_without_it(browser_of: Any, admin: Admin) -> None:
    person = admin.user("employer")
    browser = browser_of(person)
    page = open_page(browser, "/panel/profile")
    answer = submit(browser, page, "/panel/profile/export", drop=["csrf_token"])
    assert answer.status_code == 403 and "expired" in text(answer)
    assert "json" not in answer.headers["content-type"]
    anonymous = Browser(str(browser.http.base_url))
    try:
        assert anonymous.http.post("/panel/profile/export", data={"csrf_token": "x"}).status_code == 303, (
            "to the sign-in page"
        )
    finally:
        anonymous.close()
    assert _exports(admin, person) == []
    assert submit(browser, page, "/panel/profile/export").json()["profile"]["email"] == person.email
