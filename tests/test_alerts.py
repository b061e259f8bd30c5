"""Job alerts (docs/alerts.md), through the real server, its worker and a real SMTP server:
instant mail and the daily digest, once only, never a closed job, never to an unverified or erased person, the
one-click unsubscribe, the limit of 20 and ownership."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from procedures.alerts.shapes import AlertSettings
from tests.browser import Browser, form, location, text
from tests.conftest import Databases
from tests.smtp import Received, SmtpServer, mailing_settings
from tests.support import Admin, LiveServer, User, ok, refused

Call = Callable[..., httpx.Response]
PUBLIC_URL = "http://hire.example"  # http: the panel's cookies are Secure under https
DIGEST_SECONDS = 3600


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Instant alerts mailed at the first tick after their match; digests an hour apart (tests make them due)."""
    data = tmp_path_factory.mktemp("data")
    return mailing_settings(
        database,
        smtp,
        Path(data),
        PUBLIC_URL=PUBLIC_URL,
        ALERT_INSTANT_SECONDS="0",
        ALERT_DIGEST_SECONDS=str(DIGEST_SECONDS),
    )


@pytest.fixture
def person(admin: Admin) -> User:
    """A verified candidate of their own (each test's own inbox)."""
    return admin.user("candidate")


def alert(call: Call, who: User, **params: Any) -> dict[str, Any]:
    created: dict[str, Any] = ok(call("alerts.create", who, **params))
    return created


def draft(call: Call, employer: User, **fields: Any) -> str:
    values = {"title": "Job", "company": "Globex", "location": "Berlin", **fields}
    job_id: str = ok(call("jobs.create", employer, **values))["id"]
    return job_id


def publish(call: Call, employer: User, **fields: Any) -> str:
    job_id = draft(call, employer, **fields)
    ok(call("jobs.publish", employer, id=job_id))
    return job_id


def publish_together(admin: Admin, job_ids: list[str]) -> None:
    """Publish drafts in one transaction: they are matched by one tick, whatever its timing."""
    admin.sql(
        "UPDATE jobs SET status = 'published', published_at = now() WHERE id = ANY(%(ids)s::uuid[])", {"ids": job_ids}
    )


def matches(admin: Admin, alert_id: str) -> list[dict[str, Any]]:
    return admin.sql(
        "SELECT job_id::text AS job_id, sent_at FROM job_alert_matches WHERE alert_id = %(a)s ORDER BY matched_at",
        {"a": alert_id},
    )


def until(condition: Callable[[], Any], timeout: float = 30) -> Any:
    """The first truthy value of `condition`, asked until then (the worker ticks every second)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "the worker did not get there in time"
        time.sleep(0.05)
    return value


def matched(admin: Admin, alert_id: str, count: int, *, taken: bool) -> list[dict[str, Any]]:
    """The alert's matches once `count` are written and (with `taken`) all taken by its mail."""

    def done() -> list[dict[str, Any]]:
        rows = matches(admin, alert_id)
        ready = len(rows) >= count and (not taken or all(row["sent_at"] for row in rows))
        return rows if ready else []

    rows: list[dict[str, Any]] = until(done)
    return rows


def links(mail: Received) -> set[str]:
    return {word for word in mail.text.split() if word.startswith(f"{PUBLIC_URL}/jobs/")}


def mails_to(admin: Admin, email: str) -> int:
    return int(admin.sql("SELECT count(*) AS n FROM mail_messages WHERE recipient = %(e)s", {"e": email})[0]["n"])


def test_an_instant_alert_mails_the_jobs_it_matches_once(
    call: Call, admin: Admin, smtp: SmtpServer, employer: User, person: User
) -> None:
    mine = alert(
        call, person, q="zanzibar develo", location="munchen", employment_type="full_time", frequency="instant"
    )
    assert mine["employment_type"] == ["full_time"] and mine["frequency"] == "instant"
    wanted = publish(call, employer, title="Zanzibar Developers", location="München", employment_type="full_time")
    publish(call, employer, title="Zanzibar Developer", location="Berlin", employment_type="full_time")
    publish(call, employer, title="Zanzibar Developer", location="Munich", employment_type="full_time")
    publish(call, employer, title="Zanzibar Developer", location="München", employment_type="contract")
    mail = smtp.inbox.wait_for(person.email)
    assert links(mail) == {f"{PUBLIC_URL}/jobs/{wanted}"}
    assert f'href="{PUBLIC_URL}/jobs/{wanted}"' in mail.html
    assert "Zanzibar Developers" in mail.text and "Zanzibar Developers" in mail.html
    assert mail.message["Subject"] == "1 new job for your job alert"
    unsubscribe = str(mail.message["List-Unsubscribe"])
    assert unsubscribe.startswith(f"<{PUBLIC_URL}/alerts/unsubscribe/") and unsubscribe.endswith(">")
    assert mail.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    # An edit of the published job, or a later publish of other jobs, never mails it again.
    ok(call("jobs.update", employer, id=wanted, description="Still Zanzibar."))
    other = publish(call, employer, title="Zanzibar Developer II", location="München", employment_type="full_time")
    second = smtp.inbox.wait_for(person.email, count=2)
    assert links(second) == {f"{PUBLIC_URL}/jobs/{other}"}
    assert [row["job_id"] for row in matches(admin, mine["id"])] == [wanted, other]


