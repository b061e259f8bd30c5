"""The hiring desk (docs/desk.md) through the live server, the way a browser without JavaScript uses it: pages
fetched with the session cookie, forms read from the HTML and posted form-encoded, and every action checked
against the API afterwards — the same procedure, so the same events and mail. Also: a forged form is refused,
another account's job and application are the 404 page, the no-peeking rule holds on the page, and a rejection
is asked to be confirmed."""

from __future__ import annotations

import contextlib
import datetime as dt
import html
import re
import urllib.parse
import uuid
import zoneinfo
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.browser import Browser, location, text
from tests.loop import ZONE, Team, book, past_slot, propose, slot, team
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, LiveServer, User, ok

Call = Callable[..., httpx.Response]


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"), PANEL_WRITE_LIMIT_PER_USER="10000/minute")


@pytest.fixture
def hiring(admin: Admin, call: Call) -> Team:
    return team(admin, call)


def signed_in(browser: Browser, user: User) -> Browser:
    assert browser.sign_in(user).status_code == 303
    return browser


def csrf(page: httpx.Response) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None, page.text[:2000]
    return found[1]


def post(browser: Browser, page: httpx.Response, action: str, **fields: Any) -> httpx.Response:
    """A form of `page` posted to `action` with `fields` (lists for repeated names), as a browser sends it."""
    data = [("csrf_token", csrf(page))]
    for name, value in fields.items():
        data += [(name, one) for one in value] if isinstance(value, list) else [(name, str(value))]
    body = urllib.parse.urlencode(data)
    return browser.http.post(action, content=body, headers={"Content-Type": "application/x-www-form-urlencoded"})


def test_an_employer_writes_publishes_and_edits_a_job(browser: Browser, admin: Admin, call: Call) -> None:
    boss = admin.user("employer")
    signed_in(browser, boss)
    overview = browser.get("/panel")
    assert 'href="/panel/jobs"' in overview.text
    jobs = browser.get("/panel/jobs")
    assert jobs.status_code == 200 and "No jobs yet" in text(jobs)
    new = browser.get("/panel/jobs/new")
    typed = {
        "title": "Night porter",
        "company": "Grand Hotel",
        "location": "Izmir",
        "employment_type": "part_time",
        "description": "Nights.\r\nKeys.",
        "scorecard_attributes": "Calm\r\n\r\nLanguages \r\n",
    }
    made = post(browser, new, "/panel/jobs", **typed)
    job_path = location(made).split("?")[0]
    job_id = job_path.rsplit("/", 1)[1]
    job = ok(call("jobs.get", boss, id=job_id))
    assert (job["status"], job["description"], job["scorecard_attributes"]) == (
        "draft",
        "Nights.\nKeys.",
        ["Calm", "Languages"],
    )
    page = browser.follow(made)
    assert "The job was saved as a draft" in text(page) and "Night porter" in page.text

    published = post(browser, page, f"/panel/jobs/{job_id}/publish")
    assert location(published) == f"{job_path}?notice=job_published"
    assert ok(call("jobs.get", boss, id=job_id))["status"] == "published"
    again = post(browser, page, f"/panel/jobs/{job_id}/publish")
    assert again.status_code == 409 and "It is already published." in text(again)

    for title in ("Night porter (m/f/d)", "Night porter (m/f/d)"):  # the second time, nothing changed
        saved = post(browser, page, job_path, **{**typed, "title": title})
        assert location(saved) == f"{job_path}?notice=job_saved"
    assert ok(call("jobs.get", boss, id=job_id))["title"] == "Night porter (m/f/d)"
    updates = ok(call("events.list", boss, event="job.updated"))["data"]
    assert [event["data"]["title"] for event in updates] == ["Night porter (m/f/d)"], (
        "an unchanged form changes nothing"
    )

    blank = post(browser, page, job_path, **{**typed, "title": ""})
    assert blank.status_code == 422 and 'aria-invalid="true"' in blank.text

    confirm = browser.get(f"/panel/jobs/{job_id}/close")
    assert "Close Night porter" in text(confirm)
    closed = post(browser, confirm, f"/panel/jobs/{job_id}/close")
    assert location(closed) == f"{job_path}?notice=job_closed"
    assert ok(call("jobs.get", boss, id=job_id))["status"] == "closed"
    listed = text(browser.get("/panel/jobs"))
    assert "Night porter (m/f/d)" in listed


