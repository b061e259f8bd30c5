"""Résumés on the public pages: applying with one from `/jobs/{id}/apply`, and the candidate's own on `/me`. A
page reads the file as files.upload does — by its content, at most FILES_MAX_BYTES, refused before the body is
all sent — and keeps it by files.upload's own code, so that the employer gets the very bytes through files.get."""

from __future__ import annotations

import hashlib
import html
import re
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import msgspec
import pytest

from tests.browser import Browser, form, location, multipart, text
from tests.files_support import one_page_pdf, raw_request
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, LiveServer, User, ok

Call = Callable[..., httpx.Response]
NOT_A_PDF = b"MZ\x90\x00\x03\x00\x00\x00 a program, not a document"
REFUSED_TYPE = "none of the accepted types"


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"), PUBLIC_URL="http://jobs.example.test")


@pytest.fixture(scope="module")
def small(settings: Any) -> Iterator[LiveServer]:
    """The service with a 1,000-byte file limit, on the same database and store."""
    with LiveServer(msgspec.structs.replace(settings, files_max_bytes=1000)) as server:
        yield server


@pytest.fixture
def person(admin: Admin) -> User:
    """A candidate of their own: each test applies and sets a résumé afresh."""
    return admin.user("candidate")


def _job(call: Call, employer: User) -> str:
    made = ok(call("jobs.create", employer, title=f"job-{uuid.uuid4().hex[:8]}", company="Acme", location="Izmir"))
    return str(ok(call("jobs.publish", employer, id=made["id"]))["id"])


def _apply_form(browser: Browser, person: User, job_id: str) -> httpx.Response:
    location(browser.sign_in(person))
    page = browser.get(f"/jobs/{job_id}/apply")
    assert page.status_code == 200 and "Send my application" in page.text, page.text
    return page


def _applications(admin: Admin, person: User) -> list[dict[str, Any]]:
    return admin.sql("SELECT id::text AS id FROM applications WHERE candidate_id = %(c)s", {"c": person.user_id})


def _files(admin: Admin, person: User) -> list[dict[str, Any]]:
    return admin.sql("SELECT filename FROM files WHERE owner_id = %(c)s", {"c": person.user_id})


def _download(client: httpx.Client, url: str) -> httpx.Response:
    """GET a download link on the live server (links name PUBLIC_URL), without credentials."""
    parts = urllib.parse.urlsplit(url)
    return client.get(parts.path, params=dict(urllib.parse.parse_qsl(parts.query)))


# --- applying with a résumé --------------------------------------------------------------------------------


def test_applying_with_a_pdf_gives_the_employer_its_bytes(
    browser: Browser, call: Call, client: httpx.Client, employer: User, person: User, admin: Admin
) -> None:
    job = _job(call, employer)
    path = f"/jobs/{job}/apply"
    page = _apply_form(browser, person, job)
    chosen = form(page, path)
    assert chosen.enctype == "multipart/form-data" and chosen.files == ["resume"]
    assert re.search(r'<label for="resume">Résumé \(optional\)</label>\s*<input type="file" id="resume"', page.text)
    assert 'accept=".pdf,.docx,.odt,.txt,' in page.text
    document = one_page_pdf("Ada Lovelace CV")
    fill = {"cover_letter": "My CV is attached."}
    sent = browser.submit(page, path, fill=fill, files={"resume": ("Ada.pdf", document)})
    assert location(sent) == "/me?notice=applied"

    [made] = _applications(admin, person)
    seen = ok(call("applications.get", employer, id=made["id"]))
    assert seen["cover_letter"] == "My CV is attached."
    resume = seen["resume"]
    assert resume["filename"] == "Ada.pdf" and resume["content_type"] == "application/pdf"
    assert resume["size"] == len(document) and resume["sha256"] == hashlib.sha256(document).hexdigest()
    link = ok(call("files.get", employer, id=resume["id"]))["download_url"]
    got = _download(client, link)
    assert got.status_code == 200 and got.content == document
    assert got.headers["Content-Type"] == "application/pdf"
    home = browser.get("/me")
    assert "résumé: Ada.pdf" in text(home)


