"""The hiring desk in a real browser (Debian's headless Chromium, driven by Playwright): an employer signs in, writes
and publishes a job, reads who applied — the cover letter, the résumé —, moves the application on, schedules an
interview with a colleague, submits a scorecard, and makes an offer that the colleague approves in turn before it
is sent; a candidate finds a job, signs up from its Apply page and comes back to it, applies, saves an alert from
the search, adds their interview to a calendar and accepts the offer on their home page. Every step is checked
against the API afterwards. No console error (a Content-Security-Policy violation included), nothing loaded from
elsewhere. Screenshots of the desk's pages go to tests/artifacts/ (git-ignored; docs/ keeps copies)."""

from __future__ import annotations

import datetime as dt
import re
import uuid
import zoneinfo
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import icalendar
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.chromium import Watched, launched, off_loop, watched_page
from tests.files_support import one_page_pdf
from tests.loop import ZONE, propose
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, LiveServer, User, ok

Call = Callable[..., httpx.Response]
ARTIFACTS = Path(__file__).parent / "artifacts"


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"), ALERT_INSTANT_SECONDS="0")


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with launched() as browser:
        yield browser


@pytest.fixture
def pages(chromium: Browser, live: LiveServer) -> Iterator[Callable[[], Page]]:
    """`pages()`: a page in a browser profile of its own on the live server; every one of them is held, at the
    end of the test, to no console error and no request leaving the loopback."""
    made: list[Watched] = []

    def open_page() -> Page:
        made.append(watched_page(chromium, base_url=live.url, accept_downloads=True))
        return made[-1].page

    yield open_page
    for watched in made:
        watched.page.context.close()
        assert watched.console_errors == [] and watched.elsewhere == [], (watched.console_errors, watched.elsewhere)


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def sign_in(page: Page, user: User, start: str = "/panel") -> None:
    page.goto(start)
    page.get_by_label("E-mail", exact=True).fill(user.email)
    page.get_by_label("Password", exact=True).fill(user.password)
    page.get_by_role("button", name="Sign in").click()