def form_key(page: httpx.Response, action: str) -> str:
    """The key of the form of `page` that posts to `action`, made when the page was shown."""
    form = re.search(rf'<form[^>]*action="{re.escape(action)}"[^>]*>(.*?)</form>', page.text, re.S)
    assert form is not None, page.text[:2000]
    key = re.search(r'name="form_key" value="([^"]+)"', form[1])
    assert key is not None, form[1]
    return key[1]


def test_a_form_sent_twice_makes_one_thing(browser: Browser, hiring: Team, call: Call) -> None:
    """A double click, or a reload after a slow answer, sends a form that makes something twice with the key its
    page gave it: one job, one interview, and the second sending lands where the first did. The same key with
    other values is refused; the page shown again gives its form a new key, which makes a new one."""
    owner, application = hiring.owner, hiring.application
    signed_in(browser, owner)
    new = browser.get("/panel/jobs/new")
    typed = {"title": "Lighthouse keeper", "company": "Coast", "location": "Sinop", "employment_type": "full_time"}
    key = form_key(new, "/panel/jobs")
    first, second = (post(browser, new, "/panel/jobs", form_key=key, **typed) for _ in range(2))
    assert location(first) == location(second) and "/panel/jobs/" in location(first)
    changed = post(browser, new, "/panel/jobs", form_key=key, **{**typed, "title": "Lamplighter"})
    assert changed.status_code == 422 and "sent before with other values" in text(changed)
    again = browser.get("/panel/jobs/new")
    assert form_key(again, "/panel/jobs") != key
    third = post(browser, again, "/panel/jobs", form_key=form_key(again, "/panel/jobs"), **typed)
    assert location(third) != location(first)
    mine = ok(call("jobs.list", owner, mine=True, per_page=100))["data"]
    assert [job["title"] for job in mine].count("Lighthouse keeper") == 2

    action = f"/panel/applications/{application['id']}/interviews"
    page = browser.get(f"/panel/applications/{application['id']}")
    sent = booking(future(30), [owner], form_key=form_key(page, action))
    assert len({location(post(browser, page, action, **sent)) for _ in range(2)}) == 1
    listed = ok(call("interviews.list", owner, application_id=application["id"]))
    assert listed["total"] == 1


def local_form(moment: dt.datetime, zone: str = ZONE) -> dict[str, str]:
    """A time as the interview form asks for it: day, time of day and zone."""
    wall = moment.astimezone(zoneinfo.ZoneInfo(zone))
    return {"date": wall.strftime("%Y-%m-%d"), "time": wall.strftime("%H:%M"), "time_zone": zone}


def booking(moment: dt.datetime, interviewers: list[User], **fields: str) -> dict[str, Any]:
    return {
        **local_form(moment),
        "duration": "60",
        "interviewer_ids": [one.user_id for one in interviewers],
        "title": "",
        "location": "",
        "video_url": "",
        **fields,
    }


def future(hours: int) -> dt.datetime:
    return dt.datetime.fromisoformat(slot()[0]) + dt.timedelta(hours=hours)


