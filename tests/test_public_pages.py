"""Public job pages, applying from them, a candidate's home, the sitemap and the aggregators' feed
(docs/public-pages.md), over real HTTP against a real database and a real SMTP server."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest

from procedures.public_pages.jobposting import description_html, remote_area, script_json
from procedures.public_pages.xmltext import cdata
from rpc.settings import SettingsError
from tests.browser import Browser, location, text
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, User, ok, settings_for

HOSTILE = "</script><script>alert(1)</script> \"quoted\" 'single' ]]> & <b>bold</b>"
PER_FILE = 3
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
# Google's JobPosting: required, then recommended properties (developers.google.com/search/docs/appearance/
# structured-data/job-posting).
REQUIRED = {"title", "description", "datePosted", "hiringOrganization"}
RECOMMENDED = {"validThrough", "employmentType", "identifier", "directApply"}


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(
        database,
        smtp,
        tmp_path_factory.mktemp("data"),
        PUBLIC_URL="http://jobs.example.test",
        SITEMAP_URLS_PER_FILE=str(PER_FILE),
        JOB_VALID_DAYS="30",
    )


Publish = Callable[..., dict[str, Any]]
Call = Callable[..., httpx.Response]


@pytest.fixture
def publish(call: Callable[..., httpx.Response], employer: User) -> Publish:
    def make(publish: bool = True, **fields: Any) -> dict[str, Any]:
        values = {"title": "Data engineer", "company": "Acme", "location": "Izmir", **fields}
        job: dict[str, Any] = ok(call("jobs.create", employer, **values))
        return ok(call("jobs.publish", employer, id=job["id"])) if publish else job

    return make


class _JsonLd(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[str] = []
        self.scripts = 0
        self._inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
            self._inside = dict(attrs).get("type") == "application/ld+json"
            if self._inside:
                self.blocks.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._inside:
            self.blocks[-1] += data


def json_ld(page: str) -> list[dict[str, Any]]:
    parser = _JsonLd()
    parser.feed(page)
    assert parser.scripts == len(parser.blocks), "no script but the JSON-LD"
    return [json.loads(block) for block in parser.blocks]


def parse_xml(document: str | bytes) -> ET.Element:
    """Our own service's answer, parsed strictly (expat: any malformed byte is an error)."""
    return ET.fromstring(document)  # noqa: S314 - the document is the service's under test, not a stranger's