def local(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(zoneinfo.ZoneInfo(ZONE))


def test_an_employer_hires_from_the_desk(pages: Callable[[], Page], admin: Admin, call: Call) -> None:
    owner = off_loop(admin.user, "employer")
    colleague = off_loop(admin.user, "employer", account_id=owner.account_id)
    ok(call("profile.update", owner, display_name="Ada Lovelace"))
    ok(call("profile.update", colleague, display_name="Grace Hopper"))
    page = pages()
    sign_in(page, owner)
    expect(page).to_have_url(re.compile(r"/panel$"))
    page.get_by_role("link", name="Jobs", exact=True).first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Jobs")
    page.get_by_role("link", name="New job").click()
    page.get_by_label("Title").fill("Lighthouse keeper")
    page.get_by_label("Company").fill("Acme Maritime")
    page.get_by_label("Location").fill("Izmir")
    page.get_by_label("Employment type").select_option("full_time")
    page.get_by_label("Description").fill("Keep the light on.\nLog every ship.")
    page.get_by_label("Scorecard attributes").fill("Vigilance\nLogbooks")
    page.get_by_role("button", name="Save the draft").click()
    expect(page.get_by_role("status").first).to_contain_text("saved as a draft")
    job_id = page.url.split("/panel/jobs/")[1].split("?")[0]
    page.get_by_role("button", name="Publish").click()
    expect(page.get_by_role("status").first).to_contain_text("The job is published")
    job = ok(call("jobs.get", owner, id=job_id))
    assert (job["status"], job["employment_type"], job["scorecard_attributes"]) == (
        "published",
        "full_time",
        ["Vigilance", "Logbooks"],
    )

    candidate = off_loop(admin.user, "candidate")
    ok(call("profile.update", candidate, display_name="Piri Reis", headline="Cartographer", location="Gelibolu"))
    resume = upload(call, candidate, "piri-reis.pdf", one_page_pdf("Piri Reis CV"))
    letter = "I have kept ships off rocks for twenty years.\nI read the sea."
    application = ok(call("applications.create", candidate, job_id=job_id, cover_letter=letter, resume_file_id=resume))

    page.reload()
    applicants = page.get_by_role("region", name="Applicants")
    expect(applicants.get_by_role("cell", name=candidate.email)).to_be_visible()
    screenshot(page, "desk-job")
    applicants.get_by_role("link", name="Piri Reis").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Piri Reis")
    expect(page.get_by_text("I have kept ships off rocks for twenty years.")).to_be_visible()
    expect(page.get_by_text("Cartographer")).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("link", name="piri-reis.pdf").click()
    assert Path(download.value.path()).read_bytes() == one_page_pdf("Piri Reis CV")

    page.get_by_role("form", name="Where it stands").get_by_role("button", name="Reviewed").click()
    expect(page.get_by_role("status").first).to_contain_text("moved on")
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "reviewed"

    began = local(dt.datetime.now(dt.UTC).replace(second=0, microsecond=0) - dt.timedelta(hours=2))
    schedule = page.get_by_role("form", name="Schedule an interview")
    schedule.get_by_label("Day").fill(began.strftime("%Y-%m-%d"))
    schedule.get_by_label("Starts at").fill(began.strftime("%H:%M"))
    schedule.get_by_label("Minutes").fill("45")
    schedule.get_by_label("Time zone").fill(ZONE)
    schedule.get_by_role("checkbox", name=re.compile("Grace Hopper")).check()
    schedule.get_by_label("Place (optional)").fill("The lighthouse, top floor")
    schedule.get_by_role("button", name="Schedule the interview").click()
    expect(page.get_by_role("status").first).to_contain_text("The interview is booked")
    [interview] = ok(call("interviews.list", owner, application_id=application["id"]))["data"]
    assert interview["starts_at"] == began.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert interview["time_zone"] == ZONE and interview["location"] == "The lighthouse, top floor"
    assert {one["user_id"] for one in interview["interviewers"]} == {owner.user_id, colleague.user_id}
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "interview_scheduled"

    card = page.get_by_role("form", name="Your scorecard")
    card.get_by_role("radio", name="Strong yes").check()
    card.get_by_role("group", name="Vigilance").get_by_role("radio", name="4 — strong").check()
    card.get_by_role("group", name="Logbooks").get_by_role("radio", name="3").check()
    card.get_by_label("Notes").fill("Spotted the reef before I did.")
    card.get_by_role("button", name="Submit my scorecard").click()
    expect(page.get_by_role("status").first).to_contain_text("Your scorecard was submitted")
    [scorecard] = ok(call("scorecards.list", owner, application_id=application["id"]))["data"]
    assert (scorecard["recommendation"], scorecard["notes"]) == ("strong_yes", "Spotted the reef before I did.")
    assert {(one["attribute"], one["rating"]) for one in scorecard["ratings"]} == {("Vigilance", 4), ("Logbooks", 3)}

    offer_form = page.get_by_role("form", name="Make an offer")
    offer_form.get_by_label("First working day").fill("2027-02-01")
    offer_form.get_by_label("Salary").fill("54000.00")
    offer_form.get_by_label("Currency").fill("EUR")
    offer_form.get_by_label("1.").select_option(label="Grace Hopper")
    offer_form.get_by_role("button", name="Create the offer").click()
    expect(page.get_by_role("status").first).to_contain_text("The offer was created")
    screenshot(page, "desk-application")
    [offer] = ok(call("offers.list", owner, application_id=application["id"]))["data"]
    assert offer["status"] == "pending_approval" and offer["salary"] == {
        "amount": "54000.00",
        "currency": "EUR",
        "period": "year",
    }

    approver = pages()
    sign_in(approver, colleague, f"/panel/applications/{application['id']}")
    expect(approver.get_by_text("Spotted the reef before I did.")).to_have_count(0)  # no peeking: hers is owed
    expect(approver.get_by_text("Hidden until you submit your own scorecard")).to_be_visible()
    approver.get_by_role("form", name="Your decision on version 1").get_by_role("button", name="Approve").click()
    expect(approver.get_by_role("status").first).to_contain_text("Your decision on the offer was saved")
    assert ok(call("offers.get", owner, id=offer["id"]))["status"] == "approved"

    page.reload()
    page.get_by_role("button", name="Send to the candidate").click()
    expect(page.get_by_role("status").first).to_contain_text("The offer was sent")
    assert ok(call("offers.get", owner, id=offer["id"]))["status"] == "sent"
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "offered"
    page.goto("/panel/jobs")
    expect(page.get_by_role("link", name="Lighthouse keeper", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="1 Offered applications to Lighthouse keeper")).to_be_visible()
    screenshot(page, "desk-jobs")


def upload(call: Call, who: User, filename: str, content: bytes) -> str:
    """A file uploaded by `who` through files.upload; its id."""
    client: httpx.Client = call.__closure__[0].cell_contents  # type: ignore[index]  # the fixture's client
    answer = client.post("/v1/files.upload", headers=who.auth, files={"file": (filename, content)})
    return str(ok(answer)["id"])


def test_a_candidate_signs_up_from_a_job_applies_saves_an_alert_and_accepts_the_offer(
    pages: Callable[[], Page], admin: Admin, call: Call, smtp: SmtpServer
) -> None:
    owner = off_loop(admin.user, "employer")
    job = ok(call("jobs.create", owner, title="Harbour pilot", company="Acme Maritime", location="Izmir"))
    ok(call("jobs.publish", owner, id=job["id"]))
    page = pages()
    page.goto("/jobs?q=harbour")
    page.get_by_role("link", name="Harbour pilot").click()
    page.get_by_role("link", name="Apply", exact=True).click()
    email = f"piri-{uuid.uuid4().hex[:8]}@example.test"
    password = "the sea is wide and deep"
    signup = page.get_by_role("form", name="New here? Create a candidate account")
    signup.get_by_label("E-mail").fill(email)
    signup.get_by_label("Password").fill(password)
    signup.get_by_label("Your name (optional)").fill("Piri Reis")
    signup.get_by_role("button", name="Create my account").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Check your e-mail")

    page.goto(off_loop(smtp.inbox.wait_for, email).link())
    expect(page.get_by_role("heading", level=1)).to_have_text("E-mail confirmed")
    page.get_by_role("link", name="Sign in").click()
    page.get_by_label("E-mail", exact=True).fill(email)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(f"/jobs/{job['id']}/apply$"))  # back where the sign-up began
    page.get_by_label("Cover letter (optional)").fill("I know every rock of this harbour.")
    page.get_by_label("Résumé (optional)").set_input_files(
        {"name": "piri.pdf", "mimeType": "application/pdf", "buffer": one_page_pdf("Piri Reis CV")}
    )
    page.get_by_role("button", name="Send my application").click()
    expect(page.get_by_role("status").first).to_contain_text("Your application was sent")
    expect(page.get_by_role("link", name="piri.pdf")).to_be_visible()  # the résumé, on the profile now
    candidate = User("", "", email, password, "candidate", off_loop(admin.token, email))
    [application] = ok(call("applications.list", candidate))["data"]
    assert (application["job_id"], application["cover_letter"]) == (job["id"], "I know every rock of this harbour.")
    assert ok(call("profile.me", candidate))["resume"]["filename"] == "piri.pdf"

    page.goto("/jobs?q=harbour+pilot")
    page.get_by_role("link", name="E-mail me jobs like these").click()
    expect(page.get_by_label("Words")).to_have_value("harbour pilot")
    page.get_by_role("radio", name=re.compile("As each job is published")).check()
    page.get_by_role("button", name="Save the alert").click()
    expect(page.get_by_role("status").first).to_contain_text("The alert was saved")
    [alert] = ok(call("alerts.list", candidate))["data"]
    assert (alert["q"], alert["frequency"]) == ("harbour pilot", "instant")

    starts = local(dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0) + dt.timedelta(days=3))
    interview = ok(
        call(
            "interviews.create",
            owner,
            application_id=application["id"],
            starts_at=starts.isoformat(),
            ends_at=(starts + dt.timedelta(hours=1)).isoformat(),
            time_zone=ZONE,
            interviewer_ids=[owner.user_id],
            video_url="https://meet.example.com/harbour",
        )
    )
    made = propose(
        call, owner, application, title="Harbour pilot", salary={"amount": "61000", "currency": "EUR", "period": "year"}
    )
    ok(call("offers.send", owner, id=made["id"]))

    page.goto("/me")
    expect(page.get_by_role("heading", name="Interview for Harbour pilot")).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("link", name="Add to my calendar").click()
    calendar = icalendar.Calendar.from_ical(Path(download.value.path()).read_bytes())
    [event] = calendar.walk("VEVENT")
    assert str(event["UID"]).startswith(interview["id"])
    assert event.decoded("DTSTART") == starts and str(event["DTSTART"].params["TZID"]) == ZONE
    screenshot(page, "candidate-home")
    page.get_by_label("A word for the employer (optional)").fill("Delighted; see you on the first of March.")
    page.get_by_role("button", name="Accept the offer").click()
    expect(page.get_by_role("status").first).to_contain_text("You accepted the offer")
    assert ok(call("offers.get", owner, id=made["id"]))["status"] == "accepted"
    assert ok(call("applications.get", owner, id=application["id"]))["status"] == "hired"


def test_a_signed_out_visitor_saves_an_alert_after_signing_in(
    pages: Callable[[], Page], admin: Admin, call: Call
) -> None:
    person = off_loop(admin.user, "candidate")
    page = pages()
    page.goto("/jobs?q=lighthouse")
    page.get_by_role("link", name="E-mail me jobs like these").click()
    expect(page).to_have_url(re.compile(r"/web/signin\?next="))
    sign_in(page, person, page.url)
    expect(page.get_by_role("heading", level=1)).to_have_text("E-mail me jobs like these")
    expect(page.get_by_label("Words")).to_have_value("lighthouse")
    page.get_by_role("button", name="Save the alert").click()
    expect(page.get_by_role("status").first).to_contain_text("The alert was saved")
    [alert] = ok(call("alerts.list", person))["data"]
    assert (alert["q"], alert["frequency"]) == ("lighthouse", "daily")