def test_the_application_page_shows_who_applied_and_moves_it(
    browser: Browser, hiring: Team, call: Call, admin: Admin
) -> None:
    owner, candidate, application = hiring.owner, hiring.candidate, hiring.application
    ok(call("profile.update", candidate, display_name="Ayşe <b>Yılmaz</b>", headline="Cartographer", location="Izmir"))
    signed_in(browser, owner)
    job_page = browser.get(f"/panel/jobs/{hiring.job['id']}")
    assert f"/panel/applications/{application['id']}" in job_page.text and candidate.email in job_page.text
    page = browser.get(f"/panel/applications/{application['id']}")
    shown = text(page)
    assert page.status_code == 200 and "Ayşe <b>Yılmaz</b>" in shown and "<b>Yılmaz" not in page.text  # escaped
    assert candidate.email in shown and "Cartographer" in shown and "Sent without a cover letter" in shown
    buttons = re.findall(r'<button type="submit" name="status" value="([a-z_]+)"', page.text)
    assert buttons == ["reviewed", "interview_scheduled", "offered", "hired"]  # forward only; rejection is a link

    moved = post(browser, page, f"/panel/applications/{application['id']}/move", status="reviewed")
    assert location(moved).endswith("?notice=moved")
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "reviewed"
    backwards = post(browser, page, f"/panel/applications/{application['id']}/move", status="pending")
    assert backwards.status_code == 409 and "cannot become new" in text(backwards)
    reviewed = post(
        browser, page, f"/panel/applications/{application['id']}/review", rating="4", notes="Sharp.\r\nAsk SQL."
    )
    assert location(reviewed).endswith("?notice=reviewed#review")
    read = ok(call("applications.get", owner, id=application["id"]))
    assert (read["rating"], read["notes"]) == (4, "Sharp.\nAsk SQL.")
    bad = post(browser, page, f"/panel/applications/{application['id']}/review", rating="9", notes="")
    assert bad.status_code == 422 and 'id="review-rating-error"' in bad.text
    kinds = [event["event"] for event in ok(call("events.list", owner))["data"]]
    assert kinds.count("application.reviewed") == 1 and "application.status_changed" in kinds


def test_a_rejection_is_asked_to_be_confirmed(browser: Browser, hiring: Team, call: Call, smtp: SmtpServer) -> None:
    owner, application = hiring.owner, hiring.application
    signed_in(browser, owner)
    page = browser.get(f"/panel/applications/{application['id']}")
    upcoming = book_on_page(browser, page, application["id"], future(1), [owner])
    straight = post(browser, page, f"/panel/applications/{application['id']}/move", status="rejected")
    assert location(straight) == f"/panel/applications/{application['id']}/reject"
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "interview_scheduled"
    confirm = browser.follow(straight)
    assert "Reject" in text(confirm) and "cannot be undone" in text(confirm)
    rejected = post(browser, confirm, f"/panel/applications/{application['id']}/reject")
    assert location(rejected).endswith("?notice=rejected")
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "rejected"
    assert ok(call("interviews.get", owner, id=upcoming))["status"] == "cancelled"
    told = smtp.inbox.wait_for(hiring.candidate.email, count=3)  # invitation, cancellation, the decision
    assert told.message["Subject"] == "An update on your application"
    after = browser.get(f"/panel/applications/{application['id']}")
    assert 'name="status"' not in after.text and "moves no further" in text(after)
    assert "Schedule the interview" not in after.text and "Create the offer" not in after.text


def book_on_page(browser: Browser, page: httpx.Response, application_id: str, at: dt.datetime, who: list[User]) -> str:
    """An interview booked with the page's form; its id."""
    booked = post(browser, page, f"/panel/applications/{application_id}/interviews", **booking(at, who))
    assert location(booked).endswith("?notice=scheduled#interviews"), text(booked)[-3000:]
    page = browser.follow(booked)
    found = re.findall(r'href="/panel/interviews/([0-9a-f-]{36})/cancel"', page.text)
    return str(found[-1])