def test_a_job_published_before_the_alert_was_made_is_not_sent(
    call: Call, admin: Admin, smtp: SmtpServer, employer: User, person: User
) -> None:
    """Most often the tick that matches the first job runs after the alert is made (a tick a second, the two
    calls a few milliseconds apart): the alert is older than the tick, not than the publish."""
    before = publish(call, employer, title="Capybara Groomer")
    mine = alert(call, person, q="capybara", frequency="instant")
    after = publish(call, employer, title="Capybara Trainer")
    assert [row["job_id"] for row in matched(admin, mine["id"], 1, taken=True)] == [after]
    assert links(smtp.inbox.wait_for(person.email)) == {f"{PUBLIC_URL}/jobs/{after}"}
    assert before not in {row["job_id"] for row in matches(admin, mine["id"])}


def test_the_jobs_of_one_moment_share_one_mail_that_links_every_one(
    call: Call, admin: Admin, smtp: SmtpServer, employer: User, person: User
) -> None:
    mine = alert(call, person, q='"quokka keeper"', frequency="instant")
    jobs = [draft(call, employer, title=f"Quokka Keeper {n}") for n in range(53)]  # more than a screenful
    publish_together(admin, jobs)
    matched(admin, mine["id"], 53, taken=True)
    mail = smtp.inbox.wait_for(person.email)
    assert links(mail) == {f"{PUBLIC_URL}/jobs/{job}" for job in jobs}
    assert mail.message["Subject"] == "53 new jobs for your job alert"
    assert len(smtp.inbox.to(person.email)) == 1


_WAIT = """
SELECT d.due_at - a.created_at AS wait FROM job_alert_due AS d JOIN job_alerts AS a ON a.id = d.alert_id
WHERE a.id = %(a)s
"""


def test_a_daily_digest_waits_and_never_sends_a_closed_job(
    call: Call, admin: Admin, smtp: SmtpServer, employer: User, person: User
) -> None:
    mine = alert(call, person, q="wombat", frequency="daily")
    kept, closed = publish(call, employer, title="Wombat Walker"), publish(call, employer, title="Wombat Washer")
    matched(admin, mine["id"], 2, taken=False)
    row = admin.sql(_WAIT, {"a": mine["id"]})[0]
    assert row["wait"].total_seconds() == pytest.approx(DIGEST_SECONDS, abs=1), "ALERT_DIGEST_SECONDS apart"
    assert mails_to(admin, person.email) == 0, "nothing before the digest is due"
    ok(call("jobs.close", employer, id=closed))
    admin.sql("UPDATE job_alert_due SET due_at = now() WHERE alert_id = %(a)s", {"a": mine["id"]})  # a day later
    mail = smtp.inbox.wait_for(person.email)
    assert links(mail) == {f"{PUBLIC_URL}/jobs/{kept}"}, "the closed job is left out"
    assert "daily digest" in mail.text
    matched(admin, mine["id"], 2, taken=True)
    assert admin.sql("SELECT * FROM job_alert_due WHERE alert_id = %(a)s", {"a": mine["id"]}) == [], "not due"


def test_unverified_and_erased_people_are_sent_nothing(
    call: Call, admin: Admin, smtp: SmtpServer, employer: User, admin_user: Callable[[], User]
) -> None:
    unverified, erased = admin_user(), admin_user()
    first = alert(call, unverified, q="narwhal", frequency="instant")
    alert(call, erased, q="narwhal", frequency="instant")
    admin.sql("UPDATE users SET email_verified_at = NULL WHERE id = %(u)s", {"u": unverified.user_id})
    ok(call("profile.delete", erased, confirm=erased.email))
    assert admin.sql("SELECT count(*) AS n FROM job_alerts WHERE user_id = %(u)s", {"u": erased.user_id})[0]["n"] == 0
    publish(call, employer, title="Narwhal Trainer")
    matched(admin, first["id"], 1, taken=True)  # taken by its mail, which was not sent
    assert mails_to(admin, unverified.email) == 0
    assert smtp.inbox.to(unverified.email) == [] and smtp.inbox.to(erased.email) == []
    refused(call("alerts.create", unverified, q="narwhal", frequency="daily"), 403, "forbidden")


