"""A candidate's path with no dead end (docs/public-pages.md, docs/people.md), over real HTTP with a form-reading
client: a sign-up begun on an Apply page comes back to it once the address is confirmed (also through a link
asked for again, and a known address's reset); "E-mail me jobs like these" saves an alert, signing in first; the
candidate's home lists interviews with a calendar file of their own and offers to answer; a résumé sent with an
application becomes the profile's; and a candidate's panel keeps the developer settings folded away."""

from __future__ import annotations

import datetime as dt
import re
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import icalendar
import pytest

from tests.browser import Browser, location, text
from tests.loop import Team, book, propose, slot, team
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, LiveServer, User, ok

Call = Callable[..., httpx.Response]
PASSWORD = "a long enough password"


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"), PANEL_WRITE_LIMIT_PER_USER="10000/minute")


@pytest.fixture
def job(call: Call, employer: User) -> dict[str, Any]:
    made = ok(call("jobs.create", employer, title="Harbour pilot", company="Acme", location="Izmir"))
    return ok(call("jobs.publish", employer, id=made["id"]))  # type: ignore[no-any-return]


def new_email() -> str:
    return f"cand-{uuid.uuid4().hex[:10]}@example.test"


def sign_up_on_the_apply_page(browser: Browser, job: dict[str, Any], email: str) -> str:
    """The Apply page's own sign-up form, sent; the apply page's path."""
    apply_path = f"/jobs/{job['id']}/apply"
    page = browser.get(apply_path)
    assert browser.submit(page, "/web/signup", fill={"email": email, "password": PASSWORD}).status_code == 200
    return apply_path


def test_a_sign_up_on_an_apply_page_comes_back_to_it(browser: Browser, job: dict[str, Any], smtp: SmtpServer) -> None:
    email = new_email()
    apply_path = sign_up_on_the_apply_page(browser, job, email)
    confirmed = browser.open_link(smtp.inbox.wait_for(email).link())
    assert "E-mail confirmed" in text(confirmed)
    [sign_in] = re.findall(r'<a href="(/web/signin[^"]*)">Sign in</a>', confirmed.text)
    form = browser.get(sign_in.replace("&amp;", "&"))
    signed_in = browser.submit(form, "/web/signin", fill={"email": email, "password": PASSWORD})
    assert location(signed_in) == apply_path
    assert "Send my application" in text(browser.follow(signed_in))


def test_a_link_asked_for_again_and_a_known_address_come_back_too(
    browser: Browser, job: dict[str, Any], smtp: SmtpServer, admin: Admin
) -> None:
    """An unconfirmed person asks the sign-in page for a new link: it carries the page they came from, through
    choosing a password; someone who already has an account and signs up again gets a reset link that does."""
    email = new_email()
    apply_path = sign_up_on_the_apply_page(browser, job, email)
    page = browser.get("/web/signin", params={"next": apply_path})
    unconfirmed = browser.submit(page, "/web/signin", fill={"email": email, "password": PASSWORD})
    assert unconfirmed.status_code == 403
    assert browser.submit(unconfirmed, "/web/verify/resend").status_code == 200
    choose = browser.open_link(smtp.inbox.wait_for(email, count=2).link())
    done = browser.submit(choose, "/web/reset", fill={"password": "the owner's own password"})
    assert f'href="/web/signin?next={urllib.parse.quote(apply_path, safe="")}"' in done.text

    known = admin.user("candidate")
    sign_up_on_the_apply_page(browser, job, known.email)
    reset = browser.open_link(smtp.inbox.wait_for(known.email).link())
    done = browser.submit(reset, "/web/reset", fill={"password": "another own password"})
    assert f'href="/web/signin?next={urllib.parse.quote(apply_path, safe="")}"' in done.text