def test_interviews_are_booked_changed_and_cancelled_from_the_page(
    browser: Browser, hiring: Team, call: Call, admin: Admin
) -> None:
    owner, [colleague, other], application = hiring.owner, hiring.members, hiring.application
    signed_in(browser, owner)
    page = browser.get(f"/panel/applications/{application['id']}")
    at = future(0)
    interview_id = book_on_page(browser, page, application["id"], at, [owner, colleague])
    made = ok(call("interviews.get", owner, id=interview_id))
    assert made["starts_at"] == at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") and made["time_zone"] == ZONE
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "interview_scheduled"

    clash = post(browser, page, f"/panel/applications/{application['id']}/interviews", **booking(at, [colleague]))
    assert clash.status_code == 409 and "already has an interview" in text(clash)
    assert f'value="{local_form(at)["time"]}"' in clash.text, "the form keeps what was typed"
    for fields, field, status in (
        ({"time_zone": "Mars/Olympus_Mons"}, "interview-zone", 422),
        ({"duration": "0"}, "interview-duration", 422),
        ({"date": "27/11/2026"}, "interview-date", 422),
        ({"interviewer_ids": []}, "interview-interviewers", 422),
    ):
        refused = post(
            browser,
            page,
            f"/panel/applications/{application['id']}/interviews",
            **{**booking(future(9), [owner]), **fields},
        )
        assert refused.status_code == status and f'id="{field}-error"' in refused.text, (fields, text(refused)[-2000:])
    skipped = {**booking(future(9), [owner]), "date": "2027-03-28", "time": "02:30", "time_zone": "Europe/Berlin"}
    gap = post(browser, page, f"/panel/applications/{application['id']}/interviews", **skipped)
    assert gap.status_code == 422 and "the clocks skip it" in text(gap)
    assert len(ok(call("interviews.list", owner, application_id=application["id"]))["data"]) == 1

    edit = browser.get(f"/panel/interviews/{interview_id}")
    assert edit.status_code == 200 and f'value="{local_form(at)["date"]}"' in edit.text
    later = at + dt.timedelta(hours=1)
    changed = post(browser, edit, f"/panel/interviews/{interview_id}", **booking(later, [owner, other], duration="30"))
    assert location(changed).endswith("?notice=rescheduled#interviews")
    moved = ok(call("interviews.get", owner, id=interview_id))
    assert moved["starts_at"] == later.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert moved["sequence"] == made["sequence"] + 1 and moved["title"] == made["title"]
    assert [one["user_id"] for one in moved["interviewers"]] == [owner.user_id, other.user_id]

    confirm = browser.get(f"/panel/interviews/{interview_id}/cancel")
    assert "Cancel " in text(confirm)
    cancelled = post(browser, confirm, f"/panel/interviews/{interview_id}/cancel", reason="The candidate asked.")
    assert location(cancelled).endswith("?notice=interview_cancelled#interviews")
    assert ok(call("interviews.get", owner, id=interview_id))["status"] == "cancelled"
    again = post(browser, confirm, f"/panel/interviews/{interview_id}/cancel", reason="")
    assert again.status_code == 409 and "It is already cancelled." in text(again)
    assert "can no longer be changed" in text(browser.get(f"/panel/interviews/{interview_id}"))


def test_no_peeking_on_the_page(browser: Browser, hiring: Team, call: Call, live: LiveServer) -> None:
    """An interviewer who owes their scorecard sees that the others' exist, never what they say; once they have
    submitted theirs, and for a member who interviews nobody, the scorecards read whole."""
    owner, [colleague, bystander], application = hiring.owner, hiring.members, hiring.application
    starts, ends = past_slot()
    interview = book(call, owner, application, [owner, colleague], (starts, ends))
    signed_in(browser, owner)
    page = browser.get(f"/panel/applications/{application['id']}")
    assert "Your scorecard" in page.text
    submitted = post(
        browser,
        page,
        f"/panel/interviews/{interview['id']}/scorecard",
        recommendation="strong_no",
        notes="Could not explain a JOIN.",
        **{"rating:SQL": "1", "rating:Communication": "2"},
    )
    assert location(submitted).endswith(f"?notice=scorecard#interview-{interview['id']}")
    twice = post(browser, page, f"/panel/interviews/{interview['id']}/scorecard", recommendation="yes", notes="")
    assert twice.status_code == 409 and "already submitted" in text(twice)

    with another(live, colleague) as peeker:
        owed = text(peeker.get(f"/panel/applications/{application['id']}"))
        assert (
            "Could not explain a JOIN." not in owed and "Recommendation: <strong>" not in owed and "SQL: 1" not in owed
        )
        assert "Hidden until you submit your own scorecard" in owed
        mine = peeker.get(f"/panel/applications/{application['id']}")
        unknown = post(
            peeker,
            mine,
            f"/panel/interviews/{interview['id']}/scorecard",
            recommendation="yes",
            **{"rating:Charm": "3"},
        )
        assert unknown.status_code == 422 and "is not one of the job's attributes" in text(unknown)
        unrated = post(peeker, mine, f"/panel/interviews/{interview['id']}/scorecard", recommendation="", notes="x")
        assert unrated.status_code == 422 and "Could not explain a JOIN." not in text(
            unrated
        )  # sent back, still hidden
        done = post(peeker, mine, f"/panel/interviews/{interview['id']}/scorecard", recommendation="no", notes="Agree.")
        assert location(done).endswith("?notice=scorecard#interview-" + interview["id"])
        assert "Could not explain a JOIN." in text(peeker.get(f"/panel/applications/{application['id']}"))
    with another(live, bystander) as reader:
        whole = text(reader.get(f"/panel/applications/{application['id']}"))
        assert "Could not explain a JOIN." in whole and "Agree." in whole and "SQL: 1 of 4" in whole
        assert "Your scorecard" not in whole