@pytest.fixture
def admin_user(admin: Admin) -> Callable[[], User]:
    return lambda: admin.user("candidate")


@pytest.fixture
def anonymous(live: LiveServer) -> Iterator[Browser]:
    browser = Browser(live.url)
    yield browser
    browser.close()


def test_one_click_unsubscribe(
    call: Call, admin: Admin, smtp: SmtpServer, employer: User, person: User, anonymous: Browser
) -> None:
    mine = alert(call, person, q="okapi", frequency="instant")
    publish(call, employer, title="Okapi Groomer")
    address = str(smtp.inbox.wait_for(person.email).message["List-Unsubscribe"]).strip("<>")
    path = address.removeprefix(PUBLIC_URL)
    handed = anonymous.get(path)
    assert handed.status_code == 303 and location(handed) == "/alerts/unsubscribe", "the token leaves the address"
    page = anonymous.follow(handed)
    assert page.status_code == 200 and "okapi" in text(page)
    assert form(page, "/alerts/unsubscribe").names() == set(), "a button that posts, nothing else"
    assert ok(call("alerts.list", person))["total"] == 1, "a GET changes nothing"
    one_click = anonymous.http.post(path, content=b"List-Unsubscribe=One-Click", headers=_FORM)
    assert one_click.status_code == 200
    assert ok(call("alerts.list", person))["total"] == 0
    assert admin.sql("SELECT count(*) AS n FROM job_alerts WHERE id = %(a)s", {"a": mine["id"]})[0]["n"] == 0
    assert anonymous.http.post(path, content=b"List-Unsubscribe=One-Click", headers=_FORM).status_code == 200
    assert anonymous.follow(anonymous.get(path)).status_code == 404, "gone"
    assert anonymous.follow(anonymous.get("/alerts/unsubscribe/" + "A" * 43)).status_code == 404


def test_the_unsubscribe_pages_button_stops_the_alert(
    call: Call, smtp: SmtpServer, employer: User, person: User, anonymous: Browser
) -> None:
    alert(call, person, q="pangolin", frequency="instant")
    publish(call, employer, title="Pangolin Keeper")
    address = str(smtp.inbox.wait_for(person.email).message["List-Unsubscribe"]).strip("<>")
    page = anonymous.follow(anonymous.get(address.removeprefix(PUBLIC_URL)))
    stopped = anonymous.submit(page, "/alerts/unsubscribe")
    assert stopped.status_code == 200 and "The alert is stopped" in text(stopped)
    assert ok(call("alerts.list", person))["total"] == 0


_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def test_the_unsubscribe_headers_reach_the_mail_server_as_written(
    call: Call, smtp: SmtpServer, employer: User, person: User
) -> None:
    """Read from the bytes the SMTP server received: one line each, never RFC 2047 encoded words (mail providers
    then offer no unsubscribe button)."""
    alert(call, person, q="axolotl", frequency="instant")
    publish(call, employer, title="Axolotl Keeper")
    lines = smtp.inbox.wait_for(person.email).raw_headers
    unsubscribe = [line for line in lines if line.lower().startswith(b"list-unsubscribe:")]
    assert len(unsubscribe) == 1 and re.fullmatch(
        rb"List-Unsubscribe: <http://hire\.example/alerts/unsubscribe/[A-Za-z0-9_-]{43}>", unsubscribe[0]
    ), lines
    assert b"List-Unsubscribe-Post: List-Unsubscribe=One-Click" in lines