def iso(value: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(value)
    assert moment.tzinfo is not None
    return moment


# --- the job page ------------------------------------------------------------------------------------------


def test_job_page_shows_the_job_and_its_job_posting(client: httpx.Client, publish: Publish) -> None:
    job = publish(description="First line\nsecond line\n\nNew paragraph", employment_type="contract")
    page = client.get(f"/jobs/{job['id']}")
    assert page.status_code == 200
    assert page.headers["Cache-Control"] == "public, max-age=60"
    assert page.headers["Content-Type"].startswith("text/html")
    assert "set-cookie" not in page.headers, "one page for everyone: nothing of the visitor"
    body = page.text
    for shown in ("Data engineer", "Acme", "Izmir", "Contract", f'href="/jobs/{job["id"]}/apply"'):
        assert shown in body
    assert "First line<br>second line</p><p>New paragraph" in body
    assert "<time datetime=" in body
    [posting] = json_ld(body)
    assert posting.keys() >= REQUIRED | RECOMMENDED
    assert posting["@context"] == "https://schema.org/" and posting["@type"] == "JobPosting"
    assert posting["title"] == "Data engineer"
    assert posting["description"] == "<p>First line<br>second line</p><p>New paragraph</p>"
    posted = iso(posting["datePosted"])
    assert posted == iso(job["published_at"])
    assert iso(posting["validThrough"]) - posted == dt.timedelta(days=30)
    assert posting["employmentType"] == "CONTRACTOR"
    assert posting["hiringOrganization"] == {"@type": "Organization", "name": "Acme"}
    assert posting["identifier"] == {"@type": "PropertyValue", "name": "Acme", "value": job["id"]}
    assert posting["directApply"] is True
    assert posting["jobLocation"] == {
        "@type": "Place",
        "address": {"@type": "PostalAddress", "addressLocality": "Izmir"},
    }
    assert "jobLocationType" not in posting
    assert posting["url"] == f"http://jobs.example.test/jobs/{job['id']}"


@pytest.mark.parametrize(
    ("ours", "google"),
    [
        ("full_time", "FULL_TIME"),
        ("part_time", "PART_TIME"),
        ("contract", "CONTRACTOR"),
        ("internship", "INTERN"),
        ("temporary", "TEMPORARY"),
    ],
)
def test_employment_types_map_to_googles(client: httpx.Client, publish: Publish, ours: str, google: str) -> None:
    job = publish(employment_type=ours)
    [posting] = json_ld(client.get(f"/jobs/{job['id']}").text)
    assert posting["employmentType"] == google


def test_a_remote_job_is_telecommute_with_where_applicants_may_be(client: httpx.Client, publish: Publish) -> None:
    job = publish(location="Remote (EU)")
    [posting] = json_ld(client.get(f"/jobs/{job['id']}").text)
    assert posting["jobLocationType"] == "TELECOMMUTE"
    assert posting["applicantLocationRequirements"] == {"@type": "AdministrativeArea", "name": "EU"}
    assert "jobLocation" not in posting
    assert remote_area("remote") == "Anywhere"
    assert remote_area("Remote - Germany") == "Germany"
    assert remote_area("Remoteville") is None


def test_hostile_text_is_escaped_for_every_place(client: httpx.Client, publish: Publish) -> None:
    job = publish(title=HOSTILE, company=HOSTILE, location=HOSTILE, description=HOSTILE + "\u2028\u2029")
    page = client.get(f"/jobs/{job['id']}")
    assert page.status_code == 200
    assert "<script>alert(1)" not in page.text and "<b>bold" not in page.text
    [posting] = json_ld(page.text)  # exactly one script, whole: nothing ended it early
    assert posting["title"] == HOSTILE
    assert posting["hiringOrganization"]["name"] == HOSTILE
    assert posting["description"] == description_html(HOSTILE + "\u2028\u2029")
    assert 'content="&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &#34;quoted&#34;' in page.text
    assert text(page).count(HOSTILE) >= 2, "shown as text"
    encoded = script_json({"t": "</script>\u2028&"})
    assert "<" not in encoded and "&" not in encoded and "\u2028" not in encoded
    assert json.loads(encoded) == {"t": "</script>\u2028&"}


def test_closed_job_answers_410_without_a_job_posting(
    client: httpx.Client, publish: Publish, call: Callable[..., httpx.Response], employer: User
) -> None:
    job = publish()
    ok(call("jobs.close", employer, id=job["id"]))
    page = client.get(f"/jobs/{job['id']}")
    assert page.status_code == 410
    assert "closed" in page.text and "application/ld+json" not in page.text
    assert client.get(f"/jobs/{job['id']}/apply").status_code == 410


def test_drafts_unknown_and_malformed_ids_answer_404(client: httpx.Client, publish: Publish) -> None:
    draft = publish(publish=False)
    for path in (f"/jobs/{draft['id']}", f"/jobs/{uuid.uuid4()}", "/jobs/not-an-id", f"/jobs/{draft['id']}/apply"):
        page = client.get(path)
        assert page.status_code == 404, path
        assert "application/ld+json" not in page.text


def test_search_page_finds_published_jobs(client: httpx.Client, publish: Publish) -> None:
    word = f"zebra{uuid.uuid4().hex[:6]}"
    job = publish(title=f"Keeper {word}")
    publish(title=f"Draft {word}", publish=False)
    page = client.get("/jobs", params={"q": word})
    assert page.status_code == 200
    assert f'href="/jobs/{job["id"]}"' in page.text
    assert "Draft" not in page.text
    assert "1 open job." in page.text


# --- applying ----------------------------------------------------------------------------------------------


def events_of(admin: Admin, application_id: str) -> list[str]:
    rows = admin.sql(
        "SELECT kind FROM events WHERE convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'application_id' = %(a)s",
        {"a": application_id},
    )
    return [row["kind"] for row in rows]


def test_sign_up_then_sign_in_and_apply_from_the_page(
    browser: Browser, publish: Publish, smtp: SmtpServer, admin: Admin
) -> None:
    job = publish(title="Engineer <&>")
    apply_path = f"/jobs/{job['id']}/apply"
    page = browser.get(apply_path)
    assert page.status_code == 200 and page.headers["Cache-Control"] == "no-store"
    email = f"cand-{uuid.uuid4().hex[:8]}@example.test"
    password = "a long enough password"
    fill = {"email": email, "password": password, "display_name": "Cem"}
    answer = browser.submit(page, "/web/signup", fill=fill)
    assert answer.status_code == 200 and "Check your e-mail" in answer.text
    [user] = admin.sql("SELECT role FROM users WHERE email = %(e)s", {"e": email})
    assert user["role"] == "candidate"
    assert browser.open_link(smtp.inbox.wait_for(email).link()).status_code == 200

    page = browser.get(apply_path)
    signed_in = browser.submit(page, "/web/signin", fill={"email": email, "password": password})
    assert location(signed_in) == apply_path
    form_page = browser.follow(signed_in)
    assert "Send my application" in form_page.text
    sent = browser.submit(form_page, apply_path, fill={"cover_letter": "Dear team,\nI apply."})
    assert location(sent) == "/me?notice=applied"

    [application] = admin.sql(
        "SELECT a.id::text AS id, a.cover_letter, a.status FROM applications a JOIN users u ON u.id = a.candidate_id "
        "WHERE u.email = %(e)s",
        {"e": email},
    )
    assert application["cover_letter"] == "Dear team,\nI apply." and application["status"] == "pending"
    assert events_of(admin, application["id"]) == ["application.created"]
    mail = smtp.inbox.wait_for(email, count=2)
    assert mail.message["Subject"] == "Your application was received"
    assert "Engineer <&>" in mail.text and "Engineer &lt;&amp;&gt;" in mail.html
    assert "http://jobs.example.test/me" in mail.text

    again = browser.get(apply_path)
    assert "You applied to this job" in again.text and "Send my application" not in again.text
    twice = browser.submit(form_page, apply_path, fill={"cover_letter": "Again"})
    assert twice.status_code == 409
    assert "You have already applied to this job" in twice.text
    assert len(admin.sql("SELECT 1 FROM applications WHERE id = %(a)s", {"a": application["id"]})) == 1


def test_apply_needs_the_sessions_csrf_token(browser: Browser, publish: Publish, candidate: User, admin: Admin) -> None:
    job = publish()
    browser.follow(browser.sign_in(candidate))
    page = browser.get(f"/jobs/{job['id']}/apply")
    refused = browser.submit(page, f"/jobs/{job['id']}/apply", fill={"csrf_token": "forged"})
    assert refused.status_code == 403
    assert not admin.sql("SELECT 1 FROM applications WHERE candidate_id = %(c)s", {"c": candidate.user_id})


def test_an_employer_is_told_to_apply_as_a_candidate(browser: Browser, publish: Publish, colleague: User) -> None:
    job = publish()
    browser.sign_in(colleague)
    page = browser.get(f"/jobs/{job['id']}/apply")
    assert page.status_code == 403 and "candidate account" in page.text


def test_a_cover_letter_too_long_is_refused_and_kept(browser: Browser, publish: Publish, candidate: User) -> None:
    job = publish()
    browser.sign_in(candidate)
    page = browser.get(f"/jobs/{job['id']}/apply")
    answer = browser.submit(page, f"/jobs/{job['id']}/apply", fill={"cover_letter": "é" * 20_001})
    assert answer.status_code == 422 and "20,000 characters" in answer.text


# --- the candidate's home ----------------------------------------------------------------------------------


def test_home_lists_applications_with_history_and_withdraws(
    browser: Browser,
    publish: Publish,
    candidate: User,
    call: Callable[..., httpx.Response],
    employer: User,
    admin: Admin,
) -> None:
    job = publish(title="Pipeline fitter")
    application = ok(call("applications.create", candidate, job_id=job["id"]))
    ok(call("applications.update_status", employer, id=application["id"], status="reviewed"))
    assert location(browser.get("/me")).startswith("/web/signin?next=%2Fme")
    browser.sign_in(candidate, "/me")
    home = browser.get("/me")
    assert home.status_code == 200 and home.headers["Cache-Control"] == "no-store"
    page = text(home)
    assert "Pipeline fitter" in page and "Status: <strong>Reviewed</strong>" in page and "Sent → Reviewed" in page
    assert candidate.email in page and 'href="/jobs"' in home.text
    withdraw = f"/me/applications/{application['id']}/withdraw"
    assert f'href="{withdraw}"' in home.text and 'action="' + withdraw not in home.text  # asked first
    confirm = browser.get(withdraw)
    assert confirm.status_code == 200 and "Withdraw your application to Pipeline fitter?" in text(confirm)
    assert events_of(admin, application["id"]).count("application.status_changed") == 1  # asking changes nothing
    withdrawn = browser.submit(confirm, withdraw)
    assert location(withdrawn) == "/me?notice=withdrawn"
    after = text(browser.get("/me"))
    assert "Status: <strong>Withdrawn</strong>" in after and "Reviewed → Withdrawn" in after
    kinds = events_of(admin, application["id"])
    assert kinds.count("application.status_changed") == 2
    again = browser.submit(confirm, withdraw)
    assert again.status_code == 409
    assert "can no longer be withdrawn" in text(browser.get(withdraw))


def test_withdraw_refuses_a_forged_form_and_others_applications(
    browser: Browser,
    publish: Publish,
    candidate: User,
    stranger: User,
    call: Callable[..., httpx.Response],
    admin: Admin,
) -> None:
    job = publish()
    theirs = ok(call("applications.create", candidate, job_id=job["id"]))
    browser.sign_in(candidate)
    confirm = browser.get(f"/me/applications/{theirs['id']}/withdraw")
    assert (
        browser.submit(confirm, f"/me/applications/{theirs['id']}/withdraw", fill={"csrf_token": "x"}).status_code
        == 403
    )
    other = Browser(str(browser.http.base_url))
    try:
        mine = admin.user("candidate")
        other.sign_in(mine)
        page = other.get("/me")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        answer = other.http.post(f"/me/applications/{theirs['id']}/withdraw", data={"csrf_token": token[1]})
        assert answer.status_code == 404
        assert other.get(f"/me/applications/{theirs['id']}/withdraw").status_code == 404
    finally:
        other.close()
    assert admin.sql("SELECT status FROM applications WHERE id = %(a)s", {"a": theirs["id"]})[0]["status"] == "pending"


# --- sitemap and feed --------------------------------------------------------------------------------------


def published_ids(admin: Admin) -> set[str]:
    return {row["id"] for row in admin.sql("SELECT id::text AS id FROM jobs WHERE status = 'published'")}


def test_sitemap_splits_into_files_of_at_most_the_setting(client: httpx.Client, publish: Publish, admin: Admin) -> None:
    for _ in range(PER_FILE + 1):
        publish()
    index = client.get("/sitemap.xml")
    assert index.status_code == 200 and index.headers["Content-Type"].startswith("application/xml")
    root = parse_xml(index.content)
    assert root.tag == f"{SITEMAP}sitemapindex"
    locs = [node.findtext(f"{SITEMAP}loc") for node in root]
    total = len(published_ids(admin))
    assert len(locs) == -(-total // PER_FILE)
    assert locs[0] == "http://jobs.example.test/sitemap-1.xml"
    seen: list[str] = []
    for number in range(1, len(locs) + 1):
        part = parse_xml(client.get(f"/sitemap-{number}.xml").content)
        assert part.tag == f"{SITEMAP}urlset" and 1 <= len(part) <= PER_FILE
        for url in part:
            seen.append(str(url.findtext(f"{SITEMAP}loc")))
            lastmod = str(url.findtext(f"{SITEMAP}lastmod"))
            assert iso(lastmod.replace("Z", "+00:00"))
    assert sorted(seen) == sorted(f"http://jobs.example.test/jobs/{i}" for i in published_ids(admin))
    assert client.get(f"/sitemap-{len(locs) + 1}.xml").status_code == 404
    assert client.get("/sitemap-0.xml").status_code == 404


def test_feed_is_valid_xml_whatever_the_text_holds(client: httpx.Client, publish: Publish, admin: Admin) -> None:
    nasty = HOSTILE + " ]]]]> \x00\x0b\ufffe bell\x07 done"
    job = publish(title=nasty.replace("\x00", ""), description="Line one\nLine two ]]>", employment_type="part_time")
    feed = client.get("/feeds/jobs.xml")
    assert feed.status_code == 200 and feed.headers["Content-Type"].startswith("application/xml")
    root = parse_xml(feed.content)
    assert root.tag == "source"
    assert root.findtext("publisher") == "jobs.example.test"
    assert root.findtext("publisherurl") == "http://jobs.example.test"
    assert email.utils.parsedate_to_datetime(str(root.findtext("lastBuildDate")))
    jobs = {node.findtext("referencenumber"): node for node in root.findall("job")}
    assert set(jobs) == published_ids(admin)
    mine = jobs[job["id"]]
    assert mine.findtext("title") == job["title"].replace("\x0b", "").replace("\ufffe", "").replace("\x07", "")
    assert mine.findtext("url") == f"http://jobs.example.test/jobs/{job['id']}"
    assert mine.findtext("company") == "Acme" and mine.findtext("city") == "Izmir"
    assert mine.findtext("description") == "<p>Line one<br>Line two ]]&gt;</p>"
    assert mine.findtext("jobtype") == "parttime"
    assert email.utils.parsedate_to_datetime(str(mine.findtext("date"))) == iso(job["published_at"])
    for field in ("title", "date", "referencenumber", "url", "company", "city", "description", "jobtype"):
        assert mine.find(field) is not None
    assert "<![CDATA[" in feed.text


def test_cdata_survives_every_terminator() -> None:
    for value in ("]]>", "a]]>b]]>c", "]]]]>", "]", "x\x00y\ud800z"):
        parsed = parse_xml(f"<t>{cdata(value)}</t>").text or ""
        assert parsed == value.replace("\x00", "").replace("\ud800", "")


def test_feed_and_sitemap_answer_304_until_the_published_set_changes(
    client: httpx.Client, publish: Publish, call: Callable[..., httpx.Response], employer: User
) -> None:
    job = publish()
    for path in ("/feeds/jobs.xml", "/sitemap.xml"):
        first = client.get(path)
        etag, modified = first.headers["ETag"], first.headers["Last-Modified"]
        assert first.headers["Cache-Control"] == "public, max-age=60"
        unchanged = client.get(path, headers={"If-None-Match": etag})
        assert unchanged.status_code == 304 and unchanged.content == b"" and unchanged.headers["ETag"] == etag
        assert client.get(path, headers={"If-Modified-Since": modified}).status_code == 304
        assert client.get(path, headers={"If-None-Match": '"other"', "If-Modified-Since": modified}).status_code == 200
        assert client.get(path, headers={"If-Modified-Since": "garbage"}).status_code == 200
    etag = client.get("/feeds/jobs.xml").headers["ETag"]
    ok(call("jobs.update", employer, id=job["id"], title="Renamed"))
    changed = client.get("/feeds/jobs.xml", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert "Renamed" in changed.text


def test_settings_out_of_range_stop_the_start(database: str) -> None:
    from procedures.public_pages.settings import PublicSettings

    with pytest.raises(SettingsError):
        PublicSettings.of(settings_for(database, SITEMAP_URLS_PER_FILE="50001"))
    with pytest.raises(SettingsError):
        PublicSettings.of(settings_for(database, JOB_VALID_DAYS="0"))
    assert PublicSettings.of(settings_for(database)).valid_days == 60