def test_no_file_chosen_applies_without_a_resume(
    browser: Browser, call: Call, employer: User, person: User, admin: Admin
) -> None:
    job = _job(call, employer)
    page = _apply_form(browser, person, job)
    assert location(browser.submit(page, f"/jobs/{job}/apply")) == "/me?notice=applied"
    [made] = _applications(admin, person)
    assert ok(call("applications.get", employer, id=made["id"]))["resume"] is None
    assert "résumé: none" in text(browser.get("/me"))


def test_a_file_named_cv_pdf_that_is_no_pdf_is_refused_and_the_letter_kept(
    browser: Browser, call: Call, employer: User, person: User, admin: Admin
) -> None:
    job = _job(call, employer)
    page = _apply_form(browser, person, job)
    letter = "Dear team,\nplease read <this>."
    answer = browser.submit(
        page, f"/jobs/{job}/apply", fill={"cover_letter": letter}, files={"resume": ("cv.pdf", NOT_A_PDF)}
    )
    assert answer.status_code == 415 and REFUSED_TYPE in answer.text
    assert "PDF, DOCX (Word), ODT (OpenDocument text), plain UTF-8 text" in answer.text
    assert "Dear team,\nplease read &lt;this&gt;.</textarea>" in answer.text
    assert _applications(admin, person) == [] and _files(admin, person) == []
    empty = browser.submit(page, f"/jobs/{job}/apply", files={"resume": ("cv.txt", b"")})
    assert empty.status_code == 422 and "The résumé file is empty" in text(empty)
    assert _applications(admin, person) == []


def test_a_resume_past_the_limit_is_413_and_nothing_is_made(
    small: LiveServer, call: Call, employer: User, person: User, admin: Admin
) -> None:
    job = _job(call, employer)
    path = f"/jobs/{job}/apply"
    browser = Browser(small.url)
    try:
        page = _apply_form(browser, person, job)
        too_large = browser.submit(page, path, files={"resume": ("cv.txt", b"a" * 1001)})
        assert too_large.status_code == 413 and "A résumé holds up to" in text(too_large)
        assert _applications(admin, person) == [] and _files(admin, person) == []
        # Announced larger than the limit allows: refused before one byte of the body is sent.
        cookies = "; ".join(f"{name}={value}" for name, value in browser.http.cookies.items())
        head = (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nCookie: {cookies}\r\nContent-Length: 20000000\r\n"
            "Content-Type: multipart/form-data; boundary=b0undary\r\n\r\n"
        )
        assert raw_request(small.port, head.encode(), []).startswith(b"HTTP/1.1 413")
        at_limit = browser.submit(page, path, files={"resume": ("cv.txt", b"a" * 1000)})
        assert location(at_limit) == "/me?notice=applied"
        assert [row["filename"] for row in _files(admin, person)] == ["cv.txt"]
    finally:
        browser.close()


def test_nobody_signed_in_has_no_body_read(live: LiveServer) -> None:
    """Without a session the answer (back to the page, to sign in) comes before any of the 20 MB is sent."""
    head = (
        f"POST /jobs/{uuid.uuid4()}/apply HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\n"
        "Content-Type: multipart/form-data; boundary=b0undary\r\n\r\n"
    )
    assert raw_request(live.port, head.encode(), []).startswith(b"HTTP/1.1 303")


def test_the_form_holds_only_its_fields_each_once_and_bounded(
    browser: Browser, call: Call, employer: User, person: User, admin: Admin
) -> None:
    job = _job(call, employer)
    path = f"/jobs/{job}/apply"
    token = form(_apply_form(browser, person, job), path).value("csrf_token")

    def send(fields: list[tuple[str, str]]) -> httpx.Response:
        body, content_type = multipart(fields, {"resume": ("", b"")})
        return browser.http.post(path, content=body, headers={"Content-Type": content_type})

    assert send([("csrf_token", token), ("role", "admin")]).status_code == 400
    assert send([("csrf_token", token), ("cover_letter", "a"), ("cover_letter", "b")]).status_code == 400
    past = send([("csrf_token", token), ("cover_letter", "a" * 80_001)])
    assert past.status_code == 413
    form_encoded = browser.http.post(path, data={"csrf_token": token, "cover_letter": "x"})
    assert form_encoded.status_code == 400 and "The form could not be read" in form_encoded.text
    assert _applications(admin, person) == []
    longest = "\N{GRINNING FACE}" * 20_000  # 20,000 characters of 4 bytes each: the field's whole bound
    assert location(send([("csrf_token", token), ("cover_letter", longest)])) == "/me?notice=applied"