@pytest.mark.parametrize("elsewhere", ["https://evil.example/phish", "//evil.example/x", "/" + "x" * 2001])
def test_only_a_page_of_this_site_is_come_back_to(browser: Browser, smtp: SmtpServer, elsewhere: str) -> None:
    email = new_email()
    page = browser.get("/web/signup", params={"next": elsewhere})
    assert "evil.example" not in page.text
    fill = {"email": email, "password": PASSWORD, "role": "candidate", "next": elsewhere}
    sent = browser.submit(page, "/web/signup", fill=fill)
    assert sent.status_code == 200
    confirmed = browser.open_link(smtp.inbox.wait_for(email).link())
    assert re.findall(r'<a href="(/web/signin[^"]*)">Sign in</a>', confirmed.text) == ["/web/signin"]


def test_the_sign_in_page_offers_a_sign_up_that_comes_back(browser: Browser) -> None:
    page = browser.get("/web/signin", params={"next": "/panel/alerts/new?q=rust"})
    [signup] = re.findall(r'<a href="(/web/signup[^"]*)">Create an account</a>', page.text)
    form = browser.get(signup.replace("&amp;", "&"))
    assert 'name="next" value="/panel/alerts/new?q=rust"' in form.text


def test_email_me_jobs_like_these_saves_an_alert(browser: Browser, call: Call, admin: Admin) -> None:
    search = browser.get("/jobs", params={"q": "harbour pilot"})
    [link] = re.findall(r'<a href="([^"]+)">E-mail me jobs like these</a>', search.text)
    assert link == "/panel/alerts/new?q=harbour%20pilot"
    signing_in = location(browser.get(link))
    assert signing_in == "/web/signin?next=" + urllib.parse.quote(link, safe="")
    person = admin.user("candidate")
    back = location(browser.sign_in(person, link))
    assert back == link
    form = browser.get(back)
    assert 'name="q" value="harbour pilot"' in form.text and 'value="daily" checked' in form.text
    forged = browser.submit(form, "/panel/alerts", fill={"csrf_token": "forged", "frequency": "daily"})
    assert forged.status_code == 403 and ok(call("alerts.list", person))["data"] == []
    wrong = browser.submit(form, "/panel/alerts", fill={"frequency": "hourly", "location": "Izmir"})
    assert wrong.status_code == 422 and "instant, daily" in text(wrong) and 'value="Izmir"' in wrong.text
    saved = browser.submit(form, "/panel/alerts", fill={"frequency": "instant", "location": "Izmir"})
    assert location(saved) == "/panel/alerts?saved=1"
    assert "The alert was saved" in text(browser.follow(saved))
    [alert] = ok(call("alerts.list", person))["data"]
    assert (alert["q"], alert["location"], alert["frequency"]) == ("harbour pilot", "Izmir", "instant")
    for _ in range(19):
        ok(call("alerts.create", person, frequency="daily"))
    full = browser.submit(form, "/panel/alerts", fill={"frequency": "daily"})
    assert full.status_code == 409 and "the most one person may keep" in text(full)


@pytest.fixture
def hiring(admin: Admin, call: Call) -> Team:
    return team(admin, call, members=1)


def test_interviews_on_the_home_page_go_into_a_calendar(
    browser: Browser, hiring: Team, call: Call, admin: Admin, live: LiveServer
) -> None:
    interview = book(call, hiring.owner, hiring.application, hiring.members, slot(), location="Room 4")
    browser.sign_in(hiring.candidate)
    home = browser.get("/me")
    path = f"/me/interviews/{interview['id']}.ics"
    assert interview["title"] in home.text and f'href="{path}"' in home.text
    answer = browser.get(path)
    assert answer.status_code == 200 and answer.headers["Content-Type"] == "text/calendar; charset=utf-8"
    assert answer.headers["Content-Disposition"] == 'attachment; filename="interview.ics"'
    [event] = icalendar.Calendar.from_ical(answer.content).walk("VEVENT")
    assert str(event["UID"]).startswith(interview["id"]) and int(event["SEQUENCE"]) == interview["sequence"]
    assert event.decoded("DTSTART").astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") == interview["starts_at"]
    assert str(event["LOCATION"]) == "Room 4"
    assert hiring.owner.email not in answer.text and hiring.members[0].email not in answer.text, "nothing internal"
    for other in (admin.user("candidate"), hiring.owner):
        with Browser(live.url) as someone:
            someone.sign_in(other)
            assert someone.get(path).status_code == 404
    ok(call("interviews.cancel", hiring.owner, id=interview["id"]))
    after = browser.get("/me")
    assert "(cancelled)" in after.text and f'href="{path}"' not in after.text