def test_offers_are_made_approved_in_turn_sent_and_withdrawn(
    browser: Browser, hiring: Team, call: Call, live: LiveServer, smtp: SmtpServer
) -> None:
    owner, [first, second], application = hiring.owner, hiring.members, hiring.application
    signed_in(browser, owner)
    page = browser.get(f"/panel/applications/{application['id']}")
    terms = {
        "title": "Backend engineer",
        "start_date": "2027-02-01",
        "amount": "85000.00",
        "currency": "eur",
        "period": "year",
        "expires_date": (dt.date.today() + dt.timedelta(days=10)).isoformat(),
        "expires_time": "17:00",
        "time_zone": "Europe/Berlin",
        "notes": "Within band.",
    }
    wrong = post(
        browser,
        page,
        f"/panel/applications/{application['id']}/offers",
        **{**terms, "amount": "-5", "approver_ids": ["", ""]},
    )
    assert wrong.status_code == 422 and 'id="offer-amount-error"' in wrong.text
    past = post(
        browser, page, f"/panel/applications/{application['id']}/offers", **{**terms, "expires_date": "2020-01-01"}
    )
    assert past.status_code == 422 and 'id="offer-expires-date-error"' in past.text
    made = post(
        browser,
        page,
        f"/panel/applications/{application['id']}/offers",
        **terms,
        approver_ids=[second.user_id, first.user_id, ""],
    )
    assert location(made).endswith("?notice=offer_created#offers")
    [offer] = ok(call("offers.list", owner, application_id=application["id"]))["data"]
    assert [one["approver_id"] for one in offer["approvals"]] == [second.user_id, first.user_id]
    assert offer["salary"]["currency"] == "EUR" and offer["expires_at"] == f"{terms['expires_date']}T16:00:00Z"
    assert "Create the offer" not in browser.get(f"/panel/applications/{application['id']}").text  # one open offer

    with another(live, first) as later:
        waiting = later.get(f"/panel/applications/{application['id']}")
        assert f'action="/panel/offers/{offer["id"]}/approve"' not in waiting.text  # not their turn yet
        early = post(later, waiting, f"/panel/offers/{offer['id']}/approve", decision="approved", note="")
        assert early.status_code == 409 and "It is not your turn" in text(early)
    with another(live, second) as turn:
        mine = turn.get(f"/panel/applications/{application['id']}")
        assert f'action="/panel/offers/{offer["id"]}/approve"' in mine.text
        location(post(turn, mine, f"/panel/offers/{offer['id']}/approve", decision="approved", note="Fine."))
    with another(live, first) as last:
        location(
            post(
                last,
                last.get(f"/panel/applications/{application['id']}"),
                f"/panel/offers/{offer['id']}/approve",
                decision="approved",
                note="",
            )
        )
    assert ok(call("offers.get", owner, id=offer["id"]))["status"] == "approved"

    page = browser.get(f"/panel/applications/{application['id']}")
    sent = post(browser, page, f"/panel/offers/{offer['id']}/send")
    assert location(sent).endswith("?notice=offer_sent#offers")
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "offered"
    assert smtp.inbox.wait_for(hiring.candidate.email).message["Subject"] == "You have an offer"
    again = post(browser, page, f"/panel/offers/{offer['id']}/send")
    assert again.status_code == 409
    confirm = browser.get(f"/panel/offers/{offer['id']}/cancel")
    assert "told by e-mail" in text(confirm)
    withdrawn = post(browser, confirm, f"/panel/offers/{offer['id']}/cancel")
    assert location(withdrawn).endswith("?notice=offer_cancelled#offers")
    assert ok(call("offers.get", owner, id=offer["id"]))["status"] == "cancelled"
    kinds = [event["event"] for event in ok(call("events.list", owner, event="offer.approved"))["data"]]
    assert kinds == ["offer.approved"]