# --- the candidate's own résumé on /me ---------------------------------------------------------------------


def test_home_uploads_and_replaces_the_profiles_resume(
    browser: Browser, call: Call, client: httpx.Client, person: User
) -> None:
    location(browser.sign_in(person))
    home = browser.get("/me")
    assert "You have no résumé on your profile yet." in text(home)
    assert form(home, "/me/resume").enctype == "multipart/form-data" and form(home, "/me/resume").files == ["resume"]
    first = "Ayşe Yılmaz — backend engineer\n".encode()
    sent = browser.submit(home, "/me/resume", files={"resume": ("first.txt", first)})
    assert location(sent) == "/me?notice=resume"
    home = browser.follow(sent)
    assert "Your résumé was saved" in text(home) and "first.txt" in text(home)
    resume = ok(call("profile.me", person))["resume"]
    assert resume["filename"] == "first.txt" and resume["content_type"] == "text/plain; charset=utf-8"
    [link] = re.findall(r'<a href="([^"]+/files/[^"]+/download[^"]+)" download>first.txt</a>', home.text)
    assert _download(client, html.unescape(link)).content == first

    document = one_page_pdf("Second CV")
    replaced = browser.submit(home, "/me/resume", files={"resume": ("second.pdf", document)})
    assert location(replaced) == "/me?notice=resume"
    assert ok(call("profile.me", person))["resume"]["filename"] == "second.pdf"

    home = browser.get("/me")
    refused = browser.submit(home, "/me/resume", files={"resume": ("cv.pdf", NOT_A_PDF)})
    assert refused.status_code == 415 and REFUSED_TYPE in refused.text
    forged = browser.submit(home, "/me/resume", fill={"csrf_token": "forged"}, files={"resume": ("x.pdf", document)})
    assert forged.status_code == 403
    assert ok(call("profile.me", person))["resume"]["filename"] == "second.pdf"


def test_the_profiles_resume_is_offered_when_applying(
    browser: Browser, call: Call, employer: User, person: User, admin: Admin
) -> None:
    """Ticked by default; a file chosen on the form is sent instead."""
    location(browser.sign_in(person))
    home = browser.get("/me")
    location(browser.submit(home, "/me/resume", files={"resume": ("on-file.txt", b"Ada, on file\n")}))
    on_file = ok(call("profile.me", person))["resume"]
    first, second = _job(call, employer), _job(call, employer)
    page = browser.get(f"/jobs/{first}/apply")
    offered = r'name="profile_resume" value="yes" checked>\s*Send the résumé on my profile, on-file.txt'
    assert re.search(offered, page.text)
    location(browser.submit(page, f"/jobs/{first}/apply", fill={"profile_resume": "yes"}))
    page = browser.get(f"/jobs/{second}/apply")
    chosen = {"resume": ("chosen.txt", b"Ada, chosen\n")}
    location(browser.submit(page, f"/jobs/{second}/apply", fill={"profile_resume": "yes"}, files=chosen))
    rows = admin.sql(
        "SELECT a.job_id::text AS job_id, f.filename FROM applications AS a "
        "JOIN application_files AS af ON af.application_id = a.id JOIN files AS f ON f.id = af.file_id "
        "WHERE a.candidate_id = %(c)s",
        {"c": person.user_id},
    )
    sent = {row["job_id"]: row["filename"] for row in rows}
    assert sent == {first: "on-file.txt", second: "chosen.txt"}
    [made] = [row for row in ok(call("applications.list", person))["data"] if row["job_id"] == first]
    assert made["resume"] == on_file