def test_an_offer_is_declined_on_the_home_page(
    browser: Browser, hiring: Team, call: Call, admin: Admin, live: LiveServer
) -> None:
    offer = ok(call("offers.send", hiring.owner, id=propose(call, hiring.owner, hiring.application)["id"]))
    action = f"/me/offers/{offer['id']}/respond"
    with Browser(live.url) as other:
        other.sign_in(admin.user("candidate"))
        page = other.get("/me")
        assert other.submit(page, "/me/resume", files={"resume": ("x.txt", b"x")}).status_code == 303
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        stolen = other.http.post(action, data={"csrf_token": token[1], "decision": "accept"})
        assert stolen.status_code == 404
    browser.sign_in(hiring.candidate)
    home = browser.get("/me")
    assert "85000.00 EUR a year" in text(home) and f'action="{action}"' in home.text
    assert "Within band" not in home.text and "approvals" not in home.text.lower(), "nothing internal"
    forged = browser.submit(home, action, fill={"csrf_token": "forged"}, button=("decision", "decline"))
    assert forged.status_code == 403
    declined = browser.submit(home, action, fill={"note": "I stay at sea."}, button=("decision", "decline"))
    assert location(declined) == f"/me?notice=declined#offer-{offer['id']}"
    assert ok(call("offers.get", hiring.owner, id=offer["id"]))["status"] == "declined"
    assert ok(call("applications.get", hiring.owner, id=hiring.application["id"]))["status"] == "offered"
    again = browser.submit(home, action, button=("decision", "accept"))
    assert again.status_code == 409 and "This offer is declined now: it can no longer be answered." in text(again)
    assert f'action="{action}"' not in browser.get("/me").text


def test_a_resume_sent_with_an_application_becomes_the_profiles(
    browser: Browser, call: Call, employer: User, admin: Admin
) -> None:
    person = admin.user("candidate")
    browser.sign_in(person)
    jobs = []
    for title in ("Cartographer", "Navigator"):
        made = ok(call("jobs.create", employer, title=title, company="Acme", location="Izmir"))
        jobs.append(ok(call("jobs.publish", employer, id=made["id"]))["id"])
    page = browser.get(f"/jobs/{jobs[0]}/apply")
    location(browser.submit(page, f"/jobs/{jobs[0]}/apply", files={"resume": ("first.txt", b"First CV\n")}))
    assert ok(call("profile.me", person))["resume"]["filename"] == "first.txt"
    assert "first.txt" in text(browser.get("/me"))
    page = browser.get(f"/jobs/{jobs[1]}/apply")
    location(browser.submit(page, f"/jobs/{jobs[1]}/apply", files={"resume": ("second.txt", b"Second CV\n")}))
    assert ok(call("profile.me", person))["resume"]["filename"] == "first.txt", "an existing one stays"


def test_a_candidates_panel_keeps_the_developer_settings_folded(browser: Browser, admin: Admin) -> None:
    browser.sign_in(admin.user("candidate"))
    overview = browser.get("/panel")
    folded = re.search(r"<details[^>]*>\s*<summary>For developers.*?</details>", overview.text, re.S)
    assert folded is not None and "requests" in folded[0]
    assert "requests" not in overview.text.replace(folded[0], ""), "the plan's limits only when opened"
    assert re.search(r'<details class="developer">\s*<summary>Developer settings</summary>', overview.text)
    assert 'href="/me"' in overview.text and 'href="/panel/jobs"' not in overview.text
    keys = browser.get("/panel/api-keys")
    assert re.search(r'<details class="developer" open>', keys.text), "open when one of them is the page"