def test_forms_without_the_sessions_token_change_nothing(browser: Browser, hiring: Team, call: Call) -> None:
    owner, application = hiring.owner, hiring.application
    signed_in(browser, owner)
    page = browser.get(f"/panel/applications/{application['id']}")
    interview = book(call, owner, application, [owner], slot())
    for action, fields in (
        ("/panel/jobs", {"title": "Forged", "company": "X", "location": "Y"}),
        (f"/panel/jobs/{hiring.job['id']}/close", {}),
        (f"/panel/applications/{application['id']}/move", {"status": "offered"}),
        (f"/panel/applications/{application['id']}/reject", {}),
        (f"/panel/applications/{application['id']}/review", {"rating": "1", "notes": "forged"}),
        (f"/panel/applications/{application['id']}/interviews", booking(future(30), [owner])),
        (f"/panel/interviews/{interview['id']}/cancel", {}),
    ):
        for token in ("forged", None):
            data = [(name, value) for name, value in fields.items() if not isinstance(value, list)]
            data += [] if token is None else [("csrf_token", token)]
            answer = browser.http.post(action, content=urllib.parse.urlencode(data), headers=FORM)
            assert answer.status_code == 403 and "This form has expired" in text(answer), action
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "interview_scheduled"
    assert ok(call("applications.get", owner, id=application["id"]))["notes"] is None
    assert ok(call("jobs.get", owner, id=hiring.job["id"]))["status"] == "published"
    assert ok(call("interviews.get", owner, id=interview["id"]))["status"] == "scheduled"
    assert len(ok(call("interviews.list", owner, application_id=application["id"]))["data"]) == 1
    assert page.status_code == 200


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def test_another_accounts_jobs_and_applications_are_not_found(
    browser: Browser, hiring: Team, call: Call, client: httpx.Client, admin: Admin
) -> None:
    owner, application = hiring.owner, hiring.application
    sender = admin.user("candidate")
    resume = files_upload(client, sender)
    theirs = ok(call("applications.create", sender, job_id=hiring.job["id"], resume_file_id=resume))
    interview = book(call, owner, application, [owner], slot())
    made = propose(call, owner, application)
    stranger = admin.user("employer")
    signed_in(browser, stranger)
    mine = browser.get("/panel/jobs")
    for path in (
        f"/panel/jobs/{hiring.job['id']}",
        f"/panel/jobs/{hiring.job['id']}/close",
        f"/panel/applications/{application['id']}",
        f"/panel/applications/{application['id']}/reject",
        f"/panel/files/{resume}",
        f"/panel/interviews/{interview['id']}",
        f"/panel/interviews/{interview['id']}/cancel",
        f"/panel/offers/{made['id']}/cancel",
        "/panel/applications/not-an-id",
        f"/panel/applications/{uuid.uuid4()}",
    ):
        answer = browser.get(path)
        assert answer.status_code == 404 and "There is nothing here" in text(answer), path
    for action in (
        f"/panel/applications/{application['id']}/move",
        f"/panel/applications/{theirs['id']}/review",
        f"/panel/jobs/{hiring.job['id']}/publish",
        f"/panel/offers/{made['id']}/send",
    ):
        assert post(browser, mine, action, status="hired", rating="1", notes="x").status_code == 404, action
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "interview_scheduled"
    assert ok(call("offers.get", owner, id=made["id"]))["status"] == "approved"


def test_the_desk_is_for_hiring_accounts(browser: Browser, hiring: Team) -> None:
    signed_in(browser, hiring.candidate)
    for path in ("/panel/jobs", "/panel/jobs/new", f"/panel/applications/{hiring.application['id']}"):
        answer = browser.get(path)
        assert answer.status_code == 403 and "belongs to hiring accounts" in text(answer), path
    assert 'href="/panel/jobs"' not in browser.get("/panel").text