def test_at_most_twenty_alerts_each_and_only_ones_own(call: Call, person: User, admin: Admin) -> None:
    other = admin.user("candidate")
    mine = [alert(call, person, q=f"word{n}", frequency="daily") for n in range(20)]
    body = refused(call("alerts.create", person, q="one more", frequency="daily"), 409, "conflict")
    assert "20" in body["message"]
    listed = ok(call("alerts.list", person, per_page=100))
    assert listed["total"] == 20 and {a["id"] for a in listed["data"]} == {a["id"] for a in mine}
    assert ok(call("alerts.list", other))["total"] == 0, "another person sees none of them"
    refused(call("alerts.delete", other, id=mine[0]["id"]), 404, "not_found")
    refused(call("alerts.delete", person, id="not-an-id"), 404, "not_found")
    assert ok(call("alerts.delete", person, id=mine[0]["id"])) == {"id": mine[0]["id"], "deleted": True}
    refused(call("alerts.delete", person, id=mine[0]["id"]), 404, "not_found")
    alert(call, person, q="one more", frequency="daily")  # room again


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"q": "x" * 201, "frequency": "daily"}, "q"),
        ({"q": "python"}, "frequency"),
        ({"q": "python", "frequency": "weekly"}, "frequency"),
        ({"employment_type": ["full_time", "permanent"], "frequency": "daily"}, "employment_type"),
        ({"location": "a\x00b", "frequency": "daily"}, "location"),
    ],
)
def test_parameters_are_those_of_jobs_search(call: Call, person: User, params: dict[str, Any], field: str) -> None:
    body = refused(call("alerts.create", person, **params), 422, "invalid_params")
    assert [error["field"] for error in body["details"]["errors"]] == [field]


def test_the_panel_lists_ones_alerts_with_delete(live: LiveServer, call: Call, person: User, admin: Admin) -> None:
    stranger = admin.user("candidate")
    mine = alert(call, person, q="capybara", location="İzmir", frequency="daily")
    theirs = alert(call, stranger, q="tapir", frequency="daily")
    browser = Browser(live.url)
    try:
        assert location(browser.sign_in(person, "/panel/alerts")) == "/panel/alerts"
        page = browser.get("/panel/alerts")
        assert page.status_code == 200 and "capybara" in text(page) and "İzmir" in text(page)
        assert "tapir" not in text(page)
        refused_page = browser.http.post(f"/panel/alerts/{theirs['id']}/delete", data={"csrf_token": "forged"})
        assert refused_page.status_code == 403
        deleted = browser.submit(page, f"/panel/alerts/{mine['id']}/delete")
        assert location(deleted) == "/panel/alerts?deleted=1"
        assert ok(call("alerts.list", person))["total"] == 0
        page = browser.get("/panel/alerts")
        csrf = form(page, "/web/signout").value("csrf_token")
        stolen = browser.http.post(f"/panel/alerts/{theirs['id']}/delete", data={"csrf_token": csrf})
        assert stolen.status_code == 404, "another person's alert is not found"
        assert ok(call("alerts.list", stranger))["total"] == 1
    finally:
        browser.close()


def test_alert_settings_are_read_from_the_environment(settings: Any) -> None:
    section = settings.section("ALERT_", AlertSettings)
    assert section == AlertSettings(instant_seconds=0, digest_seconds=DIGEST_SECONDS)
    assert AlertSettings().digest_seconds == 86_400


def test_a_token_is_unguessable_and_only_its_hash_is_kept(call: Call, person: User, admin: Admin) -> None:
    mine = alert(call, person, q="ibex", frequency="daily")
    row = admin.sql("SELECT unsubscribe_hash FROM job_alerts WHERE id = %(a)s", {"a": mine["id"]})[0]
    assert len(bytes(row["unsubscribe_hash"])) == 32
    assert str(uuid.UUID(mine["id"])) == mine["id"]


def test_a_publish_committed_while_no_worker_runs_is_mailed_when_one_starts(
    databases: Databases, smtp: SmtpServer, tmp_path: Path
) -> None:
    """Matching is driven by the log of publishes, not by the process that published: a process that dies right
    after a publish commits loses nothing."""
    url = databases.copy()
    settings = mailing_settings(url, smtp, tmp_path, PUBLIC_URL=PUBLIC_URL, ALERT_INSTANT_SECONDS="0")
    admin = Admin(url, settings)
    person, employer = admin.user("candidate"), admin.user("employer")
    with LiveServer(settings) as live, live.client() as http:
        made = http.post("/v1/alerts.create", json={"q": "axolotl", "frequency": "instant"}, headers=person.auth)
        assert made.status_code == 200, made.text
    job = admin.sql(
        """INSERT INTO jobs (account_id, title, company, location, status, published_at)
           VALUES (%(a)s, 'Axolotl Keeper', 'Globex', 'Berlin', 'published', now()) RETURNING id::text AS id""",
        {"a": employer.account_id},
    )[0]["id"]
    assert smtp.inbox.to(person.email) == []
    with LiveServer(settings):
        mail = smtp.inbox.wait_for(person.email)
    assert links(mail) == {f"{PUBLIC_URL}/jobs/{job}"}