def test_a_resume_downloads_through_the_files_rules(
    browser: Browser, hiring: Team, call: Call, client: httpx.Client, admin: Admin
) -> None:
    sender = admin.user("candidate")
    content = "Ada Lovelace — CV\n".encode()
    resume = files_upload(client, sender, content)
    application = ok(call("applications.create", sender, job_id=hiring.job["id"], resume_file_id=resume))
    signed_in(browser, hiring.owner)
    page = browser.get(f"/panel/applications/{application['id']}")
    assert f'href="/panel/files/{resume}"' in page.text
    link = location(browser.get(f"/panel/files/{resume}"))
    assert link.startswith(f"/files/{resume}/download?") and "signature=" in link
    downloaded = browser.get(link)
    assert downloaded.status_code == 200 and downloaded.content == content
    assert ("file.downloaded", "user", hiring.owner.user_id) in admin.audit_trail(resume)


def files_upload(client: httpx.Client, who: User, content: bytes = b"A plain text CV\n") -> str:
    answer = client.post("/v1/files.upload", headers=who.auth, files={"file": ("cv.txt", content)})
    return str(ok(answer)["id"])


@contextlib.contextmanager
def another(live: LiveServer, user: User) -> Iterator[Browser]:
    """A second browser profile, signed in as `user`."""
    with Browser(live.url) as made:
        yield signed_in(made, user)


def test_lists_grow_with_cursors(browser: Browser, admin: Admin, call: Call) -> None:
    boss = admin.user("employer")
    made = [
        ok(call("jobs.create", boss, title=f"Job {n:02d}", company="Acme", location="Izmir"))["id"] for n in range(27)
    ]
    newest = [
        row["id"]
        for row in admin.sql(
            "SELECT id::text AS id FROM jobs WHERE account_id = %(a)s ORDER BY created_at DESC, id DESC",
            {"a": boss.account_id},
        )
    ]
    assert sorted(newest) == sorted(made)
    signed_in(browser, boss)
    first = browser.get("/panel/jobs")
    shown = re.findall(r'<a href="/panel/jobs/([0-9a-f-]{36})">', first.text)
    assert shown == newest[:25]
    [older] = re.findall(r'<a href="(/panel/jobs\?cursor=[^"]+)">Older', first.text)
    second = browser.get(html.unescape(older))
    assert re.findall(r'<a href="/panel/jobs/([0-9a-f-]{36})">', second.text) == newest[25:]
    assert "Older →" not in second.text and "← Newest" in second.text
    forged = browser.get("/panel/jobs", params={"cursor": "bm90IGEgY3Vyc29y"})
    assert re.findall(r'<a href="/panel/jobs/([0-9a-f-]{36})">', forged.text) == shown


def test_applicants_are_filtered_by_status(browser: Browser, hiring: Team, call: Call, admin: Admin) -> None:
    owner, job_id = hiring.owner, hiring.job["id"]
    later = [ok(call("applications.create", admin.user("candidate"), job_id=job_id)) for _ in range(2)]
    ok(call("applications.update_status", owner, id=later[0]["id"], status="rejected"))
    signed_in(browser, owner)
    every = browser.get(f"/panel/jobs/{job_id}")
    listed = re.findall(r'<a href="/panel/applications/([0-9a-f-]{36})">', every.text)
    newest = admin.sql(
        "SELECT id::text AS id FROM applications WHERE job_id = %(j)s ORDER BY created_at DESC, id DESC", {"j": job_id}
    )
    assert listed == [row["id"] for row in newest] and len(listed) == 3
    assert re.search(r"Rejected <span class=\"hint\">1</span>", every.text)
    rejected = browser.get(f"/panel/jobs/{job_id}", params={"status": "rejected"})
    assert re.findall(r'<a href="/panel/applications/([0-9a-f-]{36})">', rejected.text) == [later[0]["id"]]
    unknown = browser.get(f"/panel/jobs/{job_id}", params={"status": "bogus"})
    assert re.findall(r'<a href="/panel/applications/([0-9a-f-]{36})">', unknown.text) == listed
